// Task queues, the live workers on each and the node types they serve, and
// the work waiting on a queue no live worker serves; then the concurrency
// and rate limits in use, as 'weft queues' lists them. Refreshed every few
// seconds (workers come and go without events of their own).
import { useEffect, useState } from 'preact/hooks'
import { api, type Limit, type RateState, type WorkersView } from '../api'
import { Loading, Problem, Time } from '../ui'

const EVERY = 3000

export function WorkersScreen() {
  const [view, setView] = useState<WorkersView | null>(null)
  const [error, setError] = useState<unknown>(null)
  useEffect(() => {
    let gone = false
    let timer: number | undefined
    const load = () =>
      api.workers().then(
        (v) => {
          if (gone) return
          setView(v)
          setError(null)
          timer = window.setTimeout(load, EVERY)
        },
        (e) => {
          if (gone) return
          setError(e)
          timer = window.setTimeout(load, EVERY)
        },
      )
    load()
    return () => {
      gone = true
      clearTimeout(timer)
    }
  }, [])

  return (
    <section class="workers">
      <h1>Workers and queues</h1>
      {error !== null && <Problem error={error} title="Cannot read the workers" />}
      {view === null && error === null && <Loading what="workers" />}
      {view !== null && view.queues.length === 0 && <p class="empty">No task queues yet.</p>}
      {view?.queues.map((q) => {
        const stranded = (q.waiting ?? 0) > 0 && q.workers.length === 0
        return (
          <div class={`queue ${stranded ? 'stranded' : ''}`} key={q.name} data-queue={q.name}>
            <h2>
              <span class="mono">{q.name}</span>{' '}
              <span class="muted">
                {q.workers.length} worker{q.workers.length === 1 ? '' : 's'}
                {q.waiting !== null && ` · ${q.waiting} waiting`}
              </span>
            </h2>
            {stranded && (
              <p class="problem" role="alert">
                {q.waiting} work item{q.waiting === 1 ? ' is' : 's are'} waiting on this queue and no live worker serves it.
              </p>
            )}
            {q.types && q.types.length > 0 && (
              <p>
                types: <span class="mono">{q.types.join(', ')}</span>
              </p>
            )}
            {q.workers.length > 0 && (
              <table class="list">
                <thead>
                  <tr>
                    <th>worker</th>
                    <th>node types</th>
                    <th>started</th>
                    <th>last heartbeat</th>
                  </tr>
                </thead>
                <tbody>
                  {q.workers.map((w) => (
                    <tr key={w.name} data-worker={w.name}>
                      <td class="mono">{w.name}</td>
                      <td class="mono">{(w.types ?? []).join(', ')}</td>
                      <td>
                        <Time at={w.started} />
                      </td>
                      <td>
                        <Time at={w.heartbeat} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </div>
        )
      })}
      {view?.coordinators && (
        <p class="coordinators" data-alive={String(view.coordinators.alive)}>
          Coordinators:{' '}
          {view.coordinators.alive ? (
            <span class="status status-completed">alive</span>
          ) : (
            <span class="status status-failed">none alive</span>
          )}{' '}
          <span class="muted">
            {view.coordinators.lastSeen ? (
              <>
                last seen <Time at={view.coordinators.lastSeen} />
              </>
            ) : (
              'never seen'
            )}
            {view.coordinators.window && ` (lease window ${view.coordinators.window})`}
          </span>
        </p>
      )}
      {view !== null && <Limits limits={view.limits} rates={view.rates} />}
      {view?.note && <p class="muted">{view.note}</p>}
    </section>
  )
}

// Limits lists the concurrency limits in use (held of max, waiting, per
// key; the holders and waiters on hover) and the rate limits' state.
function Limits({ limits, rates }: { limits: Limit[]; rates: RateState[] }) {
  return (
    <div class="limits">
      <h2>Limits</h2>
      {limits.length === 0 && rates.length === 0 && <p class="empty">No concurrency or rate limit is in use.</p>}
      {limits.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>concurrency limit</th>
              <th>key</th>
              <th>held</th>
              <th>waiting</th>
              <th>oldest waiter</th>
            </tr>
          </thead>
          <tbody>
            {limits.map((l) => (
              <tr key={`${l.limit}\u0000${l.key}`} data-limit={l.limit} data-key={l.key} data-held={l.held} data-waiting={l.waiting}>
                <td class="mono">
                  {l.limit} {l.runs && <span class="muted">(runs)</span>}
                </td>
                <td class="mono">{l.key || '-'}</td>
                <td title={l.holders.join('\n')}>
                  {l.held}/{l.max}
                </td>
                <td title={l.waiters.join('\n')}>{l.waiting}</td>
                <td>{l.oldestWaiter ? <Time at={l.oldestWaiter} /> : '-'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {rates.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>rate limit</th>
              <th>key</th>
              <th>rate</th>
              <th>tokens</th>
              <th>waiting</th>
              <th>next turn</th>
              <th>backing off</th>
            </tr>
          </thead>
          <tbody>
            {rates.map((r) => (
              <tr key={`${r.limit}\u0000${r.key}`} data-rate={r.limit} data-key={r.key}>
                <td class="mono">{r.limit}</td>
                <td class="mono">{r.key || '-'}</td>
                <td>
                  {r.rate} per {per(r.per)}
                </td>
                <td>{r.tokens}</td>
                <td>{r.waiting}</td>
                <td>{Date.parse(r.nextTurn) <= Date.now() ? 'now' : <Time at={r.nextTurn} />}</td>
                <td>{r.backoffUntil ? <Time at={r.backoffUntil} /> : '-'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}

// per says a Go duration (nanoseconds) as people write it.
function per(ns: number): string {
  const ms = ns / 1e6
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}
