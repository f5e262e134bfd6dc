// The worker (Go: pkg/worker worker.go, execute.go, lifecycle.go). A Worker
// pulls node-ready events (work items) from task queues, runs the node
// registered for each item's node type, and appends the outcome to the
// run's log:
//
//   node-ready ──pull──▶ node-invoking ──run──▶ node-invoked | node-failed | node-cancelled ──▶ ack
//
// Every worker of a queue, in any language, shares one durable JetStream
// pull consumer, "work-<queue>", filtered on the queue's node-ready
// subjects. A work item is acknowledged only after its outcome is in the
// log, so a worker that dies mid-node leaves the item to be delivered again
// once the consumer's AckWait passes; each delivery is a node-invoking
// event with its delivery number, and outcome ids are derived from the
// item, so the log holds one outcome per delivery.

import { hostname } from 'node:os'
import type { JsMsg } from '@nats-io/jetstream'
import { jetstream, type Consumer } from '@nats-io/jetstream'
import type { Context as OtelContext, Span, TracerProvider } from '@opentelemetry/api'
import { connect, type Connection, type ConnectOptions } from '../connect.js'
import { decode, decodeWithPayload, HdrRestored, type HeaderReader, newEvent, type WeftEvent } from '../events/envelope.js'
import { isWeftError } from '../events/errors.js'
import { isRef, resolveRef } from '../events/offload.js'
import { decisionId, idempotencyKey, type NodeRef, refKey } from '../events/ids.js'
import {
  type ActionOut,
  encodeHeartbeat,
  encodeNodeCancelled,
  encodeNodeFailed,
  encodeNodeInvoked,
  encodeNodeInvoking,
  type Failure,
  FailureType,
  type FilterNote,
  type NodeReadyData,
} from '../events/payloads.js'
import { EventType, kindFilter, queueFilter, validToken } from '../events/subjects.js'
import { formatMs } from '../internal/duration.js'
import { marshal } from '../internal/gojson.js'
import { consoleLogger, errorMessage, type Logger, sleep } from '../internal/util.js'
import { AnySeq, headerReader, isPermission, Store } from '../store.js'
import { failSpan, inject, startNodeSpan, withContext } from '../telemetry.js'
import { Announcer } from './announce.js'
import { DrainTimeoutError, failureOf, NodeError, nonRetryable } from './errors.js'
import type { Input, Node, NodeContext, NodeFunc, Result } from './node.js'
import { WeftAbort } from './node.js'
import { EndWatch } from './endwatch.js'
import { RunReader } from './runinfo.js'
import { checkSchema } from './schema.js'
import { Semaphore } from './semaphore.js'

/** Defaults, as the Go worker's. */
export const DefaultQueue = 'default'
export const DefaultConcurrency = 16
export const DefaultDrainTimeout = 30_000
export const DefaultAckWait = 30_000
export const DefaultFallbackTimeout = 30_000
/** HeartbeatEventInterval is the least time between two Heartbeat events of one attempt. */
export const HeartbeatEventInterval = 10_000
/** unknownTypeDelay is how long work of a node type this worker does not serve waits before it is delivered again. */
const unknownTypeDelay = 5_000
/** staleAfter: an item that waited longer in its queue is checked for its run's end before it runs. */
const staleAfter = 2_000
const maxHeartbeatFailures = 3
const recentCancels = 4096
/**
 * abandonGrace is how long a node whose signal aborted may take to settle
 * before its outcome is recorded without it: well within the second the
 * coordinator's own start-to-close timer gives a worker after a timeout.
 */
const abandonGrace = 200
/** fetchExpires bounds one pull request, and so how long a drain waits for the pull in flight. */
const fetchExpires = 2_000

/** WorkerOptions configure a Worker. Every field has a default. */
export interface WorkerOptions {
  /** name names the worker in the events it writes (default "<hostname>-<pid>"). */
  name?: string
  /** queues are the task queues it pulls from (default WEFT_QUEUES, comma separated, else "default"). */
  queues?: string[]
  /** concurrency bounds the nodes it runs at once, across its queues (default 16). */
  concurrency?: number
  /** queueConcurrency bounds the nodes of one queue, within concurrency. */
  queueConcurrency?: Record<string, number>
  /** ackWait (ms) is the AckWait of a queue consumer this worker creates (default 30 s); an existing one keeps its own. */
  ackWait?: number
  /** heartbeat (ms) is how often a running node's item is marked in progress (default a third of the queue's AckWait). */
  heartbeat?: number
  /** drainTimeout (ms) bounds how long run waits for nodes in flight once it is told to stop (default 30 s). */
  drainTimeout?: number
  /** announceInterval (ms) is how often the worker refreshes its announcement (default 10 s; negative: off). */
  announceInterval?: number
  logger?: Logger
  /** tracerProvider takes the node spans (default the global one). */
  tracerProvider?: TracerProvider
  /** connection is an open connection to use, or how to connect (default: the environment, see connect). */
  connection?: Connection | ConnectOptions
  /** stream is the events stream (default WEFT_STREAM, else "WEFT"). */
  stream?: string
  /**
   * offloadAt (bytes): an outcome whose body is over it (an output or
   * state update over 256 KiB by default) is kept in the payloads bucket
   * beside the log, as Go's worker keeps it; 0 or less: never (StoreOptions).
   */
  offloadAt?: number
}

/** RunOptions configure Worker.run. */
export interface RunOptions {
  /** signal stops the worker (it drains) when it aborts. */
  signal?: AbortSignal
  /** signals lists the process signals that stop it (default SIGTERM and SIGINT; [] for none). */
  signals?: NodeJS.Signals[]
}

/** Stats are a worker's counters. */
export interface Stats {
  received: number
  succeeded: number
  failed: number
  cancelled: number
  malformed: number
  redelivered: number
  /** endReads counts the reads of whether a run ended (the ended notices spare most: endwatch.ts). */
  endReads: number
}

interface Queue {
  name: string
  consumer: Consumer | undefined
  heartbeat: number
  slots: Semaphore | undefined
}

interface RunCancel {
  by: string
  reason: string
}

/** Item is one work item being run. */
interface Item {
  run: string
  ready: NodeReadyData
  event: WeftEvent
  delivery: number
  msg: JsMsg
  q: Queue
  ac: AbortController
  span?: Span
  otel?: OtelContext
  input?: Input
  inputErr?: unknown
  invoked: FilterNote[]
  skipped: boolean
  fallback: boolean
}

