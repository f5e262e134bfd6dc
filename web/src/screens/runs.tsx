// The runs: newest first, filtered by status, graph and time, searched by
// run id, paged by the server's cursor, with counts per status; a live
// stream of read-model changes refreshes the page.
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, live, type BatchJob, type RunList, waitWhat } from '../api'
import { useConfig } from '../config'
import { href, navigate, withParams, type Route } from '../router'
import { Confirm, duration, shownStatus, Loading, Problem, Status, Time } from '../ui'

// runBatch does op to the runs as one durable batch job on the server
// (internal/batch: resumable, its progress kept; 'weft batch describe ID'
// reads it too), waits for it to finish, and says what happened to each
// run: done, skipped and why, failed and why.
async function runBatch(op: string, ids: string[], args: { reason?: string; node?: string; data?: string }): Promise<string> {
  const { id } = await api.startBatch(op, ids, args)
  let b: BatchJob
  for (;;) {
    b = await api.batch(id)
    if (b.state !== 'running' || (b.outcomes ?? []).length === ids.length) break
    await new Promise((ok) => setTimeout(ok, 300)) // the job's next outcomes
  }
  const outs = b.outcomes ?? []
  const of = (r: string) => outs.filter((o) => o.result === r)
  const parts = [`Batch job ${id}: ${op} done for ${of('done').length} of ${ids.length} run(s)`]
  const skipped = of('skipped')
  if (skipped.length) parts.push(`${skipped.length} skipped: ${skipped.map((o) => `${o.run} (${o.detail ?? ''})`).join(', ')}`)
  const failed = of('failed')
  if (failed.length) parts.push(`${failed.length} failed: ${failed.map((o) => `${o.run} (${o.detail ?? ''})`).join('; ')}`)
  const left = ids.length - outs.length
  if (left > 0) parts.push(`${left} not reached yet (the job goes on; 'weft batch describe ${id}')`)
  return parts.join('. ') + '.'
}

// The batch actions on a selection, and what each asks.
// node: the action needs a node (signal: the node to signal; reset: the
// node to reset each run to); data: it takes JSON data (signal).
const batchOps: Record<string, { title: string; confirm: string; says: string; reason: boolean; node?: boolean; data?: boolean }> = {
  cancel: { title: 'Cancel', confirm: 'Cancel the runs', says: "Each run's running nodes are asked to stop; runs that ended are skipped.", reason: true },
  terminate: { title: 'Terminate', confirm: 'Terminate the runs', says: 'Each run ends at once, as terminated; runs that ended are skipped.', reason: true },
  signal: {
    title: 'Signal',
    confirm: 'Signal the runs',
    says: "Each run's node gets the signal with the data; runs that ended are skipped, and a run whose node does not wait for a signal fails.",
    reason: false,
    node: true,
    data: true,
  },
  reset: {
    title: 'Reset',
    confirm: 'Reset the runs',
    says: 'Each run is forked from just before the node last ran, and then cancelled; the job names each new run. Runs whose node never ran are skipped.',
    reason: false,
    node: true,
  },
  delete: { title: 'Delete', confirm: 'Delete the runs', says: "Each ended run's whole history is removed; runs that have not ended are skipped.", reason: false },
}

// batchBlocked says why a batch action's form may not be sent yet: no
// node, or data that is not JSON ('' when it may).
function batchBlocked(op: string, node: string, data: string): string {
  const o = batchOps[op]
  if (o.node && node.trim() === '') return op === 'reset' ? 'name the node to reset each run to' : 'name the node to signal'
  if (o.data && data.trim() !== '') {
    try {
      JSON.parse(data)
    } catch (e) {
      return `The data is not valid JSON: ${(e as Error).message}`
    }
  }
  return ''
}

// batchDoes says, in the confirmation's title, what the action will do.
function batchDoes(op: string, n: number, node: string): string {
  const runs = `${n} run${n === 1 ? '' : 's'}`
  if (op === 'signal') return `Signal node ${node.trim() || '…'} of ${runs}?`
  if (op === 'reset') return `Reset ${runs} to node ${node.trim() || '…'}?`
  return `${batchOps[op].title} ${n} run(s)?`
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
  const [asking, setAsking] = useState<string | null>(null)
  const [reason, setReason] = useState('')
  const [batchNode, setBatchNode] = useState('')
  const [batchData, setBatchData] = useState('')
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
          {Object.entries(batchOps).map(([op, o]) => {
            const why = !config.rights?.batch
              ? (config.rights?.batchWhy ?? 'batch jobs are not allowed here')
              : selected.size === 0
                ? 'select runs in the list first'
                : ''
            return (
              <button key={op} data-batch={op} disabled={why !== ''} onClick={() => {
                  // Each action asks for its own node and data afresh.
                  setBatchNode('')
                  setBatchData('')
                  setAsking(op)
                }} title={why}>
                {why ? `${o.title} selected: ${why}` : `${o.title} ${selected.size} selected…`}
              </button>
            )
          })}
        </div>
      )}
      {asking && (
        <Confirm
          title={batchDoes(asking, selected.size, batchNode)}
          confirm={batchOps[asking].confirm}
          blocked={batchBlocked(asking, batchNode, batchData)}
          onClose={() => setAsking(null)}
          onConfirm={async () => {
            const o = batchOps[asking]
            const args = {
              reason: o.reason ? reason : undefined,
              node: o.node ? batchNode.trim() : undefined,
              data: o.data && batchData.trim() !== '' ? batchData : undefined,
            }
            setNotice(await runBatch(asking, [...selected], args))
            setSelected(new Set())
            setTick((t) => t + 1)
          }}
        >
          <p>{batchOps[asking].says} One batch job does them all, and reports on each; it survives this page being closed.</p>
          {batchOps[asking].reason && (
            <label class="block">
              reason
              <input name="reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
            </label>
          )}
          {batchOps[asking].node && (
            <label class="block">
              node
              <input name="node" value={batchNode} onInput={(e) => setBatchNode((e.target as HTMLInputElement).value)} />
            </label>
          )}
          {batchOps[asking].data && (
            <label class="block">
              data (JSON, optional)
              <textarea name="data" rows={4} value={batchData} onInput={(e) => setBatchData((e.target as HTMLTextAreaElement).value)} />
            </label>
          )}
          {batchOps[asking].data && batchBlocked(asking, batchNode, batchData).startsWith('The data') && (
            <div class="problem input-error" role="alert">
              {batchBlocked(asking, batchNode, batchData)}
            </div>
          )}
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
