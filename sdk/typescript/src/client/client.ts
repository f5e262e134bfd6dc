// The client (Go: pkg/client): start runs of a graph, wait for their end,
// signal them, cancel them, read their status and events. It writes the
// events a client may write (run-started, signal, cancel request, on the
// client's subjects) and reads with gets, never with a consumer: waiting is
// a core NATS subscription on the run's terminal subjects, used only as a
// wake-up, with a read of the last message on each (deploy/SECURITY.md).

import { createHash } from 'node:crypto'
import { hostname, userInfo } from 'node:os'
import { context as otelContext, SpanKind, trace, type TracerProvider } from '@opentelemetry/api'
import { connect, type Connection, type ConnectOptions } from '../connect.js'
import { decode, newEvent, type WeftEvent } from '../events/envelope.js'
import { WeftError } from '../events/errors.js'
import { decisionId, newNonce, newRunId } from '../events/ids.js'
import { encodeRunCancelRequested, encodeRunStarted, encodeSignalReceived } from '../events/payloads.js'
import { EventType, MaxTokenLen, startedSubject, terminalSubjects, validToken } from '../events/subjects.js'
import { type Graph, loadGraphFile, parseGraph } from '../graph/graph.js'
import { formatDuration, parseDuration } from '../internal/duration.js'
import { marshal } from '../internal/gojson.js'
import { errorMessage } from '../internal/util.js'
import { AnySeq, Store } from '../store.js'
import { extract, inject, ScopeName } from '../telemetry.js'
import { ended, type RunStatus, summarise } from './fold.js'

/** ClientOptions configure a Client. */
export interface ClientOptions {
  /** connection is an open connection to use, or how to connect (default: the environment). */
  connection?: Connection | ConnectOptions
  /** stream is the events stream (default WEFT_STREAM, else "WEFT"). */
  stream?: string
  /** identity names who acts, recorded as startedBy and as the sender of signals and cancels (default "$USER@host"). */
  identity?: string
  tracerProvider?: TracerProvider
}

/** StartOptions configure Client.start. */
export interface StartOptions {
  /** input seeds the shared state, key by key: a JSON object. */
  input?: Record<string, unknown>
  /** invocation is the run's invocation state: runtime context nodes and conditions read and never change. */
  invocation?: Record<string, unknown>
  /** runId starts the run under this id (letters, digits, '-' and '_'); default a new, time-sortable one. */
  runId?: string
  /** retention is how long the run is kept once it ended (a Go duration, e.g. "720h"). */
  retention?: string
}

/** RunEvent is one event of a run, with its position in the run (1 for run-started). */
export interface RunEvent {
  position: number
  seq: number
  id: string
  type: string
  time: string
  nodeId: string
  attempt: number
  /** payload is the event's data; undefined for a refused message. */
  payload: unknown
  decision: boolean
  /** refused says why a message on the run's subjects is not a valid event. */
  refused?: string
}

/** SignalOptions configure Client.signal. */
export interface SignalOptions {
  /** id makes the signal idempotent: one with an id already in the run's log is not applied again. */
  id?: string
}

/** Client starts, reads and steers runs. */
export class Client {
  private constructor(
    readonly store: Store,
    private readonly owned: boolean,
    readonly identity: string,
    private readonly tp: TracerProvider | undefined,
  ) {}

  /** connect opens a client: over the given connection, or one made from the options and the environment. */
  static async connect(o: ClientOptions = {}): Promise<Client> {
    const c = o.connection
    let conn: Connection
    let owned = false
    if (c !== undefined && 'nc' in c) conn = c
    else {
      conn = await connect({ name: 'weft typescript client', ...(c ?? {}) })
      owned = true
    }
    try {
      const store = await Store.open(conn, o.stream !== undefined ? { stream: o.stream } : {})
      return new Client(store, owned, o.identity ?? defaultIdentity(), o.tracerProvider)
    } catch (err) {
      if (owned) await conn.nc.close()
      throw err
    }
  }

  /** close closes the connection, if the client opened it. */
  async close(): Promise<void> {
    if (this.owned) await this.store.nc.drain()
  }

