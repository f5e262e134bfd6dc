// A summary of a run from its events: its status, output or error, the
// shared state as the state's reducers merge the nodes' updates, and each
// node's latest activation. The engine's own fold (Go: pkg/projection) is
// the authority on a run; this summary follows the same events with the
// same first-outcome-wins rule per attempt, for what a program driving runs
// needs to see.

import type { WeftEvent } from '../events/envelope.js'
import type { Failure } from '../events/payloads.js'
import { EventType } from '../events/subjects.js'

/** RunState is a run's status. */
export type RunState = '' | 'running' | 'cancelling' | 'completed' | 'failed' | 'cancelled'

/** NodeState is the status of a node's latest activation. */
export interface NodeSummary {
  status: 'ready' | 'running' | 'waiting' | 'retrying' | 'succeeded' | 'failed' | 'skipped' | 'cancelled'
  iteration: number
  attempt: number
  item?: number
  output?: unknown
  error?: Failure
  worker?: string
  fallback?: boolean
}

/** RunStatus summarises a run. */
export interface RunStatus {
  runId: string
  graphName: string
  graphDigest: string
  status: RunState
  input?: Record<string, unknown>
  invocation?: Record<string, unknown>
  /** state is the shared state, key by key. */
  state: Record<string, unknown>
  output?: unknown
  error?: Failure
  cancel?: { by: string; reason?: string }
  nodes: Record<string, NodeSummary>
  startedAt?: string
  endedAt?: string
  /** events counts the run's events; lastSeq is the stream sequence of the last. */
  events: number
  lastSeq: number
}

/** ended reports whether a status is final. */
export function ended(s: RunState): boolean {
  return s === 'completed' || s === 'failed' || s === 'cancelled'
}

interface Ref {
  node: string
  iteration: number
  item?: number
  attempt?: number
}

const key = (r: Ref) => `${r.node}/${r.iteration}${r.item !== undefined && r.item !== null ? `/${r.item}` : ''}`

/** summarise folds a run's events into a RunStatus. */
export function summarise(runId: string, evs: WeftEvent[]): RunStatus {
  const st: RunStatus = { runId, graphName: '', graphDigest: '', status: '', state: {}, nodes: {}, events: 0, lastSeq: 0 }
  const reducers: Record<string, string> = {}
  const outcomes = new Set<string>()
  for (const e of evs) {
    st.lastSeq = Math.max(st.lastSeq, e.seq ?? 0)
    if (e.refused !== undefined) continue
    st.events++
    let p: any
    try {
      p = JSON.parse(e.data)
    } catch {
      continue
    }
    if (ended(st.status) && e.type !== EventType.RunStarted) continue
    const node = (r: Ref): NodeSummary | undefined => {
      const n = st.nodes[r.node]
      return n !== undefined && n.iteration === r.iteration && (r.item === undefined || n.item === r.item) ? n : undefined
    }
    switch (e.type) {
      case EventType.RunStarted:
        if (st.status !== '') break
        st.status = 'running'
        st.graphName = p.graphName ?? ''
        st.graphDigest = p.graphDigest ?? ''
        st.input = p.input
        st.invocation = p.invocation
        st.startedAt = e.time
        Object.assign(reducers, p.graph?.state?.reducers ?? {})
        if (p.state !== undefined) Object.assign(st.state, p.state.state ?? {})
        else if (p.input !== undefined && p.input !== null) Object.assign(st.state, p.input)
        break
      case EventType.NodeReady:
        st.nodes[p.node] = { status: 'ready', iteration: p.iteration, attempt: p.attempt, ...(p.item !== undefined ? { item: p.item } : {}) }
        break
      case EventType.NodeWaiting:
        st.nodes[p.node] = { status: 'waiting', iteration: p.iteration, attempt: 0 }
        break
      case EventType.NodeSkipped:
        st.nodes[p.node] = { status: 'skipped', iteration: p.iteration, attempt: 0 }
        break
      case EventType.NodeInvoking: {
        const n = node(p)
        if (n !== undefined && n.attempt === p.attempt && n.status === 'ready') {
          n.status = 'running'
          n.worker = p.worker
        }
        break
      }
      case EventType.NodeInvoked:
      case EventType.NodeFailed:
      case EventType.NodeCancelled: {
        const k = `${key(p)}#${p.attempt}`
        if (outcomes.has(k)) break // the first outcome of an attempt counts
        outcomes.add(k)
        const n: NodeSummary = node(p) ?? (st.nodes[p.node] = { status: 'running', iteration: p.iteration, attempt: p.attempt })
        n.attempt = p.attempt
        if (p.worker !== undefined) n.worker = p.worker
        if (e.type === EventType.NodeInvoked) {
          n.status = 'succeeded'
          n.output = p.output
          if (p.fallback === true) n.fallback = true
          for (const [k2, v] of Object.entries((p.updates ?? {}) as Record<string, unknown>)) reduce(st.state, k2, v, reducers[k2] ?? 'replace')
        } else if (e.type === EventType.NodeFailed) {
          n.status = 'failed'
          n.error = p.error
        } else n.status = 'cancelled'
        break
      }
      case EventType.RetryScheduled: {
        const n = node(p)
        if (n !== undefined) n.status = 'retrying'
        break
      }
      case EventType.RunCancelRequested:
        if (st.status === 'running') st.status = 'cancelling'
        st.cancel ??= { by: p.by, ...(p.reason !== undefined ? { reason: p.reason } : {}) }
        break
      case EventType.RunCompleted:
        st.status = 'completed'
        st.output = p.output
        st.endedAt = e.time
        break
      case EventType.RunFailed:
        st.status = 'failed'
        st.error = p.error
        st.endedAt = e.time
        break
      case EventType.RunCancelled:
        st.status = 'cancelled'
        st.cancel = { by: p.by, ...(p.reason !== undefined ? { reason: p.reason } : {}) }
        st.endedAt = e.time
        break
    }
  }
  return st
}

// reduce merges one update into the state, by the key's reducer.
function reduce(state: Record<string, unknown>, k: string, v: unknown, reducer: string): void {
  const cur = state[k]
  switch (reducer) {
    case 'append':
      state[k] = [...(Array.isArray(cur) ? cur : cur === undefined || cur === null ? [] : [cur]), ...(Array.isArray(v) ? v : [v])]
      return
    case 'merge':
      state[k] =
        cur !== null && typeof cur === 'object' && !Array.isArray(cur) && v !== null && typeof v === 'object' && !Array.isArray(v)
          ? { ...(cur as object), ...(v as object) }
          : v
      return
    case 'sum':
      state[k] = (typeof cur === 'number' ? cur : 0) + (typeof v === 'number' ? v : 0)
      return
    default:
      state[k] = v
  }
}
