// One run: its graph (live, or as it was after the selected event), its
// timeline, the selected event's state and diff, the selected node's
// detail, and the actions. The URL holds the selection: ?at=POSITION
// (scrubbing) and ?node=ID.
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, ApiError, live, type RunDetail, type StateAt, type WeftEvent, waitWhat } from '../api'
import { useConfig } from '../config'
import { href, navigate, withParams, type Route } from '../router'
import { duration, Json, Loading, Problem, shownStatus, Status, Time } from '../ui'
import { Actions } from './actions'
import { GraphPicture } from './graph'
import { PendingPanel } from './pending'
import { ResetFrom } from './reset'
import { ConversationPanel } from './conversation'
import { EventPanel, FailureView, NodeDetail } from './inspect'
import { Timeline, type Log } from './timeline'

const PAGE = 5000 // events per request, the server's most

// place puts events at their positions in a copy of the log.
function place(log: Log, evs: WeftEvent[]): Log {
  const out = log.slice()
  for (const e of evs) if (e.position >= 1) out[e.position - 1] = e
  return out
}

// parseAt reads ?at=: null when absent, an Error when malformed.
function parseAt(v: string | null, total: number): number | null | Error {
  if (v === null || v === '') return null
  if (!/^\d+$/.test(v) || Number(v) < 1) return new Error(`The URL's "at" is ${JSON.stringify(v)}: it should be an event position, a whole number from 1.`)
  const n = Number(v)
  if (total > 0 && n > total) return new Error(`The URL's "at" is ${n}, but this run has ${total} events.`)
  return n
}

function traceLink(template: string | undefined, traceId: string | undefined): string | null {
  if (!template || !traceId) return null
  const url = template.includes('{traceId}') ? template.replaceAll('{traceId}', encodeURIComponent(traceId)) : template
  return /^https?:\/\//i.test(url) ? url : null
}