  private get tracer() {
    return (this.tp ?? trace.getTracerProvider()).getTracer(ScopeName)
  }

  /**
   * start starts a run of a graph (a Graph from parseGraph or
   * loadGraphFile, a graph file's path, or a definition object) and returns
   * its id, as soon as run-started is in the log.
   */
  async start(g: Graph | string | object, o: StartOptions = {}): Promise<string> {
    const graph = typeof g === 'string' ? loadGraphFile(g) : isGraph(g) ? g : parseGraph(g)
    const runId = o.runId ?? newRunId()
    if (!validToken(runId)) throw new WeftError('InvalidID', `starting a run: run id ${JSON.stringify(runId)}: invalid id (letters, digits, '-' and '_', at most ${MaxTokenLen})`)
    let retention: string | undefined
    if (o.retention !== undefined) {
      let d: bigint
      try {
        d = parseDuration(o.retention)
      } catch (err) {
        throw new WeftError('InvalidInput', `starting a run of ${graph.name}: retention: ${errorMessage(err)}`)
      }
      if (d < 0n) throw new WeftError('InvalidInput', `starting a run of ${graph.name}: retention ${o.retention}: must not be negative`)
      retention = formatDuration(d)
    }
    const input = jsonObject(graph.name, 'input', o.input)
    const invocation = jsonObject(graph.name, 'invocation', o.invocation)
    const ev = newEvent({
      runId,
      id: runId,
      type: EventType.RunStarted,
      data: encodeRunStarted({
        graphName: graph.name,
        graphDigest: graph.digest,
        graph: graph.canonical,
        ...(input !== undefined ? { input } : {}),
        ...(invocation !== undefined ? { invocation } : {}),
        startedBy: this.identity,
        ...(retention !== undefined ? { retention } : {}),
        nonce: newNonce(),
      }),
    })
    const span = this.tracer.startSpan(`run ${graph.name}`, {
      kind: SpanKind.PRODUCER,
      attributes: { 'messaging.system': 'nats', 'messaging.operation.type': 'send', 'messaging.message.id': runId, 'weft.run.id': runId, 'weft.graph.name': graph.name },
    })
    try {
      inject(trace.setSpan(otelContext.active(), span), ev)
      // The event id is the run id, so a retried start is a duplicate of the
      // first; a start of an id that has a history is refused here.
      try {
        await this.store.lastSeq(runId)
        throw new WeftError('RunExists', `starting run ${runId}: run already exists`)
      } catch (err) {
        if (!(err instanceof WeftError && err.code === 'RunNotFound')) throw err
      }
      try {
        await this.store.append(runId, 0, ev)
      } catch (err) {
        if (err instanceof WeftError && err.code === 'Conflict') throw new WeftError('RunExists', `starting run ${runId}: run already exists`, { cause: err })
        throw err
      }
      return runId
    } finally {
      span.end()
    }
  }

  /** events returns a run's events in log order, with their positions. */
  async events(runId: string): Promise<RunEvent[]> {
    const evs = await this.store.read(runId)
    return evs.map((e, i) => {
      let payload: unknown
      if (e.refused === undefined) {
        try {
          payload = JSON.parse(e.data)
        } catch {
          payload = undefined
        }
      }
      return {
        position: i + 1,
        seq: e.seq ?? 0,
        id: e.id,
        type: e.type,
        time: e.time,
        nodeId: e.nodeId,
        attempt: e.attempt,
        payload,
        decision: e.decision === true,
        ...(e.refused !== undefined ? { refused: e.refused.message } : {}),
      }
    })
  }

  /** status returns a summary of the run from its whole log (see RunStatus). */
  async status(runId: string): Promise<RunStatus> {
    if (!validToken(runId)) throw new WeftError('InvalidID', `run id ${JSON.stringify(runId)}: invalid id`)
    return summarise(runId, await this.store.read(runId))
  }

