// The HTTP API of `weft ui` (internal/ui/API.md): its types, one fetch
// wrapper that turns every failure into an ApiError with a message fit for
// the page, and the server-sent event streams.

// The read model's statuses; a running run that does nothing but wait (on
// a human node's signal or a wait node's time) is waiting, and a filter on
// running selects it too.
export type RunStatus = 'running' | 'waiting' | 'cancelling' | 'completed' | 'failed' | 'cancelled' | string

// What a running run waits on: a human node's signal ("signal") or a wait
// node's time ("timer"), until its deadline; data is, for a human node, the
// data of a signal that answers it ("..." where a value is to be filled in).
export interface Wait {
  node: string
  iteration: number
  for: 'signal' | 'timer' | 'slot' | string
  deadline?: string
  slot?: { limit: string; key: string; max: number } // for 'slot': the run limit the run waits for (node START)
  data?: string
  command?: string // the run page's: weft signal RUN NODE -data '…'
}

export interface ForkRef {
  runId: string
  position: number
  seq?: number
  reason?: string
}

export interface Summary {
  runId: string
  graph?: string
  graphDigest?: string
  status: RunStatus
  startedAt?: string
  endedAt?: string
  parent?: string
  attrs?: Record<string, string>
  terminated?: boolean
  forkedFrom?: ForkRef
  waiting?: Wait[]
  // A link of a chain of continuations (continue-as-new): the chain's id
  // (its first run's), the link's place, the run it continues and its
  // continuation.
  chain?: string
  link?: number
  previous?: string
  continuedAs?: string
}

export interface Failure {
  type: string
  message: string
  retryable: boolean
  details?: unknown
  cause?: Failure
}

export interface NodeState {
  status: string
  iteration: number
  attempt?: number
  executions?: number
  output?: unknown
  error?: Failure
  worker?: string
  local?: unknown
  waitingFor?: string
  slot?: { limit: string; key: string; max: number }
  deadline?: string
  child?: string
  items?: { status: string; attempt?: number; output?: unknown; error?: Failure }[]
  readyAt?: string
  startedAt?: string
  endedAt?: string
}

export interface RunState {
  runId: string
  graphName?: string
  status: RunStatus
  parent?: { runId: string; ref: { node: string } }
  fork?: ForkRef
  input?: unknown
  invocation?: unknown
  state?: Record<string, unknown>
  artifacts?: Record<string, unknown>
  nodes?: Record<string, NodeState>
  output?: unknown
  error?: Failure
  cancel?: { by: string; reason?: string; at: string; terminate?: boolean }
  startedAt?: string
  endedAt?: string
  lastSeq?: number
}

export interface GraphNode {
  id: string
  type: string
  queue?: string
  label?: string
  subgraph?: boolean
}

export interface GraphEdge {
  from: string
  to: string
  label?: string
  back?: boolean
}

export interface GraphView {
  nodes: GraphNode[]
  edges: GraphEdge[]
}

export interface RunDetail {
  summary: Summary
  waiting?: Wait[]
  state: RunState
  graph: GraphView | null // null when the run's graph cannot be read
  graphError?: string
  traceId?: string
  traceUrl?: string
  children?: string[]
  events: number
  pending?: Pending[] // the nodes that have not finished, and where each is
}

// Pending is a node (or map item) that has not finished: client.Pending.
export interface Pending {
  node: string
  iteration: number
  item?: number
  status: string
  waitingFor?: string
  attempt?: number
  worker?: string
  since?: string
  heartbeatAt?: string
  heartbeatDetails?: unknown
  timeoutAt?: string
  heartbeatTimeoutAt?: string
  retryAt?: string
  lastError?: Failure
  deadline?: string
  child?: string
  answer?: string
}

export interface WeftEvent {
  position: number
  seq: number
  id: string
  type: string // dev.weft.node.invoked.v1
  kind?: string // node.invoked
  time: string
  node?: string // "" for run events
  attempt?: number
  iteration?: number
  item?: number // the map item it concerns
  subject?: string
  summary?: string
  data?: unknown
  refused?: string
}

export interface DiffEntry {
  path: string
  op: 'add' | 'remove' | 'change' | string
  before?: unknown
  after?: unknown
}

export interface StateAt {
  position: number
  state: RunState
  diff: DiffEntry[]
}

export interface RunList {
  runs: Summary[]
  next: string
  counts: Record<string, number>
}

export interface Worker {
  name: string
  types?: string[]
  started?: string
  heartbeat?: string
}

export interface Queue {
  name: string
  workers: Worker[]
  waiting: number | null // null: the server may not read the queue's consumer
  types?: string[]
}

