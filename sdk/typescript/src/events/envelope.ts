// The one envelope every Weft event shares, and its wire form: CloudEvents
// 1.0 in binary content mode on NATS, the attributes as "ce-*" headers, the
// JSON payload as the body. encode writes exactly the headers the Go hot
// path writes (pkg/events codec.go, encodeFast); decode checks what Go's
// Decode checks: a valid CloudEvent of a known type, of the subject's run,
// on a subject that accepts its type, with a payload that decodes.

import { createHash } from 'node:crypto'
import { parse } from '../internal/gojson.js'
import { WeftError } from './errors.js'
import { ContentSealed, ExtKeyID, seal, unseal } from './seal.js'
import { acceptedOn, Class, EventType, type EventType as EventTypeT, knownType, parseSubject, runBase, Source, subjectFor } from './subjects.js'

/** Event is a Weft event: the CloudEvents attributes Weft uses, and the payload's JSON. */
export interface WeftEvent {
  id: string
  type: EventTypeT
  source: string
  /** time is the writer's time, as written (RFC 3339). */
  time: string
  runId: string
  nodeId: string
  attempt: number
  traceParent: string
  traceState: string
  /** data is the payload's JSON text. */
  data: string
  /** queue is the task queue of a work item or of the work item a worker's outcome answers. */
  queue: string
  /** seq is the stream sequence, for an event read from the store. */
  seq?: number
  /** stored is the stream's timestamp of the message, for an event read from the store. */
  stored?: Date
  /** subject is where the event was read from, or is written to. */
  subject?: string
  /** decision is set on an event read from a coordinator decision subject. */
  decision?: boolean
  /** refused is set on a stored message that is not a valid event (it keeps its place). */
  refused?: Error
}

// Header names, as the Go encoder writes them.
const hSpec = 'ce-specversion'
const hID = 'ce-id'
const hSource = 'ce-source'
const hType = 'ce-type'
const hTime = 'ce-time'
const hSubject = 'ce-subject'
const hRunID = 'ce-runid'
const hNodeID = 'ce-nodeid'
const hAttempt = 'ce-attempt'
const hTraceParent = 'ce-traceparent'
const hTraceState = 'ce-tracestate'
const hContentType = 'content-type'
const hKeyID = 'ce-' + ExtKeyID
export const HdrMsgID = 'Nats-Msg-Id'
export const HdrRestored = 'Weft-Restored'

/** formatTime writes a time as Go's time.RFC3339Nano in UTC: no trailing zeros in the fraction. */
export function formatTime(d: Date): string {
  const iso = d.toISOString() // 2006-01-02T15:04:05.000Z
  let end = 23 // the fraction's trailing zeros cut, and its dot with them
  while (end > 20 && iso.charCodeAt(end - 1) === 48) end--
  return iso.slice(0, end === 20 ? 19 : end) + 'Z'
}

/** NewEventFields are what newEvent needs besides the payload. */
export interface NewEvent {
  runId: string
  id: string
  type: EventTypeT
  /** data is the payload's JSON text (written by the payload encoders). */
  data: string
  nodeId?: string
  attempt?: number
  queue?: string
  time?: Date
}

/** newEvent builds an event (events.New). */
export function newEvent(f: NewEvent): WeftEvent {
  return {
    id: f.id,
    type: f.type,
    source: Source,
    time: formatTime(f.time ?? new Date()),
    runId: f.runId,
    nodeId: f.nodeId ?? '',
    attempt: f.attempt ?? 0,
    traceParent: '',
    traceState: '',
    data: f.data,
    queue: f.queue ?? '',
  }
}

/** Wire is an event as a NATS message: its subject, headers (in the order written) and body. */
export interface Wire {
  subject: string
  headers: [string, string][]
  data: Uint8Array
}

/** encode writes an event as the NATS message it is appended as. */
export function encode(e: WeftEvent): Wire {
  if (e.id === '') throw new WeftError('MalformedEvent', 'malformed event: id: REQUIRED')
  if (e.source === '') throw new WeftError('MalformedEvent', 'malformed event: source: REQUIRED')
  const h: [string, string][] = [
    [hSpec, '1.0'],
    [hID, e.id],
    [hSource, e.source],
    [hType, e.type],
    [hTime, e.time],
    [hContentType, 'application/json'],
    [hRunID, e.runId],
  ]
  if (e.nodeId !== '') {
    h.push([hSubject, e.nodeId], [hNodeID, e.nodeId])
  }
  if (e.attempt > 0) h.push([hAttempt, String(e.attempt)])
  if (e.traceParent !== '') {
    h.push([hTraceParent, e.traceParent], ['traceparent', e.traceParent])
    if (e.traceState !== '') h.push([hTraceState, e.traceState], ['tracestate', e.traceState])
  }
  h.push([HdrMsgID, e.id])
  const plain = Buffer.from(e.data, 'utf8')
  let data: Uint8Array = plain
  // With a key ring in use, the body is sealed (seal.ts).
  const sealed = plain.length > 0 ? seal(e.id, e.runId, e.type, plain) : undefined
  if (sealed !== undefined) {
    h[5] = [hContentType, ContentSealed]
    h.push([hKeyID, sealed.keyId])
    data = sealed.body
  }
  return { subject: e.subject ?? subjectFor(e.runId, e.type, e.queue), headers: h, data }
}