/** Worker runs nodes of workflow graphs. Register node types with handle, then run. */
export class Worker {
  private readonly opts: Required<Pick<WorkerOptions, 'name' | 'queues' | 'concurrency' | 'drainTimeout'>> & WorkerOptions
  private readonly log: Logger
  private handlers = new Map<string, Node>()
  private unknown = new Set<string>()
  private counters: Omit<Stats, 'endReads'> = { received: 0, succeeded: 0, failed: 0, cancelled: 0, malformed: 0, redelivered: 0 }
  private running = false
  private stopping = new AbortController()
  private inflight = new Set<Promise<void>>()
  private items = new Map<string, Set<AbortController>>()
  private cancels = new Map<string, RunCancel>()
  private store: Store | undefined
  private runs: RunReader | undefined
  private ends: EndWatch | undefined

  constructor(opts: WorkerOptions = {}) {
    const envQueues = (process.env['WEFT_QUEUES'] ?? '')
      .split(',')
      .map((q) => q.trim())
      .filter((q) => q !== '')
    this.opts = {
      ...opts,
      name: opts.name ?? `${hostname() || 'worker'}-${process.pid}`,
      queues: opts.queues ?? (envQueues.length > 0 ? envQueues : [DefaultQueue]),
      concurrency: opts.concurrency ?? DefaultConcurrency,
      drainTimeout: opts.drainTimeout ?? DefaultDrainTimeout,
    }
    this.log = opts.logger ?? consoleLogger()
    const problems = validateOptions(this.opts)
    if (problems.length > 0) throw new Error(`worker: ${problems.join('; ')}`)
  }

  /** name is the worker's name, as written in the events. */
  get name(): string {
    return this.opts.name
  }

  /** handle registers the node for a node type (again: replaces it). */
  handle<S = any, C = any>(nodeType: string, node: NodeFunc<S, C> | Node<S, C>): this {
    if (nodeType === '' || node === undefined || node === null) throw new Error('worker: handle needs a node type and a node')
    const n: Node = typeof node === 'function' ? { execute: node as NodeFunc } : (node as Node)
    if (n.execute === undefined && n.exec === undefined) throw new Error(`worker: node type ${JSON.stringify(nodeType)} has neither execute nor exec`)
    this.handlers.set(nodeType, n)
    return this
  }

  /** types lists the node types the worker serves, sorted. */
  types(): string[] {
    return [...this.handlers.keys()].sort()
  }

  /** stats returns the worker's counters. */
  stats(): Stats {
    return { ...this.counters, endReads: this.runs?.endReads ?? 0 }
  }

  /** stop tells a running worker to drain and stop; run resolves when it has. */
  stop(): void {
    this.stopping.abort()
  }

  /**
   * run pulls and runs work until it is stopped (stop, the signal, SIGTERM
   * or SIGINT), then drains: it stops pulling, hands back work it has not
   * started, and lets nodes in flight finish within the drain timeout;
   * nodes still running then are aborted and their work handed back, and
   * run rejects with DrainTimeoutError. A Worker runs once.
   */
  async run(ro: RunOptions = {}): Promise<void> {
    if (this.running) throw new Error('worker already running')
    this.running = true
    const stop = () => this.stopping.abort()
    ro.signal?.addEventListener('abort', stop, { once: true })
    if (ro.signal?.aborted) stop()
    const sigs = ro.signals ?? ['SIGTERM', 'SIGINT']
    for (const s of sigs) process.on(s, stop)
    let conn: Connection | undefined
    let owned = false
    const c = this.opts.connection
    try {
      if (c !== undefined && 'nc' in c) conn = c
      else {
        conn = await connect({ name: `weft worker ${this.opts.name}`, ...(c ?? {}) })
        owned = true
      }
      await this.serve(conn)
    } finally {
      for (const s of sigs) process.off(s, stop)
      ro.signal?.removeEventListener('abort', stop)
      if (owned && conn !== undefined) await conn.nc.drain().catch(() => conn?.nc.close())
    }
  }

  private async serve(conn: Connection): Promise<void> {
    const signal = this.stopping.signal
    const store = await Store.open(conn, {
      ...(this.opts.stream !== undefined ? { stream: this.opts.stream } : {}),
      ...(this.opts.offloadAt !== undefined ? { offloadAt: this.opts.offloadAt } : {}),
      signal,
      log: this.log,
    })
    this.store = store
    this.runs = new RunReader(store)
    this.ends = await EndWatch.start(conn.nc)
    const cancelSub = conn.nc.subscribe(kindFilter(EventType.RunCancelRequested), { callback: (err, m) => {
      if (err === null) this.onCancelRequest(m.subject, m.headers, m.data)
    } })
    const queues: Queue[] = []
    try {
      for (const name of this.opts.queues) queues.push(await this.openQueue(store, name))
    } catch (err) {
      cancelSub.unsubscribe()
      this.ends?.stop()
      if (signal.aborted) return
      throw err
    }
    const announcer = await Announcer.start(store, this.opts.name, this.opts.queues, () => this.types(), this.opts.announceInterval ?? 0, this.log)
    const slots = new Semaphore(this.opts.concurrency)
    this.log.info('worker running', { worker: this.opts.name, queues: this.opts.queues, concurrency: this.opts.concurrency, types: this.types() })
    const pullers = queues.map((q) => this.pull(store, q, slots))
    await Promise.all(pullers)
    // Draining: nodes in flight finish within the drain timeout.
    this.log.info('worker draining', { worker: this.opts.name, inflight: this.inflight.size })
    let clean = await this.waitInflight(this.opts.drainTimeout)
    if (!clean) {
      for (const set of this.items.values()) for (const ac of set) ac.abort(new WeftAbort('drain', 'worker drain timeout'))
      await this.waitInflight(abandonGrace + 5_000)
    }
    cancelSub.unsubscribe()
    this.ends?.stop()
    await announcer?.stop()
    await conn.nc.flush().catch(() => undefined)
    this.log.info('worker stopped', { worker: this.opts.name, stats: this.stats() })
    if (!clean) throw new DrainTimeoutError()
  }

