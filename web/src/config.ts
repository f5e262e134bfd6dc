// The server's settings (GET /api/config), shared by every screen.
import { createContext } from 'preact'
import { useContext } from 'preact/hooks'
import type { Config } from './api'

// Until the server says otherwise, the UI offers no actions.
export const unknownConfig: Config = { readOnly: true, traceUrl: '', version: '' }

export const ConfigContext = createContext<Config>(unknownConfig)

export const useConfig = () => useContext(ConfigContext)