/** wireSize is the size the store checks against the server's limit. */
export function wireSize(w: Wire): number {
  let n = w.data.length + Buffer.byteLength(w.subject)
  for (const [k, v] of w.headers) n += Buffer.byteLength(k) + Buffer.byteLength(v) + 4
  return n
}

/** Headers is what decode needs of a message's headers. */
export interface HeaderReader {
  keys(): string[]
  get(k: string): string
}

function malformed(msg: string): WeftError {
  return new WeftError('MalformedEvent', `malformed event: ${msg}`)
}

const knownCE = new Set([hSpec, hID, hSource, hType, hTime, hSubject, hRunID, hNodeID, hAttempt, hTraceParent, hTraceState, hKeyID])

/**
 * decode reads an event from a NATS message's subject, headers and body,
 * with the checks of Go's events.Decode. Every failure is a WeftError
 * with code MalformedEvent, UnknownType or Misplaced.
 */
export function decode(subject: string, hdr: HeaderReader | undefined, data: Uint8Array): WeftEvent {
  return decodeWithPayload(subject, hdr, data).event
}

/**
 * decodeWithPayload is decode that also returns the payload it parsed to
 * check it, so that a caller that needs the payload does not parse the
 * JSON again (the worker, once per work item).
 */
export function decodeWithPayload(subject: string, hdr: HeaderReader | undefined, data: Uint8Array): { event: WeftEvent; payload: unknown } {
  if (hdr === undefined) throw malformed(`${subject}: not a CloudEvent in binary mode (no ${hSpec} header)`)
  const keys = hdr.keys()
  checkServerHeaders(subject, hdr, keys)
  // Attribute headers are matched without regard to case, as the
  // CloudEvents SDK's decoder (Go's path for such messages) does.
  const ce = new Map<string, string>()
  let contentType: string | undefined
  for (const k of keys) {
    const lk = k.toLowerCase()
    if (lk === hContentType) contentType ??= hdr.get(k)
    else if (lk.startsWith('ce-') && !ce.has(lk)) ce.set(lk, hdr.get(k))
  }
  const get = (k: string) => ce.get(k) ?? ''
  const spec = get(hSpec)
  if (spec === '') throw malformed(`${subject}: not a CloudEvent in binary mode (no ${hSpec} header)`)
  if (spec !== '1.0') throw malformed(`${subject}: specversion ${JSON.stringify(spec)} (want 1.0)`)
  for (const k of ce.keys()) {
    if (knownCE.has(k)) continue
    if (!/^ce-[a-z0-9]{1,20}$/.test(k)) throw malformed(`${subject}: extension ${JSON.stringify(k)}: not a valid CloudEvents name`)
  }
  if (contentType !== undefined && contentType !== 'application/json' && contentType !== ContentSealed && !contentType.startsWith('application/vnd.weft.')) {
    throw malformed(`${subject}: datacontenttype ${JSON.stringify(contentType)} (want application/json)`)
  }
  const body = unseal(subject, get(hRunID), get(hType), contentType, get(hKeyID), data)
  const e: WeftEvent = {
    id: get(hID),
    type: get(hType) as EventTypeT,
    source: get(hSource),
    time: get(hTime),
    runId: get(hRunID),
    nodeId: get(hNodeID),
    attempt: 0,
    traceParent: get(hTraceParent),
    traceState: get(hTraceState),
    data: body.toString('utf8'),
    queue: '',
  }
  if (e.id === '' || e.source === '' || (e.type as string) === '') throw malformed(`${subject}: id, source and type are required`)
  if (e.time !== '' && Number.isNaN(Date.parse(e.time))) throw malformed(`${subject}: time ${JSON.stringify(e.time)}: not RFC 3339`)
  if (e.runId === '') throw malformed(`${subject}: missing extension "runid"`)
  const a = get(hAttempt)
  if (a !== '') {
    if (!/^[+-]?[0-9]+$/.test(a) || Number(a) < 0 || Number(a) > 2147483647) throw malformed(`${subject}: extension "attempt": ${a}`)
    e.attempt = Number(a)
  }
  if (!knownType(e.type)) throw new WeftError('UnknownType', `unknown event type: ${subject}: ${JSON.stringify(e.type)}`)
  const p = parseSubject(subject)
  if (p === undefined) throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: not a run event subject`)
  if (p.run !== e.runId) throw malformed(`${subject}: runid ${JSON.stringify(e.runId)} does not match the subject`)
  if (!acceptedOn(e.type, p)) {
    throw new WeftError('Misplaced', `${subject}: event type not accepted on its subject: a ${e.type} event is not accepted on a "${p.cls}.${p.kind}" subject`)
  }
  e.decision = p.cls === 'd'
  e.queue = p.queue
  e.subject = subject
  let payload: unknown
  try {
    payload = JSON.parse(e.data)
  } catch (err) {
    throw malformed(`${subject}: ${e.type} data: ${(err as Error).message}`)
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    if (payload !== null) throw malformed(`${subject}: ${e.type} data: not a JSON object`)
  }
  if (e.type === EventType.NodeReady) {
    const q = (payload as { queue?: unknown } | null)?.queue
    if (q !== p.queue) throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a work item of queue ${JSON.stringify(q ?? '')}`)
  }
  if (e.type === EventType.RunStarted) {
    checkGraphDigest(subject, e.data, payload)
    // Only the engine starts child runs, continuations (continue-as-new)
    // and the runs of schedules and triggers, on the run's decision
    // subject: a start naming a parent (Go's ParentClaimError), a chain,
    // or a schedule or trigger (TriggerClaimError) anywhere else is
    // someone passing a run off as the engine's.
    const parent = (payload as { parent?: { runId?: unknown } } | null)?.parent
    const chain = (payload as { chain?: { previous?: unknown } } | null)?.chain
    const named = parent !== undefined && parent !== null
    const trigger = (payload as { trigger?: { kind?: unknown; name?: unknown } } | null)?.trigger
    const triggered = trigger !== undefined && trigger !== null
    if (named && p.cls !== Class.Coordinator) {
      throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a run-started naming parent run ${String(parent.runId ?? '')} is not the coordinator's; only a run's coordinator starts its child runs`)
    }
    if (triggered && p.cls !== Class.Coordinator) {
      throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a run-started naming ${String(trigger.kind ?? '')} ${JSON.stringify(String(trigger.name ?? ''))} is not the coordinator's; only the engine starts the runs of schedules and triggers`)
    }
    const chained = chain !== undefined && chain !== null
    if (chained && p.cls !== Class.Coordinator) {
      throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a client's run-started names a chain (continuation of run ${String(chain.previous ?? '')}): only the engine continues a run as new`)
    }
    if (!named && !triggered && !chained && p.cls === Class.Coordinator) {
      throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a run-started on a decision subject is the engine's: it must name its parent run, its chain (a continuation), or the schedule or trigger that started it`)
    }
    if (named && triggered) {
      throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a run-started names both a parent run and a ${String(trigger.kind ?? '')}`)
    }
  }
  return { event: e, payload }
}

// checkGraphDigest refuses a run-started whose graphDigest is not the
// digest of its graph's text (Go's GraphDigestError): readers keep graphs
// by digest, so a start naming another graph's digest must not be
// believed. The digest is over the graph member's text as written, as Go
// reads it into a json.RawMessage.
function checkGraphDigest(subject: string, data: string, payload: unknown): void {
  const claimed = (payload as { graphDigest?: unknown } | null)?.graphDigest
  if (typeof claimed !== 'string' || claimed === '') return
  const spans: [string, number, number][] = []
  try {
    parse(data, spans)
  } catch (err) {
    throw malformed(`${subject}: ${EventType.RunStarted} data: ${(err as Error).message}`)
  }
  let graph = ''
  for (const [k, from, to] of spans) if (k === 'graph') graph = data.slice(from, to)
  const actual = graphDigest(graph)
  if (actual !== claimed) {
    throw malformed(`${subject}: graph digest mismatch: the run-started claims graphDigest ${JSON.stringify(claimed)}, its graph's digest is ${actual}`)
  }
}