  /**
   * wait resolves with the run's status once it has ended (completed,
   * failed or cancelled: a failed run is no error), or rejects when the
   * signal aborts or the timeout (ms) passes.
   */
  async wait(runId: string, o: { signal?: AbortSignal; timeout?: number } = {}): Promise<RunStatus> {
    await this.store.lastSeq(runId) // RunNotFound for a run that does not exist
    const signals: AbortSignal[] = []
    if (o.signal !== undefined) signals.push(o.signal)
    if (o.timeout !== undefined) signals.push(AbortSignal.timeout(o.timeout))
    const signal = signals.length > 0 ? AbortSignal.any(signals) : undefined
    // What is heard is only a wake-up: the run's terminal subjects are read.
    // Core NATS may drop a message, so they are read again now and then
    // while nothing is heard, from a second on, backing off to 30 s.
    let wake: (() => void) | undefined
    const onAbort = () => wake?.()
    signal?.addEventListener('abort', onAbort, { once: true })
    const subs = terminalSubjects(runId).map((s) => this.store.nc.subscribe(s, { callback: () => wake?.() }))
    try {
      await this.store.nc.flush()
      let idle = 1_000
      for (;;) {
        const woken = new Promise<void>((resolve) => (wake = resolve))
        if (await this.hasEnded(runId)) return await this.status(runId)
        if (signal?.aborted) throw new WeftError('Timeout', `waiting for run ${runId}: ${errorMessage(signal.reason)}`)
        let t: NodeJS.Timeout | undefined
        await Promise.race([woken, new Promise<void>((resolve) => (t = setTimeout(resolve, idle)))])
        clearTimeout(t)
        idle = Math.min(idle * 2, 30_000)
      }
    } finally {
      signal?.removeEventListener('abort', onAbort)
      for (const s of subs) s.unsubscribe()
    }
  }

  // hasEnded reports whether a valid terminal decision is in the run's log.
  private async hasEnded(runId: string): Promise<boolean> {
    for (const subject of terminalSubjects(runId)) {
      const m = await this.store.lastOn(subject)
      if (m === undefined) continue
      try {
        decode(m.subject, m.headers, m.data)
        return true
      } catch {
        // a malformed message on a terminal subject is passed over
      }
    }
    return false
  }

  /**
   * cancel asks for a run to be cancelled: the coordinator ends it as
   * cancelled and workers stop its nodes in flight. Asking again is
   * harmless. It fails for a run that does not exist or has ended.
   */
  async cancel(runId: string, reason = ''): Promise<void> {
    const history = await this.live(runId)
    const ev = newEvent({ runId, id: decisionId(runId, EventType.RunCancelRequested), type: EventType.RunCancelRequested, data: encodeRunCancelRequested({ by: this.identity, reason }) })
    this.control(history[0] as WeftEvent, 'cancel', runId, ev)
    await this.store.append(runId, AnySeq, ev)
  }

  /**
   * signal sends data (any JSON value) to a node of a run: the input a
   * human node waits for. A signal carries an id, so that it is applied
   * once: the one given, or one derived from the node's activation and the
   * data (a retried call is the same signal).
   */
  async signal(runId: string, node: string, data?: unknown, o: SignalOptions = {}): Promise<void> {
    if (o.id !== undefined && !validToken(o.id)) throw new WeftError('InvalidID', `signalling node ${JSON.stringify(node)} of run ${runId}: invalid id: signal id ${JSON.stringify(o.id)}`)
    const raw = data === undefined ? undefined : marshal(data)
    const history = await this.live(runId)
    const started = JSON.parse((history[0] as WeftEvent).data) as { graph?: { nodes?: { id: string }[] } }
    const nodes = (started.graph?.nodes ?? []).map((n) => n.id)
    if (!nodes.includes(node)) throw new WeftError('InvalidInput', `signalling run ${runId}: unknown node: the graph has no node ${JSON.stringify(node)} (its nodes: ${nodes.join(', ')})`)
    const id = o.id !== undefined ? decisionId(runId, EventType.SignalReceived, o.id) : this.derivedSignalId(runId, node, raw ?? '', history)
    const ev = newEvent({
      runId,
      id,
      type: EventType.SignalReceived,
      nodeId: node,
      data: encodeSignalReceived({ node, ...(raw !== undefined ? { data: raw } : {}), by: this.identity }),
    })
    this.control(history[0] as WeftEvent, `signal ${node}`, runId, ev)
    await this.store.append(runId, AnySeq, ev)
  }

