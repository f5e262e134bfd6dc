// What the run screen shows beside the graph: the selected event (its
// data, what it changed, the state after it) and the selected node (input,
// output, error, attempts, worker, duration, idempotency key, child runs).
import type { ComponentChildren } from 'preact'
import type { DiffEntry, GraphNode, NodeState, RunState, StateAt, WeftEvent } from '../api'
import { href } from '../router'
import { duration, Json, Loading, Problem, shortType, Status, Time } from '../ui'

export function EventPanel(props: {
  event?: WeftEvent
  at: StateAt | null
  error: unknown
  total: number
  bookkeeping: boolean
  onBookkeeping: (on: boolean) => void
}) {
  const { event, at } = props
  return (
    <section class="panel event-panel" aria-label="selected event">
      <h2>
        Event #{event?.position ?? at?.position} <span class="muted">of {props.total}</span>{' '}
        {event && <span class="mono">{shortType(event.type)}</span>}
      </h2>
      {event && (
        <dl class="facts">
          <dt>time</dt>
          <dd>
            <Time at={event.time} />
          </dd>
          {event.node && (
            <>
              <dt>node</dt>
              <dd class="mono">
                {event.node}
                {event.attempt ? ` · attempt ${event.attempt}` : ''}
                {event.iteration && event.iteration > 1 ? ` · iteration ${event.iteration}` : ''}
              </dd>
            </>
          )}
          <dt>id</dt>
          <dd class="mono">{event.id}</dd>
          {event.refused && (
            <>
              <dt>refused</dt>
              <dd class="bad">{event.refused}</dd>
            </>
          )}
        </dl>
      )}
      {event?.summary && <p class="summary">{event.summary}</p>}
      {props.error !== null && <Problem error={props.error} title="Cannot rebuild the state at this event" />}
      <div class="columns wide-first">
        <div>
          <h3>
            What changed{' '}
            <label class="muted small" title="the fold's own counters and positions: lastSeq, updatedAt, stats, timers, routing">
              <input
                type="checkbox"
                name="bookkeeping"
                checked={props.bookkeeping}
                onChange={(e) => props.onBookkeeping((e.target as HTMLInputElement).checked)}
              />{' '}
              bookkeeping
            </label>
          </h3>
          {at === null && props.error === null ? <Loading what="the diff" /> : <Diff diff={at?.diff ?? []} />}
        </div>
        <div class="state-after">
          <h3>State after</h3>
          {at && <Json value={at.state.state ?? {}} />}
        </div>
        <div>
          <h3>Event data</h3>
          <Json value={event?.data} />
        </div>
      </div>
    </section>
  )
}

