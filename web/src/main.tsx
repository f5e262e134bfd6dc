// Weft's web UI: the frame (header, navigation, the server's config) and
// the screens by route. Each screen lives in src/screens/ and reads what it
// shows from the URL (see router.ts).
import { render } from 'preact'
import type { ComponentChildren } from 'preact'
import { useEffect, useErrorBoundary, useState } from 'preact/hooks'
import { api, type Config } from './api'
import { ConfigContext, unknownConfig } from './config'
import { href, navigated, useRoute } from './router'
import { RunsScreen } from './screens/runs'
import { RunScreen } from './screens/run'
import { WorkersScreen } from './screens/workers'
import { SchedulesScreen } from './screens/schedules'
import { StartScreen } from './screens/start'
import { Problem } from './ui'
import './style.css'

// Guard shows a screen's own failure as a message, never a blank page; a
// new route tries again.
function Guard({ children }: { children: ComponentChildren }) {
  const [error, reset] = useErrorBoundary()
  useEffect(() => {
    const again = () => reset()
    window.addEventListener('popstate', again)
    window.addEventListener(navigated, again)
    return () => {
      window.removeEventListener('popstate', again)
      window.removeEventListener(navigated, again)
    }
  }, [])
  if (error) return <Problem error={error} title="This page failed; the links above still work" />
  return <>{children}</>
}

function App() {
  const route = useRoute()
  const [config, setConfig] = useState<Config | null>(null)
  const [error, setError] = useState<unknown>(null)
  useEffect(() => {
    api.config().then(setConfig, setError)
  }, [])
  const [first = 'runs', second] = route.path
  let screen
  if (first === 'runs' && second === undefined) screen = <RunsScreen route={route} />
  else if (first === 'runs' && route.path.length === 2) screen = <RunScreen id={second} route={route} />
  else if (first === 'workers' && route.path.length === 1) screen = <WorkersScreen />
  else if (first === 'schedules' && route.path.length === 1) screen = <SchedulesScreen />
  else if (first === 'start' && route.path.length === 1) screen = <StartScreen route={route} />
  else
    screen = (
      <Problem
        error={new Error(`There is no page at ${location.pathname}. Try the list of runs, the workers or the schedules.`)}
      />
    )
  return (
    <ConfigContext.Provider value={config ?? unknownConfig}>
      <header class="top">
        <a class="brand" href={href(['runs'])}>
          Weft
        </a>
        <nav>
          <a href={href(['runs'])} class={first === 'runs' ? 'active' : ''}>
            Runs
          </a>
          <a href={href(['workers'])} class={first === 'workers' ? 'active' : ''}>
            Workers
          </a>
          <a href={href(['schedules'])} class={first === 'schedules' ? 'active' : ''}>
            Schedules
          </a>
          <a href={href(['start'])} class={first === 'start' ? 'active' : ''}>
            Start a run
          </a>
        </nav>
        <span class="spacer" />
        {config?.readOnly && <span class="badge">read-only</span>}
        {config?.version && <span class="muted">{config.version}</span>}
      </header>
      {error !== null && <Problem error={error} title="Cannot read the server's settings" />}
      <main>
        <Guard>{screen}</Guard>
      </main>
    </ConfigContext.Provider>
  )
}

render(<App />, document.getElementById('app')!)