  private async waitInflight(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms
    while (this.inflight.size > 0) {
      const left = deadline - Date.now()
      if (left <= 0) return false
      let t: NodeJS.Timeout | undefined
      await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => (t = setTimeout(r, left)))])
      clearTimeout(t)
    }
    return true
  }

  // openQueue sets up a queue's consumer, waiting out a NATS that is away.
  private async openQueue(store: Store, name: string): Promise<Queue> {
    let wait = 200
    for (;;) {
      try {
        const info = await ensureQueue(store, name, this.opts.ackWait ?? 0)
        const ackWait = Math.round((info.config.ack_wait ?? DefaultAckWait * 1e6) / 1e6)
        let hb = this.opts.heartbeat ?? Math.floor(ackWait / 3)
        if (hb <= 0 || (ackWait > 0 && hb >= ackWait)) {
          this.log.warn("heartbeat is not shorter than the queue's ack wait; work may be redelivered while it runs", { queue: name, heartbeat: hb, ackWait })
          if (hb <= 0) hb = 1000
        }
        const n = this.opts.queueConcurrency?.[name]
        return { name, consumer: undefined, heartbeat: hb, slots: n !== undefined && n > 0 ? new Semaphore(n) : undefined }
      } catch (err) {
        if (isPermission(err) || (err instanceof Error && /ack_policy/.test(err.message))) throw err
        if (this.stopping.signal.aborted) throw err
        this.log.warn(`waiting for the consumer of queue ${name}`, { error: errorMessage(err) })
        await sleep(wait, this.stopping.signal).catch(() => undefined)
        wait = Math.min(wait * 2, 5_000)
      }
    }
  }

  // pull takes work from a queue until the worker stops: a pull request
  // for as many items as it has free slots, so that nothing waits in a
  // buffer with its AckWait running.
  private async pull(store: Store, q: Queue, slots: Semaphore): Promise<void> {
    const signal = this.stopping.signal
    const js = jetstream(store.nc)
    const limit = Math.min(q.slots?.size ?? this.opts.concurrency, this.opts.concurrency)
    while (!signal.aborted) {
      // Take one slot (waiting for it), then as many more as are free.
      let held = 0
      if (!(await this.take(q, slots, signal))) break
      held = 1
      while (held < limit && this.tryTake(q, slots)) held++
      try {
        q.consumer ??= await js.consumers.get(store.stream, queueConsumer(q.name))
        const batch = await q.consumer.fetch({ max_messages: held, expires: fetchExpires })
        for await (const m of batch) {
          if (signal.aborted || held === 0) {
            // Drain: hand back at once what came after the stop.
            nak(m, 0, this.log)
            continue
          }
          held--
          const p = this.process(q, m).finally(() => {
            this.release(q, slots)
            this.inflight.delete(p)
          })
          this.inflight.add(p)
        }
      } catch (err) {
        if (!signal.aborted) {
          this.log.warn('pulling work', { queue: q.name, error: errorMessage(err) })
          q.consumer = undefined
          await sleep(1_000, signal).catch(() => undefined)
          await ensureQueue(store, q.name, this.opts.ackWait ?? 0).catch((e: unknown) => this.log.error('ensuring queue', { queue: q.name, error: errorMessage(e) }))
        }
      } finally {
        for (; held > 0; held--) this.release(q, slots)
      }
    }
  }

  private async take(q: Queue, slots: Semaphore, signal: AbortSignal): Promise<boolean> {
    if (q.slots !== undefined && !(await q.slots.acquire(signal))) return false
    if (!(await slots.acquire(signal))) {
      q.slots?.release()
      return false
    }
    return true
  }

  private tryTake(q: Queue, slots: Semaphore): boolean {
    if (q.slots !== undefined && !q.slots.tryAcquire()) return false
    if (!slots.tryAcquire()) {
      q.slots?.release()
      return false
    }
    return true
  }

  private release(q: Queue, slots: Semaphore): void {
    slots.release()
    q.slots?.release()
  }

  private onCancelRequest(subject: string, hdr: Parameters<typeof headerReader>[0], data: Uint8Array): void {
    let e: WeftEvent
    try {
      e = decode(subject, headerReader(hdr), data)
    } catch {
      return // the subscription sees raw publishes too
    }
    if (e.type !== EventType.RunCancelRequested) return
    const p = JSON.parse(e.data) as { by?: string; reason?: string }
    this.cancelRun(e.runId, { by: p.by ?? '', reason: p.reason ?? '' })
  }

  private cancelRun(run: string, c: RunCancel): void {
    if (!this.cancels.has(run)) {
      this.cancels.set(run, c)
      if (this.cancels.size > recentCancels) {
        const oldest = this.cancels.keys().next().value
        if (oldest !== undefined) this.cancels.delete(oldest)
      }
    }
    for (const ac of this.items.get(run) ?? []) ac.abort(new WeftAbort('cancelled', `run cancelled by ${c.by}`, c.by, c.reason))
  }

  // decodeWorkItem reads a work item, its body read back from the
  // payloads bucket when it was kept beside the log (a large input). An
  // item whose body is in it is decoded at once: from the item's arrival
  // to its node.invoking's publish, the common path does not wait (its
  // publish then shares a write to the server with what was queued in
  // the same turn, the previous item's ack).
  private decodeWorkItem(m: JsMsg): { ev: WeftEvent; ready: NodeReadyData } | Promise<{ ev: WeftEvent; ready: NodeReadyData }> {
    const hdr = headerReader(m.headers)
    if (!isRef(hdr)) return decodeWorkItemBody(m, hdr, m.data)
    return resolveRef((this.store as Store).nc, m.subject, hdr, m.data).then((r) => decodeWorkItemBody(m, r.headers, r.data))
  }

  // process runs one work item: decode, record invoking, run, record the
  // outcome, ack.
  private async process(q: Queue, m: JsMsg): Promise<void> {
    this.counters.received++
    if ((m.headers?.get(HdrRestored) ?? '') !== '') {
      // A work item put back from an archive: a record of work done long ago.
      m.ack()
      return
    }
    let ev: WeftEvent
    let ready: NodeReadyData
    try {
      const d = this.decodeWorkItem(m)
      ;({ ev, ready } = d instanceof Promise ? await d : d)
    } catch (err) {
      const newer = newerWorkItem(m, err)
      if (newer !== undefined) {
        // A work item of a protocol version this worker does not speak:
        // left to a worker that does, as work of a type it does not serve.
        if (!this.unknown.has(newer)) {
          this.unknown.add(newer)
          this.log.warn('work item of a newer protocol version; leaving it to other workers', { type: newer, queue: q.name })
        }
        nak(m, unknownTypeDelay, this.log)
        return
      }
      if (isWeftError(err, 'KeyMissing') || isWeftError(err, 'Unresolvable')) {
        // Sealed with a key this worker does not hold, or kept beside the
        // log and not readable now (a timeout): not malformed, left to a
        // worker that can read it, or to a later try (the error says which).
        this.log.error('work item this worker cannot read; leaving it to other workers', { subject: m.subject, queue: q.name, error: errorMessage(err) })
        nak(m, unknownTypeDelay, this.log)
        return
      }
      this.counters.malformed++
      this.log.error('malformed work item; terminated', { subject: m.subject, error: errorMessage(err) })
      m.term()
      return
    }
    const delivery = m.info.deliveryCount
    const queued = Date.now() - Math.floor(Number(m.info.timestampNanos) / 1e6)
    if (delivery > 1) {
      this.counters.redelivered++
      this.log.info('work item delivered again', { run: ev.runId, node: ready.node, attempt: ready.attempt, delivery })
    }
    const node = this.handlers.get(ready.type)
    if (node === undefined) {
      if (!this.unknown.has(ready.type)) {
        this.unknown.add(ready.type)
        this.log.warn('no handler for node type; leaving its work to other workers', { type: ready.type, queue: q.name })
      }
      nak(m, unknownTypeDelay, this.log)
      return
    }
    const it: Item = { run: ev.runId, ready, event: ev, delivery, msg: m, q, ac: new AbortController(), invoked: [], skipped: false, fallback: false }
    const ended = this.runEnded(it, queued)
    if (ended === true || (ended !== false && (await ended))) {
      await this.finish(it, this.cancelledEvent(it, { by: 'worker', reason: 'run ended before the work started' }))
      return
    }
    try {
      it.ready = (this.runs as RunReader).resolved(it.run, ready) ?? (await (this.runs as RunReader).resolve(it.run, ready))
    } catch (err) {
      if (err instanceof NodeError) it.inputErr = err // the attempt fails with it, in the log
      else {
        this.log.warn('reading what the work item refers to; handing it back', { run: it.run, node: ready.node, error: errorMessage(err) })
        nak(m, 1_000, this.log)
        return
      }
    }
    const { span, ctx } = startNodeSpan(this.opts.tracerProvider, ev, {
      runId: it.run,
      nodeId: ready.node,
      type: ready.type,
      iteration: ready.iteration,
      attempt: ready.attempt,
      delivery,
      queue: q.name,
      worker: this.opts.name,
      subject: m.subject,
      messageId: ev.id,
    })
    it.span = span
    it.otel = ctx
    try {
      await this.execute(it, node)
    } catch (err) {
      this.log.error('running a work item; handing it back', { run: it.run, node: ready.node, error: errorMessage(err) })
      nak(m, 0, this.log)
    } finally {
      span.end()
    }
  }

  // runEnded reports whether the item's run ended; it reads the log (and
  // returns a promise) only for an item that was delivered again or
  // waited in its queue, and of those only when the coordinators' ended
  // notices cannot tell (endwatch.ts).
  private runEnded(it: Item, queued: number): boolean | Promise<boolean> {
    const runs = this.runs as RunReader
    if (runs.knownEnded(it.run)) return true
    const heard = this.ends?.knows(it.run, Math.floor(Number(it.msg.info.timestampNanos) / 1e6))
    if (heard?.ended === true) return true
    if (it.delivery === 1 && (queued < staleAfter || heard?.vouched === true)) return false
    return runs.hasEnded(it.run).catch((err: unknown) => {
      this.log.warn('checking whether the run ended; running the work', { run: it.run, error: errorMessage(err) })
      return false
    })
  }

  private async execute(it: Item, node: Node): Promise<void> {
    const ready = it.ready
    const track = this.items.get(it.run) ?? new Set()
    this.items.set(it.run, track)
    track.add(it.ac)
    const untrack = () => {
      track.delete(it.ac)
      if (track.size === 0) this.items.delete(it.run)
    }
    const timers: NodeJS.Timeout[] = []
    try {
      const cancelled = this.cancels.get(it.run)
      if (cancelled !== undefined) {
        // The run was cancelled before this work started: do not start it.
        await this.finish(it, this.cancelledEvent(it, cancelled))
        return
      }
      const invoking = newEvent({
        runId: it.run,
        id: decisionId(it.run, EventType.NodeInvoking, refKey(ready), String(ready.attempt), String(it.delivery)),
        type: EventType.NodeInvoking,
        nodeId: ready.node,
        attempt: ready.attempt,
        queue: ready.queue,
        data: encodeNodeInvoking({ node: ready.node, iteration: ready.iteration, item: ready.item ?? undefined, attempt: ready.attempt, delivery: it.delivery, worker: this.opts.name }),
      })
      inject(it.otel as OtelContext, invoking)
      try {
        await this.appendEvent(invoking)
      } catch (err) {
        this.log.error('recording node invoking; handing work back', { run: it.run, node: ready.node, error: errorMessage(err) })
        nak(it.msg, 0, this.log)
        return
      }
      // The input is made after node.invoking's append, which needs none
      // of it: the hop to this node ends with that append.
      this.prepareInput(it)

      // The work item's heartbeat: in progress on a timer, so that
      // JetStream does not deliver it again; lost three times in a row,
      // the node is given up (its item will be delivered again).
      let every = it.q.heartbeat
      if ((ready.heartbeatMs ?? 0) > 0 && (ready.heartbeatMs as number) < every) every = ready.heartbeatMs as number
      let fails = 0
      timers.push(
        setInterval(() => {
          try {
            it.msg.working()
            fails = 0
          } catch {
            if (++fails >= maxHeartbeatFailures) it.ac.abort(new WeftAbort('heartbeat', 'work item heartbeat failed repeatedly'))
          }
        }, every),
      )
      const timeoutMs = ready.timeoutMs ?? 0
      if (timeoutMs > 0) timers.push(setTimeout(() => it.ac.abort(new WeftAbort('timeout', `node timed out after ${formatMs(timeoutMs)}`)), timeoutMs))

      const start = performance.now()
      const out = await this.runNode(it, node)
      const elapsed = performance.now() - start
      for (const t of timers) clearTimeout(t)

      if (out.givenUp !== undefined) {
        if (out.givenUp.kind === 'cancelled') {
          await this.finish(it, this.cancelledEvent(it, { by: out.givenUp.by, reason: out.givenUp.reason }))
        } else {
          // The node was given up, not failed: its item is, or will be,
          // delivered again. Record nothing.
          this.log.warn('node given up; handing work back', { run: it.run, node: ready.node, cause: out.givenUp.message })
          nak(it.msg, 0, this.log)
        }
        return
      }
      let err = out.err
      if (err === undefined) {
        let invoked: WeftEvent | undefined
        try {
          invoked = this.invokedEvent(it, out.res, elapsed)
        } catch (e) {
          err = e
        }
        if (invoked !== undefined) {
          try {
            await this.append(it, invoked)
            this.counters.succeeded++
            await this.ack(it)
            return
          } catch (e) {
            if (!isWeftError(e, 'PayloadTooLarge')) {
              this.log.error('recording node invoked; handing work back', { run: it.run, node: ready.node, error: errorMessage(e) })
              nak(it.msg, 0, this.log)
              return
            }
            err = nonRetryable(FailureType.PayloadTooLarge, `node ${JSON.stringify(ready.node)}: its result does not fit in an event: ${errorMessage(e)}`)
          }
        }
      }
      let f = failureOf(err)
      try {
        try {
          await this.append(it, this.failedEvent(it, f, elapsed))
        } catch (e) {
          if (!isWeftError(e, 'PayloadTooLarge')) throw e
          // The failure itself is too large: record that, without it.
          f = {
            type: FailureType.PayloadTooLarge,
            message: `node ${JSON.stringify(ready.node)}: its failure does not fit in an event (${f.type}: ${clip(f.message, 512)}): ${errorMessage(e)}`,
            retryable: false,
          }
          await this.append(it, this.failedEvent(it, f, elapsed))
        }
      } catch (e) {
        this.log.error('recording node failed; handing work back', { run: it.run, node: ready.node, error: errorMessage(e), failure: `${f.type}: ${f.message}` })
        nak(it.msg, 0, this.log)
        return
      }
      this.counters.failed++
      this.log.info('node failed', { run: it.run, node: ready.node, attempt: ready.attempt, failure: `${f.type}: ${f.message}`, retryable: f.retryable })
      await this.ack(it)
    } finally {
      for (const t of timers) clearTimeout(t)
      untrack()
    }
  }

  // prepareInput decodes the work item for the node; a problem is kept and
  // becomes the attempt's failure.
  private prepareInput(it: Item): void {
    if (it.inputErr !== undefined) return
    const r = it.ready
    const obj = (what: string, v: unknown): Record<string, unknown> => {
      if (v === undefined || v === null) return {}
      if (typeof v !== 'object' || Array.isArray(v)) throw nonRetryable(FailureType.Validation, `work item ${what}: not a JSON object`)
      return v as Record<string, unknown>
    }
    try {
      it.input = {
        runId: it.run,
        nodeId: r.node,
        type: r.type,
        queue: r.queue,
        iteration: r.iteration,
        attempt: r.attempt,
        delivery: it.delivery,
        config: r.config,
        state: obj('input', r.input),
        local: r.local,
        invocation: obj('invocation', r.invocation),
        idempotencyKey: r.idempotencyKey !== '' && r.idempotencyKey !== undefined ? r.idempotencyKey : idempotencyKey(it.run, refOf(r), r.attempt),
        maxAttempts: r.maxAttempts ?? 0,
        effect: r.effect ?? '',
      }
      // A mapped node's item (set, not spread in: once per work item).
      if (r.item !== undefined && r.item !== null) it.input.item = r.item
    } catch (err) {
      it.inputErr = err
    }
  }

  private nodeContext(it: Item, signal: AbortSignal): NodeContext {
    let last = 0
    let count = 0
    const r = it.ready
    const log: Logger = {
      debug: (msg, f) => this.log.debug(msg, { run: it.run, node: r.node, attempt: r.attempt, ...f }),
      info: (msg, f) => this.log.info(msg, { run: it.run, node: r.node, attempt: r.attempt, ...f }),
      warn: (msg, f) => this.log.warn(msg, { run: it.run, node: r.node, attempt: r.attempt, ...f }),
      error: (msg, f) => this.log.error(msg, { run: it.run, node: r.node, attempt: r.attempt, ...f }),
    }
    return {
      signal,
      log,
      otel: it.otel as OtelContext,
      heartbeat: async (details?: unknown) => {
        it.msg.working()
        let interval = HeartbeatEventInterval
        if ((r.heartbeatMs ?? 0) > 0 && (r.heartbeatMs as number) < interval) interval = r.heartbeatMs as number
        const now = Date.now()
        if (last !== 0 && now - last < interval) return
        let raw: string | undefined
        if (details !== undefined && details !== null) raw = marshal(details, 'details')
        count++
        const ev = newEvent({
          runId: it.run,
          id: decisionId(it.run, EventType.Heartbeat, refKey(r), String(r.attempt), String(it.delivery), String(count)),
          type: EventType.Heartbeat,
          nodeId: r.node,
          attempt: r.attempt,
          queue: r.queue,
          data: encodeHeartbeat({ ...refOf(r), attempt: r.attempt, ...(raw !== undefined ? { details: raw } : {}) }),
        })
        inject(it.otel as OtelContext, ev)
        try {
          await this.appendEvent(ev)
        } catch (err) {
          count--
          throw new Error(`worker: recording a heartbeat: ${errorMessage(err)}`, { cause: err })
        }
        last = now
      },
    }
  }

  // runNode runs one execution: the node's own steps, then on failure the
  // failed hook and, after the last attempt, the fallback.
  private async runNode(it: Item, node: Node): Promise<{ res?: Result; err?: unknown; givenUp?: WeftAbort }> {
    const signal = it.ac.signal
    const ctx = this.nodeContext(it, signal)
    let res: Result | undefined
    let err: unknown
    if (it.inputErr !== undefined) err = it.inputErr
    else {
      const r = await settle(() => withContext(it.otel as OtelContext, () => this.attempt(it, node, it.input as Input, ctx)), signal)
      res = r.value
      err = r.err
      if (r.abandoned) err = signal.reason
    }
    if (err === undefined) return { res: res ?? {} }
    const reason = signal.aborted ? (signal.reason as unknown) : undefined
    if (reason instanceof WeftAbort && reason.kind !== 'timeout') return { givenUp: reason }
    if (reason instanceof WeftAbort && reason.kind === 'timeout' && !(err instanceof NodeError && err.type === FailureType.Timeout)) {
      err = new NodeError(FailureType.Timeout, reason.message, { retryable: true, ...(err !== reason ? { cause: err } : {}) })
    }
    if (it.input === undefined) return { err }
    const input = it.input
    if (node.failed !== undefined) {
      const fb = new AbortController()
      await settle(() => withContext(it.otel as OtelContext, async () => node.failed?.(input, err, this.nodeContext(it, fb.signal))), fb.signal, DefaultFallbackTimeout).then((r) => {
        if (r.err !== undefined) this.log.warn('the failed hook failed', { run: it.run, node: it.ready.node, error: errorMessage(r.err) })
      })
    }
    if (node.fallback === undefined || !lastAttempt(input, err)) return { err }
    const fac = new AbortController()
    const limit = (it.ready.timeoutMs ?? 0) > 0 ? (it.ready.timeoutMs as number) : DefaultFallbackTimeout
    const t = setTimeout(() => fac.abort(new WeftAbort('timeout', `fallback timed out after ${formatMs(limit)}`)), limit)
    const fr = await settle(() => withContext(it.otel as OtelContext, async () => node.fallback?.(input, err, this.nodeContext(it, fac.signal))), fac.signal)
    clearTimeout(t)
    if (fr.err !== undefined || fr.abandoned) {
      this.log.warn("node fallback failed; the attempt's failure stands", { run: it.run, node: it.ready.node, error: errorMessage(fr.err ?? fac.signal.reason) })
      return { err }
    }
    const fres = fr.value
    if (fres !== undefined && fres !== null && (typeof fres !== 'object' || Array.isArray(fres))) return { err }
    it.fallback = true
    return { res: (fres as Result | undefined) ?? {} }
  }

  // attempt runs the node's own steps: schemas, validation,
  // should-execute, hooks and execution.
  private async attempt(it: Item, node: Node, input: Input, ctx: NodeContext): Promise<Result> {
    const r = it.ready
    checkSchema('input', r.inputSchema, input.state)
    if (node.validate !== undefined) {
      try {
        await node.validate(input)
      } catch (err) {
        throw validationError(err)
      }
    }
    if (node.shouldExecute !== undefined && !(await node.shouldExecute(input, ctx))) {
      it.skipped = true
      it.invoked.push({ filter: 'shouldExecute', action: 'skipped' })
      return {}
    }
    if (node.before !== undefined) await node.before(input, ctx)
    let out: unknown
    if (node.exec !== undefined) {
      const prep = node.prep !== undefined ? await node.prep(input, ctx) : input.state
      const x = await node.exec(prep, ctx)
      out = node.post !== undefined ? await node.post(input, prep, x, ctx) : { output: x }
    } else {
      out = await (node.execute as NodeFunc)(input, ctx)
    }
    const res = asResult(out)
    checkOutputs(r.outputs, res)
    checkSchema('output', r.outputSchema, res.output)
    if (node.after !== undefined) await node.after(input, res, ctx)
    return res
  }

  private invokedEvent(it: Item, res: Result | undefined, elapsed: number): WeftEvent {
    const r = it.ready
    const { output, updates, actions } = encodeResult(res)
    // The payload's fields set one by one (no spreads): this runs once per
    // work item, between two appends.
    return newEvent({
      runId: it.run,
      id: this.outcomeId(it, EventType.NodeInvoked),
      type: EventType.NodeInvoked,
      nodeId: r.node,
      attempt: r.attempt,
      queue: r.queue,
      data: encodeNodeInvoked({
        node: r.node,
        iteration: r.iteration,
        item: r.item ?? undefined,
        attempt: r.attempt,
        delivery: it.delivery,
        output,
        updates,
        actions,
        filters: it.invoked,
        durationMs: Math.trunc(elapsed),
        worker: this.opts.name,
        fallback: it.fallback,
      }),
    })
  }

  private failedEvent(it: Item, f: Failure, elapsed: number): WeftEvent {
    const r = it.ready
    return newEvent({
      runId: it.run,
      id: this.outcomeId(it, EventType.NodeFailed),
      type: EventType.NodeFailed,
      nodeId: r.node,
      attempt: r.attempt,
      queue: r.queue,
      data: encodeNodeFailed({ ...refOf(r), attempt: r.attempt, delivery: it.delivery, error: f, durationMs: Math.trunc(elapsed), worker: this.opts.name }),
    })
  }

  private cancelledEvent(it: Item, c: RunCancel): WeftEvent {
    const r = it.ready
    return newEvent({
      runId: it.run,
      id: this.outcomeId(it, EventType.NodeCancelled),
      type: EventType.NodeCancelled,
      nodeId: r.node,
      attempt: r.attempt,
      queue: r.queue,
      data: encodeNodeCancelled({ ...refOf(r), attempt: r.attempt, delivery: it.delivery, by: c.by, reason: c.reason }),
    })
  }

  // outcomeId is the id of an outcome of one delivery of a work item: a
  // retried append of it is de-duplicated; two deliveries of one attempt
  // write two outcomes, of which the fold takes the live delivery's.
  private outcomeId(it: Item, t: EventType): string {
    const r = it.ready
    return decisionId(it.run, t, refKey(r), String(r.attempt), String(it.delivery))
  }

  // finish appends a cancellation and acks.
  private async finish(it: Item, ev: WeftEvent): Promise<void> {
    try {
      await this.append(it, ev)
    } catch (err) {
      this.log.error('recording node cancelled; handing work back', { run: it.run, node: it.ready.node, error: errorMessage(err) })
      nak(it.msg, 0, this.log)
      return
    }
    this.counters.cancelled++
    this.log.info('node cancelled', { run: it.run, node: it.ready.node, attempt: it.ready.attempt })
    await this.ack(it)
  }

  // append appends an outcome with the item's trace context, and records
  // the attempt's end on its span.
  private async append(it: Item, ev: WeftEvent): Promise<void> {
    // Before the node's span starts (work of an ended run) there is no
    // context to carry, as in Go.
    if (it.otel !== undefined) inject(it.otel, ev)
    if (it.span !== undefined && ev.type === EventType.NodeFailed) {
      const f = JSON.parse(ev.data) as { error?: Failure }
      failSpan(it.span, f.error?.type ?? '', f.error?.message ?? '')
    }
    await this.appendEvent(ev)
  }

  private appendEvent(ev: WeftEvent): Promise<number> {
    return (this.store as Store).append(ev.runId, AnySeq, ev)
  }

  // ack acknowledges a work item whose outcome is in the log. A lost ack
  // means the item is delivered again, runs again under the same
  // idempotency key, and its outcome is de-duplicated by its id.
  private async ack(it: Item): Promise<void> {
    try {
      await (this.store as Store).doubleAck(it.msg as unknown as { didAck: boolean; reply: string }, 5_000)
    } catch (err) {
      this.log.warn('acknowledging work item', { run: it.run, node: it.ready.node, error: errorMessage(err) })
    }
  }
}