function Diff({ diff }: { diff: DiffEntry[] }) {
  if (diff.length === 0) return <p class="muted">Nothing changed.</p>
  return (
    <table class="diff">
      <tbody>
        {diff.map((d, i) => (
          <tr key={i} class={`op-${d.op}`}>
            <td class="mono path">
              {d.op === 'add' ? '+ ' : d.op === 'remove' ? '− ' : '~ '}
              {d.path}
            </td>
            <td>{d.op !== 'add' && <Value v={d.before} />}</td>
            <td>{d.op !== 'remove' && <Value v={d.after} />}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

// Value shows a scalar on one line, anything bigger as indented JSON.
function Value({ v }: { v: unknown }) {
  if (v !== null && typeof v === 'object') return <Json value={v} />
  return <code class="scalar">{JSON.stringify(v)}</code>
}

interface Attempt {
  attempt: number
  iteration: number
  ready?: WeftEvent
  invoking?: WeftEvent
  outcome?: WeftEvent
}

const data = (e?: WeftEvent): Record<string, any> => (e?.data && typeof e.data === 'object' ? (e.data as Record<string, any>) : {})

// attemptsOf gathers a node's attempts from its events, in order.
function attemptsOf(events: WeftEvent[], node: string): { attempts: Attempt[]; children: string[] } {
  const attempts: Attempt[] = []
  const children: string[] = []
  const find = (e: WeftEvent) => {
    const it = e.iteration ?? data(e).iteration ?? 1
    const at = e.attempt ?? data(e).attempt ?? 1
    let a = attempts.find((x) => x.attempt === at && x.iteration === it)
    if (!a) attempts.push((a = { attempt: at, iteration: it }))
    return a
  }
  for (const e of events) {
    if (e.node !== node) continue
    const t = shortType(e.type)
    if (t === 'node.ready') find(e).ready = e
    else if (t === 'node.invoking') find(e).invoking = e
    else if (t === 'node.invoked' || t === 'node.failed') find(e).outcome = e
    else if (t === 'child.started' && data(e).childRunId) children.push(String(data(e).childRunId))
  }
  return { attempts, children }
}

export function NodeDetail(props: {
  node: GraphNode
  state?: NodeState
  events: WeftEvent[] // up to the moment shown
  onClose: () => void
  actions?: ComponentChildren // the node's actions (reset from it)
}) {
  const { node, state } = props
  const { attempts, children } = attemptsOf(props.events, node.id)
  const last = attempts[attempts.length - 1]
  const ready = data(last?.ready)
  if (state?.child && !children.includes(state.child)) children.push(state.child)
  return (
    <section class="panel node-panel" aria-label="selected node" data-node-detail={node.id}>
      <h2>
        <span class="mono">{node.id}</span> <Status status={state?.status ?? ''} />{' '}
        <button class="link" onClick={props.onClose} aria-label="close node detail">
          ✕
        </button>
      </h2>
      {props.actions && <div class="actions">{props.actions}</div>}
      <dl class="facts">
        <dt>type</dt>
        <dd>{node.type}</dd>
        <dt>queue</dt>
        <dd>{node.queue || ready.queue || '—'}</dd>
        <dt>attempt</dt>
        <dd>
          {state?.attempt ?? '—'}
          {state?.executions ? ` (${state.executions} executions)` : ''}
        </dd>
        <dt>iteration</dt>
        <dd>{state?.iteration ?? '—'}</dd>
        <dt>worker</dt>
        <dd class="mono">{state?.worker || data(last?.invoking).worker || '—'}</dd>
        <dt>duration</dt>
        <dd>{duration(state?.startedAt, state?.endedAt) || '—'}</dd>
        <dt>idempotency key</dt>
        <dd class="mono">{ready.idempotencyKey ?? '—'}</dd>
        {state?.waitingFor && (
          <>
            <dt>waiting for</dt>
            <dd>
              {state.waitingFor}
              {state.waitingFor === 'slot' && state.slot && (
                <>
                  {' '}
                  of {state.slot.limit}, key “{state.slot.key}” (max {state.slot.max})
                </>
              )}
              {state.deadline && (
                <>
                  {' '}
                  until <Time at={state.deadline} />
                </>
              )}
            </dd>
          </>
        )}
        {children.length > 0 && (
          <>
            <dt>child runs</dt>
            <dd class="mono">
              {children.map((c) => (
                <a key={c} href={href(['runs', c])} class="child">
                  {c}
                </a>
              ))}
            </dd>
          </>
        )}
      </dl>
      {state?.error && (
        <>
          <h3>Error</h3>
          <FailureView f={state.error} />
        </>
      )}
      <div class="columns">
        <div>
          <h3>Input</h3>
          <Json value={ready.input} />
        </div>
        <div>
          <h3>Output</h3>
          <Json value={state?.output} />
        </div>
      </div>
      {attempts.length > 0 && (
        <>
          <h3>Attempts</h3>
          <table class="attempts">
            <thead>
              <tr>
                <th>iter.</th>
                <th>attempt</th>
                <th>worker</th>
                <th>outcome</th>
                <th>took</th>
              </tr>
            </thead>
            <tbody>
              {attempts.map((a) => {
                const o = data(a.outcome)
                const failed = a.outcome && shortType(a.outcome.type) === 'node.failed'
                return (
                  <tr key={`${a.iteration}/${a.attempt}`}>
                    <td>{a.iteration}</td>
                    <td>{a.attempt}</td>
                    <td class="mono">{o.worker ?? data(a.invoking).worker ?? ''}</td>
                    <td class={failed ? 'bad' : ''}>
                      {!a.outcome ? 'pending' : failed ? `failed: ${o.error?.type ?? ''}: ${o.error?.message ?? ''}` : 'succeeded'}
                    </td>
                    <td>{o.durationMs !== undefined ? `${o.durationMs} ms` : ''}</td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </>
      )}
    </section>
  )
}

export function FailureView({ f }: { f: NonNullable<RunState['error']> }) {
  return (
    <div class="failure">
      <b>{f.type}</b>: {f.message} {f.retryable ? <span class="muted">(retryable)</span> : ''}
      {f.cause && (
        <div class="cause">
          caused by <FailureView f={f.cause} />
        </div>
      )}
    </div>
  )
}
