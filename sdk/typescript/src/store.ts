// The JetStream event store, as clients and workers use it (Go: pkg/events
// store.go, lastget.go): appends with de-duplication by event id and a
// duplicate acknowledgement confirmed against the stored message, reads by
// subject (direct gets whose request subject names the subject, so that
// NATS permissions can scope them), reads of a run's history, and the
// count of a run's ends.

import { ContentRef, loadKeys, useKeys } from './events/seal.js'
import { createInbox, MsgHdrsImpl, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/nats-core'
import type { Connection } from './connect.js'
import { decode, encode, HdrMsgID, type HeaderReader, type WeftEvent, type Wire, wireSize } from './events/envelope.js'
import { WeftError } from './events/errors.js'
import { DefaultOffloadAt, isRef, offload, resolveRef } from './events/offload.js'
import { randomId } from './events/ids.js'
import { DefaultStream, EventType, isWorkerSubject, runBase, runFilter, terminalSubjects, validToken } from './events/subjects.js'
import { Replies } from './internal/replies.js'
import { type Logger, sleep } from './internal/util.js'

/** AnySeq, as the expected last sequence of an append, skips the optimistic concurrency check. */
export const AnySeq = -1

/** RawMsg is a message as stored. */
export interface RawMsg {
  subject: string
  seq: number
  headers: HeaderReader
  data: Uint8Array
  time: Date
}

/** headerReader adapts NATS headers (or none). */
export function headerReader(h: MsgHdrs | undefined): HeaderReader {
  if (h === undefined) return { keys: () => [], get: () => '' }
  return { keys: () => h.keys(), get: (k: string) => h.get(k) }
}

const enc = new TextEncoder()
const dec = new TextDecoder()

interface ApiError {
  code: number
  err_code?: number
  description: string
}

/** StoreOptions configure Store.open. */
export interface StoreOptions {
  /** stream is the events stream's name (default WEFT_STREAM, else "WEFT"). */
  stream?: string
  /** signal ends the wait for a missing stream. */
  signal?: AbortSignal
  log?: Logger
  /**
   * encryptKeys is a key ring file: events' data is sealed with its first
   * key and opened with any (docs/worker-protocol.md, "Sealed events").
   * Without it, the ring in WEFT_ENCRYPT_KEYS, if set. Process-wide (useKeys).
   */
  encryptKeys?: string
  /**
   * offloadAt is the body size (bytes) above which an event's body is kept
   * in the payloads bucket beside the log and the event carries a
   * reference (docs/worker-protocol.md, "Large bodies beside the log");
   * default DefaultOffloadAt (256 KiB), as Go's; 0 or less keeps every
   * body in the log, and an event that does not fit in a message is
   * refused (PayloadTooLarge).
   */
  offloadAt?: number
}

/**
 * Store is the events stream, as clients and workers see it. It never
 * creates or changes the stream: that is the coordinator's or the admin's
 * (weft roles -setup); open waits for it.
 */
export class Store {
  private replyMux: Replies | undefined

  private constructor(
    readonly conn: Connection,
    readonly stream: string,
    readonly replicas: number,
    readonly offloadAt: number,
  ) {}

  get nc(): NatsConnection {
    return this.conn.nc
  }

  // replies is the request mux of appends and double acks (made at the first).
  private get replies(): Replies {
    this.replyMux ??= new Replies(this.nc, this.conn.inboxPrefix)
    return this.replyMux
  }

  /**
   * doubleAck acknowledges a JetStream message and waits for the server to
   * confirm it (nats.js's ackAck, through the store's request mux); a
   * message acknowledged before is left as it is.
   */
  async doubleAck(m: { didAck: boolean; reply: string }, timeout: number): Promise<void> {
    if (m.didAck) return
    m.didAck = true
    if (m.reply === '') return
    await this.replies.request(m.reply, ackBody, timeout)
  }

  /** open looks the events stream up, waiting (with back-off) while it is missing or NATS is away. */
  static async open(conn: Connection, o: StoreOptions = {}): Promise<Store> {
    const stream = o.stream ?? (process.env['WEFT_STREAM'] || DefaultStream)
    const ring = loadKeys(o.encryptKeys)
    if (ring !== undefined) useKeys(ring)
    if (!validToken(stream)) throw new WeftError('InvalidID', `invalid id: stream ${JSON.stringify(stream)}`)
    let wait = 100
    let logged = false
    for (;;) {
      try {
        const info = (await request(conn.nc, `$JS.API.STREAM.INFO.${stream}`, enc.encode('{}'), 5000)) as { config?: { num_replicas?: number }; error?: ApiError }
        if (info.error === undefined) return new Store(conn, stream, Math.max(info.config?.num_replicas ?? 1, 1), o.offloadAt ?? DefaultOffloadAt)
        if (info.error.code !== 404) throw new Error(`looking up stream ${stream}: ${info.error.description} (code ${info.error.err_code ?? info.error.code})`)
        if (!logged) o.log?.warn(`waiting for the events stream ${stream} (a coordinator or 'weft roles -setup' creates it)`)
      } catch (err) {
        if (isPermission(err)) throw err
        if (!logged) o.log?.warn(`waiting for the events stream ${stream}: ${(err as Error).message}`)
      }
      logged = true
      if (o.signal?.aborted) throw o.signal.reason
      await sleep(wait, o.signal)
      wait = Math.min(wait * 2, 5000)
    }
  }

  /** maxEventSize is the largest encoded event the server takes. */
  get maxEventSize(): number {
    return this.nc.info?.max_payload ?? 1024 * 1024
  }

  /**
   * append appends events of one run, each as a single publish with its
   * id as Nats-Msg-Id; expectLast (a sequence, 0 for "no events yet") is
   * checked over the run's subjects for a run-started, AnySeq skips it.
   * A duplicate acknowledgement is confirmed against the stored message;
   * an id someone else took is written under a fresh one (set on the event).
   * It returns the sequence of the last event.
   */
  async append(runId: string, expectLast: number, ...evs: WeftEvent[]): Promise<number> {
    if (!validToken(runId)) throw new WeftError('InvalidID', `invalid id: run id ${JSON.stringify(runId)}`)
    let last = expectLast
    for (const e of evs) {
      if (e.runId !== runId) throw new WeftError('MalformedEvent', `malformed event: appending an event of run ${JSON.stringify(e.runId)} to run ${JSON.stringify(runId)}`)
      const x = this.wire(e)
      const w = x instanceof Promise ? await x : x
      if (expectLast !== AnySeq) {
        w.headers.push(['Nats-Expected-Last-Subject-Sequence', String(expectLast)])
        w.headers.push(['Nats-Expected-Last-Subject-Sequence-Subject', e.type === EventType.RunStarted ? runFilter(runId) : runBase(runId) + 'd.>'])
      }
      let seq: number
      try {
        seq = await this.publishOne(w)
      } catch (err) {
        if (err instanceof WeftError && err.code === 'Conflict' && e.type === EventType.RunStarted && expectLast === 0) {
          // Starting the same run again (a retried request, the very same
          // event) succeeds with the recorded start; any other start of a
          // run that has events is RunExists.
          return this.sameStart(e, w)
        }
        if (!(err instanceof WeftError && err.code === 'DuplicateMismatch')) throw err
        // Someone took the id first: write the event under a fresh one.
        const id = e.id + '~' + randomId()
        for (const h of w.headers) if (h[0] === HdrMsgID || h[0] === 'ce-id') h[1] = id
        e.id = id
        seq = await this.publishOne(w)
      }
      last = seq
      if (expectLast !== AnySeq) expectLast = seq
    }
    return last
  }

  private async sameStart(e: WeftEvent, w: Wire): Promise<number> {
    const m = await this.leaderGet({ last_by_subj: w.subject }).catch(() => undefined)
    if (m !== undefined) {
      try {
        const got = decode(m.subject, m.headers, m.data)
        if (got.id === e.id && bytesEqual(m.data, w.data)) return m.seq
      } catch {
        // not a valid start: someone else's
      }
    }
    throw new WeftError('RunExists', `run already exists: ${e.runId}`)
  }

  /**
   * wire encodes an event, with its body kept beside the log when it is
   * over offloadAt (offload.ts), and checks it fits in one message. It
   * returns the message itself when nothing is to be kept beside the log
   * (the worker's hot path publishes in the same turn of the event loop).
   */
  wire(e: WeftEvent): Wire | Promise<Wire> {
    const w = encode(e)
    if (this.offloadAt > 0 && w.data.length > this.offloadAt) return this.offloaded(e, w)
    return this.fits(e, w)
  }

  private async offloaded(e: WeftEvent, w: Wire): Promise<Wire> {
    const ct = w.headers.find((h) => h[0] === 'content-type')
    w.data = await offload(this.nc, e, w.data, ct?.[1] ?? '')
    if (ct !== undefined) ct[1] = ContentRef
    return this.fits(e, w)
  }

  private fits(e: WeftEvent, w: Wire): Wire {
    const size = wireSize(w)
    const max = this.maxEventSize - 512
    if (size > max) {
      throw new WeftError('PayloadTooLarge', `event too large for one message: ${e.type} event for node ${JSON.stringify(e.nodeId)} is ${size} bytes, the limit is ${max}`)
    }
    return w
  }

  private async publishOne(w: Wire): Promise<number> {
    const h = wireHeaders(w)
    let ack: { stream?: string; seq?: number; duplicate?: boolean; error?: ApiError }
    for (let attempt = 0; ; attempt++) {
      try {
        ack = parseReply(w.subject, await this.replies.request(w.subject, w.data, 10_000, h)) as typeof ack
        break
      } catch (err) {
        // No responders: the stream's leader is being elected, or NATS is
        // reconnecting; a retried publish is de-duplicated by its id.
        if (attempt >= 20 || !isNoResponders(err)) throw new Error(`appending event: ${(err as Error).message}`, { cause: err })
        await sleep(Math.min(50 * (attempt + 1), 1000))
      }
    }
    if (ack.error !== undefined) {
      const code = ack.error.err_code ?? 0
      if (code === 10071 || code === 10164 || code === 10158) throw new WeftError('Conflict', `run log changed (optimistic concurrency conflict): ${ack.error.description}`)
      throw new Error(`appending event: ${ack.error.description} (code ${code || ack.error.code})`)
    }
    const seq = ack.seq ?? 0
    if (ack.duplicate === true) await this.confirmDuplicate(w, seq)
    return seq
  }

  // confirmDuplicate checks that the message JetStream kept under the id
  // is this event: on a worker's own subject by the last message there
  // (the worker's role may read only that), elsewhere by its sequence
  // from the stream leader.
  private async confirmDuplicate(w: Wire, seq: number): Promise<void> {
    const id = w.headers.find((h) => h[0] === HdrMsgID)?.[1] ?? ''
    const type = w.headers.find((h) => h[0] === 'ce-type')?.[1] ?? ''
    const time = w.headers.find((h) => h[0] === 'ce-time')?.[1] ?? ''
    const checked = w.headers.some((h) => h[0] === 'Nats-Expected-Last-Subject-Sequence')
    const mismatch = (why: string) => new WeftError('DuplicateMismatch', `another message holds the event's id: id ${JSON.stringify(id)} at sequence ${seq}${why}`)
    if (isWorkerSubject(w.subject)) {
      for (let tries = 0; ; tries++) {
        const got = await this.lastOn(w.subject)
        if (got !== undefined && got.seq === seq) {
          if (got.headers.get('ce-type') !== type || got.headers.get(HdrMsgID) !== id || !bytesEqual(got.data, w.data)) throw mismatch('')
          return
        }
        if (got !== undefined && got.seq > seq) throw mismatch(`, which is no longer the last on ${w.subject} (cannot be read back)`)
        if (this.replicas <= 1 || tries >= 3) throw mismatch(`, not on ${w.subject}`)
        await sleep((tries + 1) * 5)
      }
    }
    const got = await this.leaderGet({ seq })
    if (got === undefined || got.subject !== w.subject || got.headers.get('ce-type') !== type || !bytesEqual(got.data, w.data)) throw mismatch('')
    if (got.headers.get('ce-time') !== time && checked) {
      throw new WeftError('Conflict', `run log changed (optimistic concurrency conflict): ${id} was written at sequence ${seq} by another decision`)
    }
  }

  /** lastOn is the last message stored on a literal subject, by a direct get that names it. */
  async lastOn(subject: string): Promise<RawMsg | undefined> {
    if (subject === '' || /[*> \t]/.test(subject)) throw new WeftError('InvalidID', `invalid id: ${JSON.stringify(subject)} is not a literal subject`)
    let m: Msg
    try {
      m = await this.nc.request(`$JS.API.DIRECT.GET.${this.stream}.${subject}`, new Uint8Array(0), { timeout: 5000 })
    } catch (err) {
      throw new Error(`reading the last message on ${subject}: ${(err as Error).message}`, { cause: err })
    }
    const code = m.headers?.code ?? 0
    if (code === 404) return undefined
    if (code !== 0 && code !== 200) throw new Error(`reading the last message on ${subject}: status ${code} ${m.headers?.description ?? ''}`)
    return this.resolved(directMsg(m))
  }

  /**
   * resolved is m with a body kept beside the log (its body a reference
   * to the payloads bucket) read back in place of the reference.
   */
  async resolved(m: RawMsg): Promise<RawMsg> {
    if (!isRef(m.headers)) return m
    const r = await resolveRef(this.nc, m.subject, m.headers, m.data)
    return { ...m, headers: r.headers, data: r.data }
  }

  /** leaderGet is a get served by the stream leader; undefined when there is no such message. */
  async leaderGet(req: Record<string, unknown>): Promise<RawMsg | undefined> {
    const r = (await request(this.nc, `$JS.API.STREAM.MSG.GET.${this.stream}`, enc.encode(JSON.stringify(req)), 5000)) as {
      message?: { subject: string; seq: number; hdrs?: string; data?: string; time: string }
      error?: ApiError
    }
    if (r.error !== undefined) {
      if (r.error.code === 404) return undefined
      throw new Error(`${r.error.description} (code ${r.error.err_code ?? r.error.code})`)
    }
    if (r.message === undefined) return undefined
    const hdrs = r.message.hdrs !== undefined && r.message.hdrs !== '' ? MsgHdrsImpl.decode(Buffer.from(r.message.hdrs, 'base64')) : undefined
    return {
      subject: r.message.subject,
      seq: r.message.seq,
      headers: headerReader(hdrs),
      data: r.message.data !== undefined ? Buffer.from(r.message.data, 'base64') : new Uint8Array(0),
      time: new Date(r.message.time),
    }
  }

  /** lastSeq is the sequence of a run's last event (RunNotFound when it has none). */
  async lastSeq(runId: string): Promise<number> {
    const m = await this.leaderGet({ last_by_subj: runFilter(runId) })
    if (m === undefined) throw new WeftError('RunNotFound', `run not found: ${runId}`)
    return m.seq
  }

  /** hasEnd reports whether one of a run's terminal subjects holds a message (counted, not read). */
  async hasEnd(runId: string): Promise<boolean> {
    if (!validToken(runId)) throw new WeftError('InvalidID', `invalid id: run id ${JSON.stringify(runId)}`)
    const r = (await request(this.nc, `$JS.API.STREAM.INFO.${this.stream}`, enc.encode(JSON.stringify({ subjects_filter: runBase(runId) + 'd.*' })), 5000)) as {
      state?: { subjects?: Record<string, number> }
      error?: ApiError
    }
    if (r.error !== undefined) throw new Error(`counting the ends of run ${runId}: ${r.error.description} (code ${r.error.code})`)
    const subjects = r.state?.subjects ?? {}
    return terminalSubjects(runId).some((s) => (subjects[s] ?? 0) > 0)
  }

  /**
   * read returns a run's events with sequence ≥ from, in log order, by
   * batched direct gets. Messages that are not valid events come back with
   * refused set, in their place. A run with no events is RunNotFound.
   */
  async read(runId: string, from = 1): Promise<WeftEvent[]> {
    if (!validToken(runId)) throw new WeftError('InvalidID', `invalid id: run id ${JSON.stringify(runId)}`)
    const out: WeftEvent[] = []
    const filter = runFilter(runId)
    // On a replicated stream a replica that is behind may answer: read at
    // least as far as the leader says the run goes.
    const through = this.replicas > 1 && from <= 1 ? await this.lastSeq(runId) : 0
    for (let tries = 0; ; ) {
      const { msgs, pending } = await this.readBatch(filter, from, 1000)
      for (const m of msgs) {
        let e: WeftEvent
        try {
          e = decodeStored(await this.resolved(m))
        } catch (err) {
          e = { ...decodeStored(m), refused: err as Error }
        }
        out.push(e)
        from = m.seq + 1
      }
      if (pending > 0 && msgs.length > 0) continue
      if (through === 0 || from > through) break
      if (++tries >= 5) throw new Error(`reading run ${runId}: the stream has it up to ${from - 1}, expected ${through}`)
      await sleep(tries * 10)
    }
    if (out.length === 0 && from <= 1) throw new WeftError('RunNotFound', `run not found: ${runId}`)
    return out
  }

  private readBatch(filter: string, from: number, batch: number): Promise<{ msgs: RawMsg[]; pending: number }> {
    const inbox = createInbox(this.conn.inboxPrefix)
    const msgs: RawMsg[] = []
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        sub.unsubscribe()
        reject(new Error(`reading ${filter}: timed out`))
      }, 30_000)
      const done = (err: Error | undefined, pending = 0) => {
        clearTimeout(timer)
        sub.unsubscribe()
        if (err !== undefined) reject(err)
        else resolve({ msgs, pending })
      }
      const sub = this.nc.subscribe(inbox, {
        callback: (err, m) => {
          if (err !== null) return done(err)
          const code = m.headers?.code ?? 0
          if (code === 0 || code === 200) {
            msgs.push(directMsg(m))
            return
          }
          if (code === 204) return done(undefined, Number(m.headers?.get('Nats-Num-Pending') ?? '0') || 0)
          if (code === 404 || code === 408) return done(undefined)
          if (code === 503) return done(new Error(`reading ${filter}: no responders`))
          done(new Error(`reading ${filter}: status ${code} ${m.headers?.description ?? ''}`))
        },
      })
      this.nc.publish(`$JS.API.DIRECT.GET.${this.stream}`, enc.encode(JSON.stringify({ seq: from, next_by_subj: filter, batch, max_bytes: 4 << 20 })), {
        reply: inbox,
      })
    })
  }
}