// One (limit, key) of a concurrency limit in use: a node's, or a graph's
// run limit (runs: its holders and waiters are runs, node START).
export interface Limit {
  limit: string
  key: string
  max: number
  held: number
  waiting: number
  runs?: boolean
  oldestWaiter: string | null
  holders: string[]
  waiters: string[]
}

// A rate limit's key in use: per is in nanoseconds (a Go duration).
export interface RateState {
  limit: string
  key: string
  rate: number
  per: number
  waiting: number
  nextTurn: string
  // tokens: the units that may start at once now (the burst left).
  tokens: number
  // backoffUntil: while a RateLimited failure holds the key back, until when.
  backoffUntil?: string | null
}

export interface WorkersView {
  queues: Queue[]
  coordinators?: { alive: boolean; lastSeen?: string | null; window?: string }
  limits: Limit[]
  rates: RateState[]
  note?: string
}

export interface ScheduleFire {
  nominal: string
  outcome: string
  runId?: string
  status?: RunStatus
  reason?: string
  at: string
}

export interface Schedule {
  name: string
  graph: string
  spec: string
  overlap: string
  note?: string
  paused: boolean
  pauseNote?: string
  next: string[]
  fires: ScheduleFire[]
  skipped?: Record<string, number>
  running: string[]
  createdAt: string
  updatedAt?: string
}

export interface Config {
  readOnly: boolean
  traceUrl: string
  version: string
  // What this server's NATS user may do beyond the client's: batch jobs
  // (the admin's role), and why not.
  rights?: { actions: boolean; actionsWhy?: string; batch: boolean; batchWhy?: string }
}

// A durable batch job (internal/batch) and its progress.
export interface BatchJob {
  job: { id: string; operation: string; runs: string[]; by: string; created: string; finished?: string }
  state: 'running' | 'finished' | 'interrupted'
  tally: { Done: number; Skipped: number; Failed: number; Total: number }
  outcomes: { run: string; result: 'done' | 'skipped' | 'failed'; detail?: string; at: string }[] | null
}

// ApiError is what every failed call throws: a message to show as is,
// the HTTP status (0: the server did not answer) and the field to blame.
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly field?: string,
  ) {
    super(message)
  }
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, headers: { Accept: 'application/json' } }
  if (body !== undefined) {
    init.headers = { ...init.headers, 'Content-Type': 'application/json', 'X-Weft-Action': '1' }
    init.body = JSON.stringify(body)
  }
  let res: Response
  try {
    res = await fetch(path, init)
  } catch {
    throw new ApiError(`The Weft server at ${location.host} is not reachable. Is \`weft ui\` or \`weft dev\` running?`, 0)
  }
  const text = await res.text()
  let json: any
  try {
    json = text ? JSON.parse(text) : {}
  } catch {
    if (res.status === 502 || res.status === 504) {
      // A proxy in between (npm run dev's, or another) found no server.
      throw new ApiError(`The Weft server is not reachable (${res.status} ${res.statusText} from the proxy in front of it).`, 0)
    }
    throw new ApiError(`The server answered ${method} ${path} with ${res.status} ${res.statusText} and a body that is not JSON.`, res.status)
  }
  if (!res.ok) {
    const what = typeof json?.error === 'string' && json.error ? json.error : `${res.status} ${res.statusText}`
    const field = typeof json?.field === 'string' && json.field ? json.field : undefined
    throw new ApiError(what, res.status, field)
  }
  return json as T
}

function query(params: Record<string, string | number | string[] | undefined>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === '') continue
    if (Array.isArray(v)) {
      if (v.length) q.set(k, v.join(','))
    } else q.set(k, String(v))
  }
  const s = q.toString()
  return s ? `?${s}` : ''
}

const run = (id: string) => `/api/runs/${encodeURIComponent(id)}`

// Go encodes an empty list as null; the screens get [] instead.
const list = <T>(v: T[] | null | undefined): T[] => v ?? []

const sched = (name: string) => `/api/schedules/${encodeURIComponent(name)}`
const schedule = (s: Schedule): Schedule => ({ ...s, next: list(s.next), fires: list(s.fires), running: list(s.running) })

