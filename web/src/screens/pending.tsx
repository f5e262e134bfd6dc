// Where the run is stuck: each node that has not finished, with how long
// it has been at it, its attempt and worker, its last heartbeat and what it
// reported, when it times out, when its next attempt is due, and, for a
// node waiting for a person, its deadline and the command that answers it.
import { useEffect, useState } from 'preact/hooks'
import type { Pending } from '../api'
import { href } from '../router'
import { Ago, Status } from '../ui'

// useNow is the time, ticking every second, so that relative times move.
function useNow(): number {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [])
  return now
}

function name(p: Pending): string {
  let s = p.node
  if (p.item !== undefined && p.item !== null) s += `[${p.item}]`
  if (p.iteration > 1) s += ` · iteration ${p.iteration}`
  return s
}

export function PendingPanel({ pending, onSelect }: { pending: Pending[]; onSelect: (node: string) => void }) {
  const now = useNow()
  if (pending.length === 0) return null
  return (
    <section class="panel pending" aria-label="where it waits">
      <h2>Where it waits</h2>
      <table>
        <thead>
          <tr>
            <th>node</th>
            <th>status</th>
            <th>for</th>
            <th>attempt · worker</th>
            <th>last heartbeat</th>
            <th>next</th>
          </tr>
        </thead>
        <tbody>
          {pending.map((p) => (
            <tr key={`${p.node}/${p.iteration}/${p.item ?? ''}`} data-pending={p.node}>
              <td class="mono">
                <a
                  href={href(['runs'])}
                  onClick={(e) => {
                    e.preventDefault()
                    onSelect(p.node)
                  }}
                >
                  {name(p)}
                </a>
              </td>
              <td>
                <Status status={p.status} />
                {p.waitingFor && <span class="muted"> for {p.waitingFor === 'signal' ? 'a person (signal)' : p.waitingFor}</span>}
                {p.child && (
                  <>
                    {' '}
                    <a class="mono" href={href(['runs', p.child])}>
                      {p.child}
                    </a>
                  </>
                )}
              </td>
              <td>{p.since ? <Ago at={p.since} now={now} /> : '—'}</td>
              <td>
                {p.attempt ? `#${p.attempt}` : '—'}
                {p.worker && p.status === 'running' ? <span class="mono"> · {p.worker}</span> : ''}
              </td>
              <td>
                {p.status !== 'running' ? (
                  '—'
                ) : p.heartbeatAt ? (
                  <>
                    <Ago at={p.heartbeatAt} now={now} />
                    {p.heartbeatDetails !== undefined && p.heartbeatDetails !== null && (
                      <code class="details">{JSON.stringify(p.heartbeatDetails)}</code>
                    )}
                  </>
                ) : (
                  <span class="muted">none yet</span>
                )}
              </td>
              <td class="next">
                {p.timeoutAt && (
                  <div>
                    times out <Ago at={p.timeoutAt} now={now} />
                  </div>
                )}
                {p.heartbeatTimeoutAt && (
                  <div>
                    fails without a heartbeat <Ago at={p.heartbeatTimeoutAt} now={now} />
                  </div>
                )}
                {p.retryAt && (
                  <div>
                    next attempt <Ago at={p.retryAt} now={now} />
                  </div>
                )}
                {p.lastError && <div class="bad">after {p.lastError.message}</div>}
                {p.deadline && (
                  <div>
                    deadline <Ago at={p.deadline} now={now} />
                  </div>
                )}
                {p.answer && (
                  <div class="answer">
                    answer with <code class="mono">{p.answer}</code>{' '}
                    <button class="link" onClick={() => void navigator.clipboard?.writeText(p.answer ?? '')} title="copy the command">
                      copy
                    </button>
                  </div>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}
