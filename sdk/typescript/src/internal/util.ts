// Small helpers shared by the worker and the client.

/** Logger is what the SDK logs to: console fits, as does pino or any logger with these methods. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

/** consoleLogger writes one line per entry to stderr: the level, the message, the fields as JSON. */
export function consoleLogger(level: 'debug' | 'info' | 'warn' | 'error' = 'info'): Logger {
  const order = { debug: 0, info: 1, warn: 2, error: 3 }
  const at = order[level]
  const write = (l: keyof typeof order) => (msg: string, fields?: Record<string, unknown>) => {
    if (order[l] < at) return
    let extra = ''
    if (fields !== undefined && Object.keys(fields).length > 0) {
      try {
        extra = ' ' + JSON.stringify(fields, (_k, v: unknown) => (v instanceof Error ? v.message : typeof v === 'bigint' ? String(v) : v))
      } catch {
        extra = ' (fields not shown)'
      }
    }
    process.stderr.write(`${new Date().toISOString()} ${l.toUpperCase()} ${msg}${extra}\n`)
  }
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') }
}

/** sleep resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(t)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** errorMessage is what an error (or any thrown value) says. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message
  if (typeof err === 'string') return err
  try {
    const s = JSON.stringify(err)
    if (s !== undefined) return s
  } catch {
    // fall through
  }
  return String(err)
}
