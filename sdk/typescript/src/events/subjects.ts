// The event catalogue and the subject layout (Go: pkg/events/types.go,
// internal/eventlog/subjects.go). Subjects are per run and name who may
// write them:
//
//   weft.r.<slot>.<run>.c.<kind>          clients: started, signal, cancelreq
//   weft.r.<slot>.<run>.w.<queue>.<kind>  workers of <queue>: invoking, invoked,
//                                         nodefailed, nodecancelled, heartbeat
//   weft.r.<slot>.<run>.d.<kind>          coordinator decisions
//   weft.r.<slot>.<run>.d.ready.<queue>   the work items of <queue>
//   weft.r.<slot>.<run>.n.<kind>          coordinator notices
//
// <slot> is FNV-1a (32 bits) of the run id modulo 64, two hex digits.

/** The CloudEvents types of the Weft catalogue. */
export const EventType = {
  RunStarted: 'dev.weft.run.started.v1',
  RunCompleted: 'dev.weft.run.completed.v1',
  RunFailed: 'dev.weft.run.failed.v1',
  RunCancelRequested: 'dev.weft.run.cancel_requested.v1',
  RunCancelled: 'dev.weft.run.cancelled.v1',
  NodeReady: 'dev.weft.node.ready.v1',
  NodeInvoking: 'dev.weft.node.invoking.v1',
  NodeInvoked: 'dev.weft.node.invoked.v1',
  NodeFailed: 'dev.weft.node.failed.v1',
  NodeSkipped: 'dev.weft.node.skipped.v1',
  NodeWaiting: 'dev.weft.node.waiting.v1',
  NodeRouted: 'dev.weft.node.routed.v1',
  NodeCancelled: 'dev.weft.node.cancelled.v1',
  Heartbeat: 'dev.weft.node.heartbeat.v1',
  RetryScheduled: 'dev.weft.retry.scheduled.v1',
  TimerFired: 'dev.weft.timer.fired.v1',
  SignalReceived: 'dev.weft.signal.received.v1',
  ChildRunStarted: 'dev.weft.child.started.v1',
  ChildRunFinished: 'dev.weft.child.finished.v1',
} as const

export type EventType = (typeof EventType)[keyof typeof EventType]

/** The writer classes: the subject token after the run id. */
export const Class = { Client: 'c', Worker: 'w', Coordinator: 'd', Notice: 'n' } as const
type ClassToken = (typeof Class)[keyof typeof Class]

const table: Record<EventType, { kind: string; cls: ClassToken }> = {
  [EventType.RunStarted]: { kind: 'started', cls: Class.Client },
  [EventType.RunCompleted]: { kind: 'completed', cls: Class.Coordinator },
  [EventType.RunFailed]: { kind: 'failed', cls: Class.Coordinator },
  [EventType.RunCancelRequested]: { kind: 'cancelreq', cls: Class.Client },
  [EventType.RunCancelled]: { kind: 'cancelled', cls: Class.Coordinator },
  [EventType.NodeReady]: { kind: 'ready', cls: Class.Coordinator },
  [EventType.NodeInvoking]: { kind: 'invoking', cls: Class.Worker },
  [EventType.NodeInvoked]: { kind: 'invoked', cls: Class.Worker },
  [EventType.NodeFailed]: { kind: 'nodefailed', cls: Class.Worker },
  [EventType.NodeSkipped]: { kind: 'skipped', cls: Class.Coordinator },
  [EventType.NodeWaiting]: { kind: 'waiting', cls: Class.Coordinator },
  [EventType.NodeRouted]: { kind: 'routed', cls: Class.Coordinator },
  [EventType.NodeCancelled]: { kind: 'nodecancelled', cls: Class.Worker },
  [EventType.Heartbeat]: { kind: 'heartbeat', cls: Class.Worker },
  [EventType.RetryScheduled]: { kind: 'retry', cls: Class.Coordinator },
  [EventType.TimerFired]: { kind: 'timer', cls: Class.Notice },
  [EventType.SignalReceived]: { kind: 'signal', cls: Class.Client },
  [EventType.ChildRunStarted]: { kind: 'childstarted', cls: Class.Coordinator },
  [EventType.ChildRunFinished]: { kind: 'childfinished', cls: Class.Notice },
}

/** knownType reports whether t is a type of the catalogue. */
export function knownType(t: string): t is EventType {
  return Object.prototype.hasOwnProperty.call(table, t)
}

/** kindOf is the kind token of a type of the catalogue ("ready" for a node-ready). */
export function kindOf(t: EventType): string {
  return table[t].kind
}

/** classOf is the writer class of a type of the catalogue. */
export function classOf(t: EventType): string {
  return table[t].cls
}

/** terminal reports whether t ends a run. */
export function terminal(t: string): boolean {
  return t === EventType.RunCompleted || t === EventType.RunFailed || t === EventType.RunCancelled
}

/** The CloudEvents source of events Weft writes. */
export const Source = 'weft'

/** The queue token of the nodes the coordinator runs itself. */
export const LocalQueue = '_local'

/** The events stream's default name. */
export const DefaultStream = 'WEFT'

/** The longest run id, node id or queue name. */
export const MaxTokenLen = 128

const tokenRE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/

/** validToken reports whether s can be a run id, node id or queue name (one subject token). */
export function validToken(s: string): boolean {
  return tokenRE.test(s)
}