export function RunScreen({ id, route }: { id: string; route: Route }) {
  const config = useConfig()
  const [detail, setDetail] = useState<RunDetail | null>(null)
  const [events, setEvents] = useState<Log>([])
  const [loaded, setLoaded] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const [liveState, setLiveState] = useState<'connecting' | 'live' | 'ended' | 'down'>('connecting')
  const [notice, setNotice] = useState<string | null>(null)

  // Load the run and its log, then follow it.
  useEffect(() => {
    let gone = false
    let close = () => {}
    let pending: number | undefined
    setDetail(null)
    setEvents([])
    setLoaded(false)
    setError(null)
    setLiveState('connecting')
    // refresh re-reads the run after live events: one request at a time,
    // and one more if events came meanwhile.
    let busy = false
    let again = false
    const refresh = () => {
      if (busy || pending !== undefined) {
        again = true
        return
      }
      pending = window.setTimeout(() => {
        pending = undefined
        busy = true
        again = false
        api
          .run(id)
          .then(
            (d) => !gone && setDetail(d),
            (e) => !gone && setNotice(`Cannot refresh the run: ${e instanceof Error ? e.message : String(e)}`),
          )
          .finally(() => {
            busy = false
            if (again && !gone) refresh()
          })
      }, 150)
    }
    ;(async () => {
      try {
        // The run and the first page of its log at once; the live stream
        // from where that page's total ends; the other pages meanwhile.
        const [d, first] = await Promise.all([api.run(id), api.events(id, 1, PAGE)])
        if (gone) return
        setDetail(d)
        setEvents(place([], first.events))
        setLoaded(true)
        close = live(
          `/api/live/runs/${encodeURIComponent(id)}?from=${first.total}`,
          ['event', 'end', 'error'],
          (kind, data) => {
            if (kind === 'error') {
              setLiveState('down')
              setNotice(`Live updates stopped: ${data?.error ?? 'the server ended the stream'}. Reload the page to resume.`)
              close()
              return
            }
            if (kind === 'end') {
              setLiveState('ended')
              close()
              refresh()
              return
            }
            setEvents((old) => place(old, [data as WeftEvent]))
            refresh()
          },
          (up) => setLiveState((s) => (s === 'ended' ? s : up ? 'live' : 'down')),
        )
        const step = Math.max(1, first.events.length)
        const rest = []
        for (let from = step + 1; from <= first.total; from += step) {
          rest.push(api.events(id, from, step).then((p) => !gone && setEvents((old) => place(old, p.events))))
        }
        await Promise.all(rest)
      } catch (e) {
        if (!gone) setError(e)
      }
    })()
    return () => {
      gone = true
      close()
      clearTimeout(pending)
    }
  }, [id])

  const total = Math.max(events.length, detail?.events ?? 0)
  const atParam = parseAt(route.params.get('at'), loaded ? total : 0)
  const at = atParam instanceof Error ? null : atParam
  const nodeId = route.params.get('node')
  // ?bookkeeping=1: "What changed" shows the fold's bookkeeping too.
  const bookkeeping = route.params.get('bookkeeping') === '1'

  // The state after the selected event.
  const [stateAt, setStateAt] = useState<StateAt | null>(null)
  const [stateErr, setStateErr] = useState<unknown>(null)
  useEffect(() => {
    // The graph keeps the last moment shown until the next one is in, so
    // that scrubbing does not flash the live state in between.
    setStateErr(null)
    if (at === null) return
    // A moment's pause, so that scrubbing asks only where it stops.
    let gone = false
    const t = window.setTimeout(
      () =>
        api.stateAt(id, at, bookkeeping).then(
          (s) => !gone && setStateAt(s),
          (e) => !gone && setStateErr(e),
        ),
      80,
    )
    return () => {
      gone = true
      clearTimeout(t)
    }
  }, [id, at, bookkeeping])

  const select = (position: number, byKey: boolean) => navigate(withParams(route, { at: position }), byKey)
  const timelineFocus = useRef<HTMLDivElement>(null)

  if (error !== null) {
    const notFound = error instanceof ApiError && error.status === 404
    return (
      <section>
        <h1 class="mono">{id}</h1>
        <Problem
          error={notFound ? new Error(`There is no run with id "${id}". It may have been deleted, or the link is wrong.`) : error}
          title={notFound ? 'Unknown run' : 'Cannot show this run'}
        />
        <p>
          <a href={href(['runs'])}>← all runs</a>
        </p>
      </section>
    )
  }
  if (detail === null) return <Loading what={`run ${id}`} />

  const { summary, graph } = detail
  const live_ = detail.state
  const shown = at !== null && stateAt && stateAt.state.runId === live_.runId ? stateAt.state : live_
  const nodes = shown.nodes ?? {}
  const upTo = events.slice(0, at ?? events.length).filter((e) => e !== undefined)
  const selNode = nodeId ? graph?.nodes.find((n) => n.id === nodeId) : undefined
  const trace = traceLink(detail.traceUrl || config.traceUrl, detail.traceId)
  const parent = summary.parent ?? live_.parent?.runId
  // A running run that only waits is shown as waiting (the server's summary
  // says so, from the fold); the fold's own status is running.
  const runStatus = live_.status === 'running' && summary.status === 'waiting' ? 'waiting' : live_.status
  const waits = live_.status === 'running' || live_.status === 'cancelling' ? (detail.waiting ?? []) : []

  return (
    <section class="run" data-run={summary.runId} data-status={runStatus}>
      <div class="title">
        <h1 class="mono">{summary.runId}</h1>
        <Status status={shownStatus(runStatus, live_.cancel?.terminate)} />
        <span class={`live ${liveState}`}>
          {liveState === 'live' ? '● live' : liveState === 'ended' ? 'ended' : liveState === 'down' ? '○ reconnecting…' : '…'}
        </span>
      </div>
      <dl class="facts header">
        <dt>graph</dt>
        <dd>
          <a href={href(['runs'], { graph: summary.graph })}>{summary.graph}</a>
        </dd>
        <dt>started</dt>
        <dd>
          <Time at={summary.startedAt} />
        </dd>
        <dt>took</dt>
        <dd>{duration(summary.startedAt, summary.endedAt) || '—'}</dd>
        <dt>events</dt>
        <dd>{total}</dd>
        {waits.length > 0 && (
          <>
            <dt>waiting on</dt>
            <dd class="waits">
              {waits.map((w) => (
                <div key={w.node} class="wait" data-wait={w.node}>
                  <span class="mono">{w.node}</span>: {waitWhat(w)}
                  {w.deadline && (
                    <>
                      {w.for === 'signal' ? ', deadline ' : ' until '}
                      <Time at={w.deadline} />
                    </>
                  )}
                  {w.command && (
                    <>
                      {'; answer with '}
                      <code class="command">{w.command}</code> or the Signal… button
                    </>
                  )}
                </div>
              ))}
            </dd>
          </>
        )}
        {parent && (
          <>
            <dt>parent</dt>
            <dd class="mono">
              <a href={href(['runs', parent])}>{parent}</a>
            </dd>
          </>
        )}
        {summary.chain && (
          <>
            <dt>chain</dt>
            <dd class="mono">
              <a href={href(['runs'], { chain: summary.chain })} title="every link of the chain">
                link {summary.link} of {summary.chain}
              </a>
              {summary.previous && (
                <>
                  {' '}
                  continues <a href={href(['runs', summary.previous])}>{summary.previous}</a>
                </>
              )}
              {summary.continuedAs && (
                <>
                  {' '}
                  continued as <a href={href(['runs', summary.continuedAs])}>{summary.continuedAs}</a>
                </>
              )}
            </dd>
          </>
        )}
        {summary.forkedFrom && (
          <>
            <dt>forked from</dt>
            <dd class="mono">
              <a href={href(['runs', summary.forkedFrom.runId], { at: summary.forkedFrom.position })}>
                {summary.forkedFrom.runId} #{summary.forkedFrom.position}
              </a>
            </dd>
          </>
        )}
        {detail.children && detail.children.length > 0 && (
          <>
            <dt>children</dt>
            <dd class="mono">
              {detail.children.map((c) => (
                <a key={c} href={href(['runs', c])} class="child">
                  {c}
                </a>
              ))}
            </dd>
          </>
        )}
        {detail.traceId && (
          <>
            <dt>trace</dt>
            <dd class="mono">
              {trace ? (
                <a href={trace} target="_blank" rel="noopener noreferrer">
                  {detail.traceId}
                </a>
              ) : (
                detail.traceId
              )}
            </dd>
          </>
        )}
      </dl>
      {live_.error && <FailureView f={live_.error} />}
      <PendingPanel pending={detail.pending ?? []} onSelect={(n) => navigate(withParams(route, { node: n }))} />
      {!config.readOnly && config.rights && !config.rights.actions && (
        <div class="actions">
          <button disabled title={config.rights.actionsWhy}>
            Signal, cancel, fork: {config.rights.actionsWhy ?? 'this UI may not act on runs'}
          </button>
        </div>
      )}
      {!config.readOnly && config.rights?.actions !== false && (
        <Actions
          runId={summary.runId}
          state={live_}
          at={at}
          onDone={(m) => {
            setNotice(m)
            timelineFocus.current?.querySelector<HTMLElement>('.timeline')?.focus()
          }}
        />
      )}
      {notice && (
        <div class="notice" role="status">
          {notice}{' '}
          <button class="link" onClick={() => setNotice(null)} aria-label="dismiss">
            ✕
          </button>
        </div>
      )}
      {atParam instanceof Error && <Problem error={atParam} title="Bad link" />}
      <div class="run-body">
        <div class="graph-pane">
          {at !== null && (
            <div class="moment">
              As it was after event #{at} of {total}{' '}
              <a href={withParams(route, { at: null })} class="button">
                back to now
              </a>
            </div>
          )}
          {graph === null ? (
            <Problem error={new Error(detail.graphError || 'the server could not read it')} title="Cannot draw this run's graph" />
          ) : graph.nodes.length === 0 ? (
            <p class="muted">This run's graph has no nodes to draw.</p>
          ) : (
            <GraphPicture
              graph={graph}
              nodes={nodes}
              ended={shown.status === 'completed'}
              selected={nodeId}
              onSelect={(n) => navigate(withParams(route, { node: n }))}
            />
          )}
          {nodeId && graph && !selNode && <Problem error={new Error(`This run's graph has no node "${nodeId}".`)} title="Bad link" />}
        </div>
        <div class="timeline-pane" ref={timelineFocus}>
          <div class="scrub">
            <input
              type="range"
              min={1}
              max={Math.max(1, total)}
              value={at ?? total}
              aria-label="scrub through the run's events"
              onInput={(e) => select(Number((e.target as HTMLInputElement).value), true)}
            />
            <span class="mono">
              {at ?? total}/{total}
            </span>
          </div>
          {loaded ? (
            <Timeline events={events} count={total} selected={at} node={nodeId} onSelect={select} />
          ) : (
            <Loading what="events" />
          )}
        </div>
      </div>
      {selNode && (
        <NodeDetail
          node={selNode}
          state={nodes[selNode.id]}
          events={upTo}
          onClose={() => navigate(withParams(route, { node: null }))}
          actions={
            !config.readOnly && (
            <ResetFrom
              runId={summary.runId}
              node={selNode.id}
              ran={!!nodes[selNode.id] && nodes[selNode.id].status !== 'idle'}
              readOnly={config.readOnly}
              noRight={config.rights && !config.rights.actions ? (config.rights.actionsWhy ?? 'this UI may not act on runs') : ''}
              onDone={setNotice}
            />
            )
          }
        />
      )}
      {selNode?.type === 'agent' && <ConversationPanel id={id} node={selNode.id} events={events} />}
      {at !== null && (
        <EventPanel
          event={events[at - 1]}
          at={stateAt?.position === at ? stateAt : null}
          error={stateErr}
          total={total}
          bookkeeping={bookkeeping}
          onBookkeeping={(on) => navigate(withParams(route, { bookkeeping: on ? '1' : null }), true)}
        />
      )}
      {at === null && (live_.output !== undefined || live_.state) && (
        <section class="panel">
          <h2>State now</h2>
          <Json value={live_.state ?? {}} />
          {live_.output !== undefined && (
            <>
              <h3>Output</h3>
              <Json value={live_.output} empty="null" />
            </>
          )}
        </section>
      )}
    </section>
  )
}