/** queueConsumer is the durable consumer the workers of a queue share. */
export function queueConsumer(queue: string): string {
  return `work-${queue}`
}

interface ConsumerInfoLite {
  config: { ack_policy?: string; ack_wait?: number; filter_subject?: string; filter_subjects?: string[] }
}

/**
 * ensureQueue returns the consumer of a task queue, creating it when it is
 * missing as the Go engine does (internal/workqueue): delivering from the
 * stream's next sequence, explicit acks, AckWait 30 s, 1000 pending, no
 * delivery limit. An existing consumer is used as it is.
 */
export async function ensureQueue(store: Store, queue: string, ackWait: number): Promise<ConsumerInfoLite> {
  if (!validToken(queue)) throw new Error(`queue ${JSON.stringify(queue)}: invalid id (letters, digits, '-' and '_')`)
  const name = queueConsumer(queue)
  const api = async (subject: string, body: unknown) => {
    const m = await store.nc.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 10_000 })
    return JSON.parse(new TextDecoder().decode(m.data)) as ConsumerInfoLite & { error?: { code: number; err_code?: number; description: string } }
  }
  let info = await api(`$JS.API.CONSUMER.INFO.${store.stream}.${name}`, {})
  if (info.error !== undefined && info.error.err_code !== 10014) throw new Error(`looking up consumer of queue ${JSON.stringify(queue)}: ${info.error.description}`)
  if (info.error !== undefined) {
    const s = await api(`$JS.API.STREAM.INFO.${store.stream}`, {})
    const last = (s as unknown as { state?: { last_seq?: number } }).state?.last_seq ?? 0
    const config = {
      durable_name: name,
      description: `Weft task queue ${queue}`,
      filter_subject: queueFilter(queue),
      deliver_policy: 'by_start_sequence',
      opt_start_seq: last + 1,
      ack_policy: 'explicit',
      ack_wait: (ackWait > 0 ? ackWait : DefaultAckWait) * 1_000_000,
      max_ack_pending: 1000,
      max_deliver: -1,
      replay_policy: 'instant',
    }
    info = await api(`$JS.API.CONSUMER.CREATE.${store.stream}.${name}.${queueFilter(queue)}`, { stream_name: store.stream, config, action: 'create' })
    if (info.error !== undefined) {
      // Another process created it meanwhile.
      const again = await api(`$JS.API.CONSUMER.INFO.${store.stream}.${name}`, {})
      if (again.error !== undefined) throw new Error(`creating consumer of queue ${JSON.stringify(queue)}: ${info.error.description}`)
      info = again
    }
  }
  if (info.config.ack_policy !== 'explicit') {
    throw new Error(`consumer ${name} of stream ${store.stream}: ack_policy is ${info.config.ack_policy ?? '?'}, want explicit (delete it when its queue is idle, and a worker creates it again)`)
  }
  return info
}

