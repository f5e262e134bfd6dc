// The runs: newest first, filtered by status, graph and time, searched by
// run id, paged by the server's cursor, with counts per status; a live
// stream of read-model changes refreshes the page.
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, ApiError, live, type RunList, waitWhat } from '../api'
import { useConfig } from '../config'
import { href, navigate, withParams, type Route } from '../router'
import { Confirm, duration, shownStatus, Loading, Problem, Status, Time } from '../ui'

// cancelAll asks for each run to be cancelled, one after another, and says
// what happened to each: requested, skipped (it ended: the server's 409),
// or failed and why.
async function cancelAll(ids: string[], reason: string): Promise<string> {
  const done: string[] = []
  const skipped: string[] = []
  const failed: string[] = []
  for (const id of ids) {
    try {
      await api.cancel(id, reason)
      done.push(id)
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) skipped.push(id)
      else failed.push(`${id} (${e instanceof Error ? e.message : String(e)})`)
    }
  }
  const parts = [`Cancellation requested for ${done.length} run(s)`]
  if (skipped.length) parts.push(`${skipped.length} skipped, already ended: ${skipped.join(', ')}`)
  if (failed.length) parts.push(`${failed.length} failed: ${failed.join('; ')}`)
  return parts.join('. ') + '.'
}

// The read model's statuses (a running run that only waits, on a person or
// a time, is waiting; running counts and selects it too).
const statuses = ['running', 'waiting', 'cancelling', 'completed', 'failed', 'cancelled']

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
  const config = useConfig()
  // The runs selected for a batch action, by id; a new listing clears it.
  const [selected, setSelected] = useState<Set<string>>(new Set())
  const [asking, setAsking] = useState(false)
  const [reason, setReason] = useState('')
  const [notice, setNotice] = useState<string | null>(null)
  useEffect(() => setSelected(new Set()), [key])
  const toggle = (id: string, on: boolean) =>
    setSelected((old) => {
      const next = new Set(old)
      if (on) next.add(id)
      else next.delete(id)
      return next
    })

  useEffect(() => {
    let stale = false
    api
      .runs({
        status,
        graph: p.get('graph') ?? undefined,
        chain: p.get('chain') ?? undefined,
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
      {!config.readOnly && list !== null && list.runs.length > 0 && (
        <div class="batch">
          <span class="muted">{selected.size} selected</span>{' '}
          <button disabled={selected.size === 0} onClick={() => setAsking(true)} title={selected.size === 0 ? 'select runs in the list first' : ''}>
            {selected.size === 0 ? 'Cancel selected: select runs first' : `Cancel ${selected.size} selected…`}
          </button>
        </div>
      )}
      {asking && (
        <Confirm
          title={`Cancel ${selected.size} run(s)?`}
          confirm="Cancel the runs"
          onClose={() => setAsking(false)}
          onConfirm={async () => {
            setNotice(await cancelAll([...selected], reason))
            setSelected(new Set())
            setTick((t) => t + 1)
          }}
        >
          <p>Each run's running nodes are asked to stop; runs that ended are skipped. Each is reported.</p>
          <label class="block">
            reason
            <input name="reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
          </label>
        </Confirm>
      )}
      {notice && (
        <div class="notice" role="status">
          {notice}{' '}
          <button class="link" onClick={() => setNotice(null)} aria-label="dismiss">
            ✕
          </button>
        </div>
      )}
      {error !== null && <Problem error={error} title="Cannot list runs" />}
      {list === null && error === null && <Loading what="runs" />}
      {list !== null && (
        <>
          <table class="list">
            <thead>
              <tr>
                {!config.readOnly && <th aria-label="select" />}
                <th>run</th>
                <th>graph</th>
                <th>status</th>
                <th>started</th>
                <th>took</th>
                <th>from</th>
                <th>waiting on</th>
              </tr>
            </thead>
            <tbody>
              {list.runs.map((r) => (
                <tr key={r.runId} data-run={r.runId} data-status={r.status}>
                  {!config.readOnly && (
                    <td>
                      <input
                        type="checkbox"
                        name="select"
                        aria-label={`select ${r.runId}`}
                        checked={selected.has(r.runId)}
                        onChange={(e) => toggle(r.runId, (e.target as HTMLInputElement).checked)}
                      />
                    </td>
                  )}
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
                    {r.chain && (
                      <a href={href(['runs'], { chain: r.chain })} title="chain of continuations">
                        ↻ {r.chain}#{r.link}
                      </a>
                    )}
                    {r.forkedFrom && (
                      <a href={href(['runs', r.forkedFrom.runId], { at: r.forkedFrom.position })} title="forked from">
                        ↳ {r.forkedFrom.runId}#{r.forkedFrom.position}
                      </a>
                    )}
                  </td>
                  <td class="waits">
                    {(r.waiting ?? []).map((w) => (
                      <span key={w.node} class="wait" data-wait={w.node}>
                        <span class="mono">{w.node}</span> {w.slot ? waitWhat(w) : w.for === 'signal' ? 'signal' : 'wait'}
                        {w.deadline && (
                          <>
                            {' until '}
                            <Time at={w.deadline} />
                          </>
                        )}
                      </span>
                    ))}
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