/** decodeStored reads a stored message as an event, never failing: a refused one keeps its place. */
export function decodeStored(m: RawMsg): WeftEvent {
  let e: WeftEvent
  try {
    e = decode(m.subject, m.headers, m.data)
  } catch (err) {
    const run = /^weft\.r\.[0-9a-f]{2}\.([^.]+)\./.exec(m.subject)?.[1] ?? ''
    e = {
      id: m.headers.get('ce-id'),
      type: m.headers.get('ce-type') as EventType,
      source: '',
      time: m.headers.get('ce-time'),
      runId: run,
      nodeId: m.headers.get('ce-nodeid'),
      attempt: 0,
      traceParent: '',
      traceState: '',
      data: dec.decode(m.data),
      queue: '',
      subject: m.subject,
      refused: err as Error,
    }
  }
  e.seq = m.seq
  e.stored = m.time
  return e
}

function directMsg(m: Msg): RawMsg {
  const h = m.headers
  return {
    subject: h?.get('Nats-Subject') ?? '',
    seq: Number(h?.get('Nats-Sequence') ?? '0'),
    headers: headerReader(h),
    data: m.data,
    time: new Date(h?.get('Nats-Time-Stamp') ?? 0),
  }
}

async function request(nc: NatsConnection, subject: string, data: Uint8Array, timeout: number, headers?: MsgHdrs): Promise<unknown> {
  return parseReply(subject, await nc.request(subject, data, headers !== undefined ? { timeout, headers } : { timeout }))
}