function decodeWorkItemBody(m: JsMsg, headers: HeaderReader, data: Uint8Array): { ev: WeftEvent; ready: NodeReadyData } {
  const { event: ev, payload } = decodeWithPayload(m.subject, headers, data)
  if (ev.type !== EventType.NodeReady) throw new Error(`${m.subject}: a ${ev.type} event on a task queue`)
  if (payload === null || typeof payload !== 'object') throw new Error(`${m.subject}: node-ready event without a payload`)
  const ready = payload as NodeReadyData
  const problems: string[] = []
  const str = (k: keyof NodeReadyData, required = false) => {
    const v = ready[k]
    if (v === undefined || v === null) {
      if (required) problems.push(`no ${k}`)
    } else if (typeof v !== 'string') problems.push(`${k}: not a string`)
  }
  const int = (k: keyof NodeReadyData) => {
    const v = ready[k]
    if (v !== undefined && v !== null && !Number.isInteger(v)) problems.push(`${k}: not an integer`)
  }
  str('node', true)
  str('type', true)
  str('queue')
  str('idempotencyKey')
  str('effect')
  for (const k of ['iteration', 'attempt', 'item', 'timeoutMs', 'heartbeatMs', 'maxAttempts'] as const) int(k)
  if (ready.outputs !== undefined && ready.outputs !== null && (!Array.isArray(ready.outputs) || ready.outputs.some((o) => typeof o !== 'string'))) {
    problems.push('outputs: not a list of strings')
  }
  if (problems.length > 0 || ready.node === '' || ready.type === '') {
    throw new Error(`${m.subject}: node-ready event ${problems.length > 0 ? problems.join(', ') : 'without node or type'}`)
  }
  ready.iteration ??= 0
  ready.attempt ??= 0
  return { ev, ready }
}