/** slot is the run's slot token: FNV-1a (32 bits) of its id modulo 64, two hex digits. */
export function slot(runId: string): string {
  let h = 0x811c9dc5
  for (const b of Buffer.from(runId, 'utf8')) {
    h ^= b
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return (h % 64).toString(16).padStart(2, '0')
}

/** runBase is "weft.r.<slot>.<run>.". */
export function runBase(runId: string): string {
  return `weft.r.${slot(runId)}.${runId}.`
}

/** runFilter is the subject filter of one run's history. */
export function runFilter(runId: string): string {
  return runBase(runId) + '>'
}

/** queueFilter is the subject filter of a task queue's work across runs. */
export function queueFilter(queue: string): string {
  return `weft.r.*.*.d.ready.${queue}`
}

/** workerFilter is what a worker of the queue may write. */
export function workerFilter(queue: string): string {
  return `weft.r.*.*.w.${queue}.>`
}

/** startedSubject is the subject of a run's run-started event when a client started it. */
export function startedSubject(runId: string): string {
  return runBase(runId) + 'c.started'
}

/**
 * childStartedSubject is the subject of a child run's run-started event: a
 * decision of the child run, which only its parent's coordinator writes. It
 * is the only place a run-started may name a parent.
 */
export function childStartedSubject(runId: string): string {
  return runBase(runId) + 'd.started'
}

/** terminalSubjects are the subjects of a run's ending decisions. */
export function terminalSubjects(runId: string): string[] {
  const base = runBase(runId) + 'd.'
  return [base + 'completed', base + 'failed', base + 'cancelled']
}

/**
 * Ended notices (Go: internal/eventlog subjects.go). Once a coordinator
 * has appended a run's end it publishes an empty core NATS message on
 * "weft.ended.<slot>.<run>" (nothing stored; only the coordinator's role
 * may publish there). A namespace is a NATS account of its own, so the
 * subjects are the same in every namespace, as Go's are.
 */
const endedPrefix = 'weft.ended.'
/** AllEndedNotices matches every run's ended notice. */
export const AllEndedNotices = endedPrefix + '>'

/** endedNotice is the subject of a run's ended notice. */
export function endedNotice(runId: string): string {
  return `${endedPrefix}${slot(runId)}.${runId}`
}

/** runOfEndedNotice is the run an ended notice's subject names; undefined when it names none. */
export function runOfEndedNotice(subject: string): string | undefined {
  if (!subject.startsWith(endedPrefix)) return undefined
  const rest = subject.slice(endedPrefix.length)
  const dot = rest.indexOf('.')
  if (dot < 0) return undefined
  const run = rest.slice(dot + 1)
  return validToken(run) ? run : undefined
}

/** kindFilter is the filter of one type of event across all runs. */
export function kindFilter(t: EventType): string {
  const { kind, cls } = table[t]
  if (cls === Class.Worker) return `weft.r.*.*.w.*.${kind}`
  if (t === EventType.NodeReady) return 'weft.r.*.*.d.ready.*'
  return `weft.r.*.*.${cls}.${kind}`
}

/** subjectFor is the subject an event of type t is published on (queue: of work items and workers' outcomes). */
export function subjectFor(runId: string, t: EventType, queue: string): string {
  const { kind, cls } = table[t]
  if (t === EventType.NodeReady) return runBase(runId) + `d.ready.${queue}`
  if (cls === Class.Worker) return runBase(runId) + `w.${queue}.${kind}`
  return runBase(runId) + `${cls}.${kind}`
}

/** Place is where a subject puts an event. */
export interface Place {
  run: string
  cls: string
  queue: string
  kind: string
}

/** parseSubject splits an event subject; undefined for anything else. */
export function parseSubject(subject: string): Place | undefined {
  if (!subject.startsWith('weft.r.')) return undefined
  const tok = subject.slice('weft.r.'.length).split('.')
  if (tok.length < 4 || tok[0] !== slot(tok[1] as string)) return undefined
  const p: Place = { run: tok[1] as string, cls: tok[2] as string, queue: '', kind: '' }
  if (p.cls === Class.Worker && tok.length === 5) {
    p.queue = tok[3] as string
    p.kind = tok[4] as string
  } else if (p.cls === Class.Coordinator && tok.length === 5 && tok[3] === 'ready') {
    p.kind = 'ready'
    p.queue = tok[4] as string
  } else if (tok.length === 4 && (p.cls === Class.Client || p.cls === Class.Coordinator || p.cls === Class.Notice)) {
    p.kind = tok[3] as string
  } else {
    return undefined
  }
  return p.run !== '' ? p : undefined
}

/** acceptedOn reports whether an event of type t may stand where p says. */
export function acceptedOn(t: EventType, p: Place): boolean {
  const { kind, cls } = table[t]
  // node.invoked and node.failed are also decisions (a router's outcome, a
  // fallback, a timed-out attempt), and so is a child run's run-started.
  const alsoDecision = (t === EventType.NodeInvoked || t === EventType.NodeFailed || t === EventType.RunStarted) && p.cls === Class.Coordinator
  return p.kind === kind && (p.cls === cls || alsoDecision)
}

/** isWorkerSubject reports whether subject is a worker-class event subject. */
export function isWorkerSubject(subject: string): boolean {
  return parseSubject(subject)?.cls === Class.Worker
}