  // control gives a signal or cancel request the run's trace, under a span of its own.
  private control(started: WeftEvent, name: string, runId: string, ev: WeftEvent): void {
    const ctx = extract(started, otelContext.active())
    const span = this.tracer.startSpan(name, { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'nats', 'weft.run.id': runId } }, ctx)
    inject(trace.setSpan(ctx, span), ev)
    span.end()
  }

  // derivedSignalId is the id of a signal sent without one: the node's
  // activation it is for (the waiting one, or the next) and a digest of the
  // data; a repeat of the node's last signal (same data and sender, within
  // two minutes, nothing since) is taken for a retry of it.
  private derivedSignalId(runId: string, node: string, data: string, history: WeftEvent[]): string {
    const digest = createHash('sha256').update(data).digest('hex').slice(0, 16)
    const prefix = decisionId(runId, EventType.SignalReceived, 'n', node) + ':'
    for (let i = history.length - 1; i >= 0; i--) {
      const e = history[i] as WeftEvent
      if (e.refused !== undefined || e.type !== EventType.SignalReceived || e.nodeId !== node) continue
      const last = JSON.parse(e.data) as { data?: unknown; by?: string }
      const lastData = last.data === undefined ? '' : marshal(last.data)
      if (e.id.startsWith(prefix) && e.id.endsWith(':' + digest) && last.by === this.identity && lastData === data && Date.now() - (e.stored?.getTime() ?? 0) < 120_000) {
        return e.id
      }
      break
    }
    let iteration = 0
    let waiting = false
    let buffered = 0
    for (const e of history) {
      if (e.refused !== undefined || e.nodeId !== node) continue
      const p = JSON.parse(e.data) as { iteration?: number; for?: string }
      if (e.type === EventType.NodeReady || e.type === EventType.NodeWaiting || e.type === EventType.NodeSkipped) {
        iteration = p.iteration ?? iteration
        waiting = false
        if (e.type === EventType.NodeWaiting && p.for === 'signal') {
          if (buffered > 0) buffered--
          else waiting = true
        }
      } else if (e.type === EventType.SignalReceived) {
        if (waiting) waiting = false
        else buffered++
      }
    }
    const target = waiting ? iteration : iteration + 1 + buffered
    return `${prefix}${target}:${digest}`
  }

  // live returns the history of a run that has not ended.
  private async live(runId: string): Promise<WeftEvent[]> {
    if (!validToken(runId)) throw new WeftError('InvalidID', `run id ${JSON.stringify(runId)}: invalid id`)
    const history = await this.store.read(runId)
    const st = summarise(runId, history)
    if (ended(st.status)) throw new WeftError('RunEnded', `run ${runId} has ended (${st.status})`)
    if (history[0]?.type !== EventType.RunStarted) throw new WeftError('RunNotFound', `run not found: ${runId} (no run-started on ${startedSubject(runId)})`)
    return history
  }
}

function isGraph(g: object): g is Graph {
  const x = g as Partial<Graph>
  return typeof x.canonical === 'string' && typeof x.digest === 'string' && typeof x.name === 'string'
}

function jsonObject(graph: string, what: string, v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'object' || Array.isArray(v)) throw new WeftError('InvalidInput', `starting a run of ${graph}: invalid input: ${what} must be a JSON object`)
  try {
    return marshal(v, what)
  } catch (err) {
    throw new WeftError('InvalidInput', `starting a run of ${graph}: invalid input: ${what} does not encode as JSON: ${errorMessage(err)}`)
  }
}

function defaultIdentity(): string {
  let user = process.env['USER'] || process.env['USERNAME'] || ''
  if (user === '') {
    try {
      user = userInfo().username
    } catch {
      user = 'weft'
    }
  }
  const host = hostname()
  return host !== '' ? `${user}@${host}` : user
}