// newerWorkItem is the type of a work item that did not decode because it
// is a node-ready of a newer version than this worker's
// ("dev.weft.node.ready.v<N>", N above 1): not malformed, only not for it.
function newerWorkItem(m: JsMsg, err: unknown): string | undefined {
  if (!isWeftError(err, 'UnknownType')) return undefined
  const t = m.headers?.get('ce-type') ?? ''
  const v = /^dev\.weft\.node\.ready\.v([+-]?[0-9]+)$/.exec(t)
  return v !== null && Number(v[1]) > 1 ? t : undefined
}

// encodeResult writes a node's result as the invoked event's fields: its
// output and each update and action's data as JSON text, in Go's bytes; a
// value that is not JSON is a non-retryable ValidationError naming where.
function encodeResult(res: Result | undefined): { output: string | undefined; updates: [string, string][]; actions: ActionOut[] } {
  const invalid = (what: string, err: unknown) => nonRetryable(FailureType.Validation, `encoding the node's ${what}: ${errorMessage(err)}`)
  let output: string | undefined
  const updates: [string, string][] = []
  const actions: ActionOut[] = []
  if (res === undefined) return { output, updates, actions }
  if (res.output !== undefined) {
    try {
      output = marshal(res.output, 'output')
    } catch (err) {
      throw invalid('output', err)
    }
  }
  if (res.updates !== undefined && res.updates !== null) {
    if (typeof res.updates !== 'object' || Array.isArray(res.updates)) throw nonRetryable(FailureType.Validation, "encoding the node's updates: not an object of state keys")
    for (const [k, v] of Object.entries(res.updates)) {
      if (v === undefined) continue
      try {
        updates.push([k, marshal(v, `updates[${JSON.stringify(k)}]`)])
      } catch (err) {
        throw invalid(`update ${JSON.stringify(k)}`, err)
      }
    }
  }
  const list = res.actions ?? []
  for (let i = 0; i < list.length; i++) {
    const a = list[i]
    const name = typeof a === 'string' ? a : a?.name
    if (typeof name !== 'string' || name === '') throw nonRetryable(FailureType.Validation, `action ${i} has no name`)
    const out: ActionOut = { name }
    if (typeof a === 'object' && a.data !== undefined) {
      try {
        out.data = marshal(a.data, `actions[${i}].data`)
      } catch (err) {
        throw invalid(`action ${JSON.stringify(name)} data`, err)
      }
    }
    actions.push(out)
  }
  return { output, updates, actions }
}