/** graphDigest is the digest a run-started records for a graph's canonical JSON ("sha256:<hex>"). */
export function graphDigest(canonical: string): string {
  return 'sha256:' + createHash('sha256').update(canonical, 'utf8').digest('hex')
}

// checkServerHeaders refuses messages the server wrote or will remove on a
// writer's behalf (see Go's checkServerHeaders).
function checkServerHeaders(subject: string, hdr: HeaderReader, keys: string[]): void {
  const get = (k: string) => (keys.includes(k) ? hdr.get(k) : '')
  if (get('Nats-TTL') !== '') throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: an event with a Nats-TTL header`)
  if (get('Nats-Schedule') !== '') throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: a schedule, not an event`)
  const by = get('Nats-Scheduler')
  if (by === '') return
  const p = parseSubject(subject)
  const ok = p !== undefined && p.cls === 'n' && p.kind === 'timer' && by.startsWith(`weft.t.s.${runBase(p.run).slice('weft.r.'.length)}`)
  if (!ok) throw new WeftError('Misplaced', `event type not accepted on its subject: ${subject}: written by the schedule ${by}, which is not one of the run's timers`)
}

/** payloadOf parses an event's payload JSON. */
export function payloadOf<T>(e: WeftEvent): T {
  return JSON.parse(e.data) as T
}