const ackBody = enc.encode('+ACK')

/**
 * wireHeaders are an event's headers as NATS headers, set as they are
 * written: names and values as encode wrote them (the client's set would
 * check each name's characters and trim each value, twice per work item
 * on the worker's path); a value with a line break is refused, since it
 * would end the header block.
 */
function wireHeaders(w: Wire): MsgHdrs {
  const h = new MsgHdrsImpl()
  for (const [k, v] of w.headers) {
    if (v.includes('\r') || v.includes('\n')) throw new WeftError('MalformedEvent', `malformed event: header ${k} of ${w.subject}: a value with a line break`)
    h.headers.set(k, [v])
  }
  return h
}

function parseReply(subject: string, m: Msg): unknown {
  if (m.data.length === 0) {
    const code = m.headers?.code ?? 0
    throw new Error(`${subject}: empty answer (status ${code} ${m.headers?.description ?? ''})`)
  }
  return JSON.parse(dec.decode(m.data))
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0
}

/** isNoResponders reports a request nobody answered. */
export function isNoResponders(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e.name === 'NoResponders' || /no responders/i.test(e.message)) return true
  }
  return false
}

/** isPermission reports an error NATS gave for a permissions violation. */
export function isPermission(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (/permission/i.test(e.name) || /permissions violation/i.test(e.message)) return true
  }
  return false
}