function refOf(r: NodeReadyData): NodeRef {
  return r.item !== undefined && r.item !== null ? { node: r.node, iteration: r.iteration, item: r.item } : { node: r.node, iteration: r.iteration }
}

function nak(m: JsMsg, delay: number, log: Logger): void {
  try {
    if (delay > 0) m.nak(delay)
    else m.nak()
  } catch (err) {
    log.warn('handing work back', { subject: m.subject, error: errorMessage(err) })
  }
}

/**
 * settle runs fn and waits for it to settle; once the signal aborts, it
 * waits at most grace more before it gives up on fn (abandoned): a node that
 * never settles does not hold its work item, or its slot, forever.
 */
async function settle<T>(fn: () => Promise<T>, signal: AbortSignal, grace = abandonGrace): Promise<{ value?: T; err?: unknown; abandoned?: boolean }> {
  const run = (async () => fn())().then(
    (value) => ({ value }),
    (err: unknown) => ({ err: err === undefined ? new Error('undefined was thrown') : err }),
  )
  let timer: NodeJS.Timeout | undefined
  let onAbort: (() => void) | undefined
  const abandoned = new Promise<{ abandoned: true }>((resolve) => {
    onAbort = () => {
      timer = setTimeout(() => resolve({ abandoned: true }), grace)
    }
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([run, abandoned])
  } finally {
    clearTimeout(timer)
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
  }
}

function asResult(out: unknown): Result {
  if (out === undefined || out === null) return {}
  if (typeof out !== 'object' || Array.isArray(out)) {
    let shown: string
    try {
      shown = typeof out === 'bigint' ? `${out}n` : (JSON.stringify(out) ?? String(out))
    } catch {
      shown = String(out)
    }
    throw nonRetryable(FailureType.Validation, `the node returned ${clip(shown, 80)}, not a result ({output, updates, actions})`)
  }
  const extra = Object.keys(out).filter((k) => k !== 'output' && k !== 'updates' && k !== 'actions')
  if (extra.length > 0) {
    throw nonRetryable(FailureType.Validation, `the node's result has ${extra.map((k) => JSON.stringify(k)).join(', ')}: a result has output, updates and actions only (return {output: …} for an output)`)
  }
  return out as Result
}

function validationError(err: unknown): NodeError {
  if (err instanceof NodeError) {
    return new NodeError(FailureType.Validation, `invalid input: ${err.message}`, { details: err.details, cause: err.cause })
  }
  return new NodeError(FailureType.Validation, `invalid input: ${errorMessage(err)}`)
}

function checkOutputs(outputs: string[] | undefined, res: Result): void {
  if (outputs === undefined || outputs.length === 0 || res.updates === undefined || res.updates === null) return
  const bad = Object.keys(res.updates)
    .filter((k) => !outputs.includes(k))
    .sort()
  if (bad.length === 0) return
  throw new NodeError(FailureType.Validation, `updates state keys the node does not declare as outputs: ${bad.join(', ')} (outputs: ${outputs.join(', ')})`, {
    details: { undeclared: bad, outputs },
  })
}

function lastAttempt(input: Input, err: unknown): boolean {
  const f = failureOf(err)
  return !f.retryable || (input.maxAttempts > 0 && input.attempt >= input.maxAttempts)
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, n) + '…'
}