export const api = {
  config: () => call<Config>('GET', '/api/config'),
  runs: (p: {
    status?: string[]
    graph?: string
    chain?: string
    since?: string
    until?: string
    q?: string
    query?: string
    cursor?: string
    limit?: number
  }) =>
    call<RunList>('GET', `/api/runs${query(p)}`).then((l) => ({ ...l, runs: list(l.runs), counts: l.counts ?? {} })),
  run: (id: string) =>
    call<RunDetail>('GET', run(id)).then((d) => ({
      ...d,
      children: list(d.children),
      pending: list(d.pending),
      graph: d.graph && { nodes: list(d.graph.nodes), edges: list(d.graph.edges) },
    })),
  events: (id: string, from: number, limit: number) =>
    call<{ events: WeftEvent[]; total: number }>('GET', `${run(id)}/events${query({ from, limit })}`).then((p) => ({
      ...p,
      events: list(p.events),
    })),
  // stateAt is the state after event at, and what it changed: without the
  // fold's bookkeeping unless all.
  stateAt: (id: string, at: number, all = false) =>
    call<StateAt>('GET', `${run(id)}/state${query({ at, all: all ? '1' : undefined })}`).then((s) => ({ ...s, diff: list(s.diff) })),
  // conversation is an agent node's messages, tool calls and results, as
  // its last step recorded them (API.md).
  conversation: (id: string, node: string) =>
    call<Conversation>('GET', `${run(id)}/conversation${query({ node })}`).then((c) => ({
      ...c,
      steps: list(c.steps),
      messages: list(c.messages).map((m) => ({ ...m, toolCalls: list(m.toolCalls) })),
    })),
  signal: (id: string, node: string, data: unknown) => call<{ id: string }>('POST', `${run(id)}/signal`, { node, data }),
  cancel: (id: string, reason: string) => call<object>('POST', `${run(id)}/cancel`, { reason }),
  fork: (id: string, at: number) => call<{ runId: string }>('POST', `${run(id)}/fork`, { at }),
  reset: (id: string, node: string) => call<{ runId: string }>('POST', `${run(id)}/reset`, { node }),
  // start starts a run of a pasted graph (YAML or JSON) or of a run's graph.
  start: (p: { graph?: string; fromRun?: string; input?: unknown }) => call<{ runId: string }>('POST', '/api/runs', p),
  // startBatch starts a durable batch job: reason for cancel and
  // terminate, node for signal and reset, data (JSON text) for signal.
  startBatch: (operation: string, runs: string[], args: { reason?: string; node?: string; data?: string }) =>
    call<{ id: string }>('POST', '/api/batches', { operation, runs, ...args }),
  batch: (id: string) => call<BatchJob>('GET', `/api/batches/${encodeURIComponent(id)}`),
  schedules: () =>
    call<{ schedules: Schedule[] }>('GET', '/api/schedules').then((l) => list(l.schedules).map(schedule)),
  pauseSchedule: (name: string, note: string) => call<Schedule>('POST', `${sched(name)}/pause`, { note }).then(schedule),
  unpauseSchedule: (name: string) => call<Schedule>('POST', `${sched(name)}/unpause`, {}).then(schedule),
  triggerSchedule: (name: string) => call<{ runId: string }>('POST', `${sched(name)}/trigger`, {}),
  workers: () =>
    call<WorkersView>('GET', '/api/workers').then((w) => ({
      ...w,
      queues: list(w.queues).map((q) => ({ ...q, workers: list(q.workers) })),
      limits: list(w.limits).map((l) => ({ ...l, holders: list(l.holders), waiters: list(l.waiters) })),
      rates: list(w.rates),
    })),
}

// Conversation is GET /api/runs/{id}/conversation's answer.
export interface Conversation {
  node: string
  iteration: number
  key: string
  live: boolean
  turns: number
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number }
  steps: { step: number; kind: string; tool?: string; attempt: number; position: number; time: string }[]
  messages: {
    role: string
    content?: string
    toolCalls: { id: string; name: string; arguments: string }[]
    toolCallId?: string
    name?: string
    isError?: boolean
    step: number
  }[]
}

// Token is a piece of streamed text (GET /api/live/runs/{id}/tokens).
export interface Token {
  node: string
  step: number
  text: string
}

// live opens a server-sent event stream and calls on(kind, data) for each
// message; it returns the function that closes it. EventSource reconnects
// by itself; onState tells the page whether the stream is up.
export function live(
  path: string,
  kinds: string[],
  on: (kind: string, data: any) => void,
  onState?: (up: boolean) => void,
): () => void {
  const es = new EventSource(path)
  for (const k of kinds) {
    es.addEventListener(k, (m) => {
      let data: unknown
      try {
        data = JSON.parse((m as MessageEvent).data)
      } catch {
        return // a message that is not JSON is not ours to show
      }
      on(k, data)
    })
  }
  es.onopen = () => onState?.(true)
  es.onerror = () => onState?.(es.readyState === EventSource.OPEN)
  return () => es.close()
}

// waitWhat says what a wait is for: a signal, a wait node's time, or a
// slot of the run's graph's run limit (named with its key and max).
export function waitWhat(w: Wait): string {
  if (w.slot) return `a slot of ${w.slot.limit}${w.slot.key ? ` (key ${w.slot.key})` : ''}, max ${w.slot.max}`
  return w.for === 'signal' ? 'a signal' : 'a wait'
}
