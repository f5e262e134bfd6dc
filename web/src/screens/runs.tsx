// The runs: newest first, filtered by status, graph and time, searched by
// run id, paged by the server's cursor, with counts per status; a live
// stream of read-model changes refreshes the page.
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, live, type RunList } from '../api'
import { href, navigate, withParams, type Route } from '../router'
import { duration, shownStatus, Loading, Problem, Status, Time } from '../ui'

// The read model's statuses (a run whose human node waits is running).
const statuses = ['running', 'cancelling', 'completed', 'failed', 'cancelled']

// toLocalInput turns an RFC 3339 time into a datetime-local input's value.
function toLocalInput(rfc?: string | null): string {
  if (!rfc) return ''
  const d = new Date(rfc)
  if (isNaN(d.getTime())) return ''
  const off = d.getTimezoneOffset() * 60_000
  return new Date(d.getTime() - off).toISOString().slice(0, 19)
}

function fromLocalInput(v: string): string {
  if (!v) return ''
  const d = new Date(v)
  return isNaN(d.getTime()) ? v : d.toISOString()
}

export function RunsScreen({ route }: { route: Route }) {
  const p = route.params
  const status = (p.get('status') ?? '').split(',').filter(Boolean)
  const key = route.params.toString()
  const [list, setList] = useState<RunList | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [liveUp, setLiveUp] = useState(false)
  const [tick, setTick] = useState(0)

  useEffect(() => {
    let stale = false
    api
      .runs({
        status,
        graph: p.get('graph') ?? undefined,
        since: p.get('since') ?? undefined,
        until: p.get('until') ?? undefined,
        q: p.get('q') ?? undefined,
        query: p.get('query') ?? undefined,
        cursor: p.get('cursor') ?? undefined,
        limit: p.get('limit') ? Number(p.get('limit')) : undefined,
      })
      .then(
        (l) => {
          if (stale) return
          setList(l)
          setError(null)
        },
        (e) => !stale && setError(e),
      )
    return () => {
      stale = true
    }
  }, [key, tick])

  // Any change in the read model refreshes the page, at most every 300 ms.
  const timer = useRef<number | undefined>(undefined)
  useEffect(() => {
    const close = live(
      '/api/live/runs',
      ['run'],
      () => {
        if (timer.current !== undefined) return
        timer.current = window.setTimeout(() => {
          timer.current = undefined
          setTick((t) => t + 1)
        }, 300)
      },
      setLiveUp,
    )
    return () => {
      close()
      clearTimeout(timer.current)
      timer.current = undefined
    }
  }, [])

  const submit = (e: Event) => {
    e.preventDefault()
    const f = new FormData(e.currentTarget as HTMLFormElement)
    navigate(
      withParams(route, {
        q: String(f.get('q') ?? '').trim(),
        query: String(f.get('query') ?? '').trim(),
        graph: String(f.get('graph') ?? '').trim(),
        since: fromLocalInput(String(f.get('since') ?? '')),
        until: fromLocalInput(String(f.get('until') ?? '')),
        status: f.getAll('status').join(','),
        cursor: null,
      }),
    )
  }

  const counts = list?.counts ?? {}
  const shown = [...statuses, ...Object.keys(counts).filter((s) => !statuses.includes(s))]

  return (
    <section class="runs">
      <div class="title">
        <h1>Runs</h1>
        <span class={`live ${liveUp ? 'up' : ''}`} title="updates as runs start and end">
          {liveUp ? '● live' : '○ not live'}
        </span>
      </div>
      <div class="counts">
        {shown.map((s) => (
          <a
            key={s}
            class={`count ${status.length === 1 && status[0] === s ? 'on' : ''}`}
            href={withParams(route, { status: status.length === 1 && status[0] === s ? null : s, cursor: null })}
            data-count={s}
          >
            <Status status={s} /> <b>{counts[s] ?? 0}</b>
          </a>
        ))}
      </div>
      <form class="filters" onSubmit={submit} key={key}>
        <input name="q" placeholder="run id or prefix" defaultValue={p.get('q') ?? ''} aria-label="search by run id" />
        <input name="graph" placeholder="graph" defaultValue={p.get('graph') ?? ''} aria-label="graph" />
        <input
          name="query"
          class="query mono"
          placeholder='query: status = "failed" AND started > "2026-11-01"'
          title='the language of weft list -q: id, status, graph, started, ended, attrs.NAME, parent, forkedFrom, schedule, trigger, now; AND OR NOT = or CEL'
          defaultValue={p.get('query') ?? ''}
          aria-label="query"
        />
        <label>
          since <input type="datetime-local" step="1" name="since" defaultValue={toLocalInput(p.get('since'))} />
        </label>
        <label>
          until <input type="datetime-local" step="1" name="until" defaultValue={toLocalInput(p.get('until'))} />
        </label>
        <fieldset>
          {statuses.map((s) => (
            <label key={s}>
              <input type="checkbox" name="status" value={s} defaultChecked={status.includes(s)} /> {s}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary">
          Filter
        </button>
        {key && (
          <a class="button" href={href(['runs'])}>
            Clear
          </a>
        )}
      </form>
      {error !== null && <Problem error={error} title="Cannot list runs" />}
      {list === null && error === null && <Loading what="runs" />}
      {list !== null && (
        <>
          <table class="list">
            <thead>
              <tr>
                <th>run</th>
                <th>graph</th>
                <th>status</th>
                <th>started</th>
                <th>took</th>
                <th>from</th>
              </tr>
            </thead>
            <tbody>
              {list.runs.map((r) => (
                <tr key={r.runId} data-run={r.runId} data-status={r.status}>
                  <td class="mono">
                    <a href={href(['runs', r.runId])}>{r.runId}</a>
                  </td>
                  <td>{r.graph}</td>
                  <td>
                    <Status status={shownStatus(r.status, r.terminated)} />
                  </td>
                  <td>
                    <Time at={r.startedAt} />
                  </td>
                  <td>{duration(r.startedAt, r.endedAt)}</td>
                  <td class="mono">
                    {r.parent && (
                      <a href={href(['runs', r.parent])} title="parent run">
                        ↑ {r.parent}
                      </a>
                    )}
                    {r.forkedFrom && (
                      <a href={href(['runs', r.forkedFrom.runId], { at: r.forkedFrom.position })} title="forked from">
                        ↳ {r.forkedFrom.runId}#{r.forkedFrom.position}
                      </a>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.runs.length === 0 && <p class="empty">No runs match.</p>}
          <div class="pager">
            {p.get('cursor') && <a href={withParams(route, { cursor: null })}>⇤ newest</a>}
            {list.next && <a href={withParams(route, { cursor: list.next })}>older →</a>}
          </div>
        </>
      )}
    </section>
  )
}