function validateOptions(o: WorkerOptions & { queues: string[]; concurrency: number; name: string; drainTimeout: number }): string[] {
  const p: string[] = []
  if (o.queues.length === 0) p.push('no queues')
  const seen = new Set<string>()
  for (const q of o.queues) {
    if (!validToken(q)) p.push(`queue ${JSON.stringify(q)}: invalid id (letters, digits, '-' and '_')`)
    else if (seen.has(q)) p.push(`queue ${JSON.stringify(q)} listed twice`)
    seen.add(q)
  }
  if (!Number.isInteger(o.concurrency) || o.concurrency < 1) p.push(`concurrency: want at least 1, got ${o.concurrency}`)
  if (o.name === '') p.push('name: must not be empty')
  if (o.ackWait !== undefined && o.ackWait !== 0 && o.ackWait < 1000) p.push(`ack wait: want at least 1s, got ${o.ackWait}ms`)
  if (o.heartbeat !== undefined && o.heartbeat < 0) p.push(`heartbeat: want a positive duration, got ${o.heartbeat}ms`)
  if (o.ackWait !== undefined && o.ackWait !== 0 && o.heartbeat !== undefined && o.heartbeat >= o.ackWait) p.push(`heartbeat ${o.heartbeat}ms must be shorter than ack wait ${o.ackWait}ms`)
  for (const [q, n] of Object.entries(o.queueConcurrency ?? {})) {
    if (!o.queues.includes(q)) p.push(`queue concurrency: ${JSON.stringify(q)} is not one of the worker's queues`)
    if (!Number.isInteger(n) || n < 1) p.push(`queue ${JSON.stringify(q)} concurrency: want at least 1, got ${n}`)
  }
  if (o.drainTimeout < 0) p.push(`drain timeout: want a positive duration, got ${o.drainTimeout}ms`)
  return p
}
