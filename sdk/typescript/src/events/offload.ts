// Large payloads beside the log, as docs/worker-protocol.md ("Large
// payloads") and Go's internal/eventlog/offload.go define them. An event
// whose body is over the engine's threshold (256 KiB by default) is
// stored with a reference as its body (content type ContentRef) and its
// body, sealed or plain, in the Object Store bucket weft-payloads, named
// "<run>.<sha256 of the body>". resolveRef reads the body back as Go does:
// direct gets only (the last message on the object's meta subject, then
// its chunks by subject; the roles grant readers no consumer), the size
// and digest checked over the whole body. The body then decodes as if it
// had been written whole (a sealed one is opened as any sealed event).
//
// A reference that does not decode, names another bucket, another run's
// object or a reference, or whose object is missing or not the digest,
// is a WeftError MalformedEvent (never read as data); one over
// MaxPayloadObject is PayloadTooLarge; a read that times out or finds no
// server is Unresolvable (it may be read later).
//
// offload writes a body as Go's writer does (nats.go's Object Store put,
// which Go's offload calls): the object named "<run>.<sha256 hex>", its
// body in chunks of 128 KiB published to "$O.weft-payloads.C.<nuid>", then
// its meta, the ObjectInfo JSON Go writes, published to
// "$O.weft-payloads.M.<name in padded base64url>" with "Nats-Rollup: sub".
// Like Go it writes nothing when the object is there already (the same
// name is the same bytes: a retried append). Every publish is a JetStream
// publish, acknowledged; a writer needs the role's publish rights on those
// subjects and the direct gets of the reads, no consumer and no purge.

import { createHash } from 'node:crypto'
import { headers as natsHeaders, nuid, type Msg, type NatsConnection } from '@nats-io/nats-core'
import type { HeaderReader } from './envelope.js'
import { WeftError } from './errors.js'
import { ContentRef } from './seal.js'

/** PayloadsBucket is the Object Store bucket of large payloads. */
export const PayloadsBucket = 'weft-payloads'
/** DefaultOffloadAt is the engine's default threshold: bodies over it are kept beside the log. */
export const DefaultOffloadAt = 256 << 10
/** MaxPayloadObject is the largest body kept beside the log. */
export const MaxPayloadObject = 64 << 20

/** ChunkSize is the size of an object's chunks, as nats.go's default. */
export const ChunkSize = 128 << 10

const objStream = 'OBJ_' + PayloadsBucket
const timeoutMs = 30_000
/** window bounds the chunks of one object published and not yet acknowledged. */
const window = 16
const enc = new TextEncoder()
const dec = new TextDecoder()

interface PayloadRef {
  bucket: string
  object: string
  size: number
  sha256: string
  contentType: string
}

function malformed(msg: string): WeftError {
  return new WeftError('MalformedEvent', `malformed event: ${msg}`)
}

function header(hdr: HeaderReader, name: string): string | undefined {
  const k = hdr.keys().find((k) => k.toLowerCase() === name)
  return k === undefined ? undefined : hdr.get(k)
}

/** isRef reports whether a message's body is a reference to a payload kept beside the log. */
export function isRef(hdr: HeaderReader | undefined): boolean {
  return hdr !== undefined && header(hdr, 'content-type') === ContentRef
}

// parseRef reads a reference as Go does (unknown fields refused) and
// checks that it names an object of the event's own run.
function parseRef(subject: string, run: string, body: Uint8Array): PayloadRef {
  let v: unknown
  try {
    v = JSON.parse(Buffer.from(body).toString('utf8'))
  } catch (err) {
    throw malformed(`${subject}: a payload reference that does not decode: ${(err as Error).message}`)
  }
  const want: Record<keyof PayloadRef, 'string' | 'number'> = { bucket: 'string', object: 'string', size: 'number', sha256: 'string', contentType: 'string' }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw malformed(`${subject}: a payload reference that does not decode: not an object`)
  const ref: PayloadRef = { bucket: '', object: '', size: 0, sha256: '', contentType: '' }
  for (const [k, x] of Object.entries(v)) {
    const t = want[k as keyof PayloadRef]
    if (t === undefined) throw malformed(`${subject}: a payload reference that does not decode: unknown field ${JSON.stringify(k)}`)
    if (x === null) continue
    if (typeof x !== t || (t === 'number' && !Number.isInteger(x))) throw malformed(`${subject}: a payload reference that does not decode: ${k}: want ${t === 'number' ? 'an integer' : 'a string'}`)
    ;(ref as unknown as Record<string, unknown>)[k] = x
  }
  if (ref.bucket !== PayloadsBucket) throw malformed(`${subject}: a payload reference to bucket ${JSON.stringify(ref.bucket)} (want ${PayloadsBucket})`)
  if (ref.object !== `${run}.${ref.sha256}` || ref.sha256.length !== 64 || /[. ]/.test(ref.sha256)) {
    throw malformed(`${subject}: a payload reference to object ${JSON.stringify(ref.object)}, not one of run ${run}`)
  }
  if (ref.size <= 0 || ref.size > MaxPayloadObject) {
    throw new WeftError('PayloadTooLarge', `payload too large: ${subject}: a payload reference of ${ref.size} bytes (the limit is ${MaxPayloadObject})`)
  }
  if (ref.contentType === ContentRef) throw malformed(`${subject}: a payload reference to a reference`)
  return ref
}

// get is one direct get on the payloads bucket's stream: the message,
// or undefined when there is none (404).
async function get(nc: NatsConnection, subject: string, what: string, req?: object): Promise<Msg | undefined> {
  let m: Msg
  try {
    m = await nc.request(subject, req === undefined ? new Uint8Array(0) : enc.encode(JSON.stringify(req)), { timeout: timeoutMs })
  } catch (err) {
    throw new WeftError('Unresolvable', `payload kept beside the log: ${what}: ${(err as Error).message}`)
  }
  const code = m.headers?.code ?? 0
  if (code === 404) return undefined
  if (code === 503) throw new WeftError('Unresolvable', `payload kept beside the log: ${what}: no responders (is the ${PayloadsBucket} bucket there?)`)
  if (code !== 0 && code !== 200) throw new WeftError('Unresolvable', `payload kept beside the log: ${what}: status ${code} ${m.headers?.description ?? ''}`)
  return m
}

// b64url is Go's base64.URLEncoding: the URL alphabet, padded.
function b64url(b: Uint8Array): string {
  const s = Buffer.from(b).toString('base64url')
  return s + '='.repeat((4 - (s.length % 4)) % 4)
}

// metaSubject is the subject of an object's meta (nats.go's encodeName).
function metaSubject(object: string): string {
  return `$O.${PayloadsBucket}.M.${b64url(Buffer.from(object, 'utf8'))}`
}

// readObject reads a reference's object: its meta, then its chunks, in order.
async function readObject(nc: NatsConnection, subject: string, ref: PayloadRef): Promise<Buffer> {
  const where = `${subject}: payload object ${ref.object} of bucket ${ref.bucket}`
  const meta = await get(nc, `$JS.API.DIRECT.GET.${objStream}.${metaSubject(ref.object)}`, `${subject}: reading the meta of ${ref.object}`)
  const missing = () => malformed(`${where} is missing (deleted, or never written): the event cannot be read`)
  if (meta === undefined) throw missing()
  let info: { nuid?: string; size?: number; deleted?: boolean; options?: { link?: unknown } }
  try {
    info = JSON.parse(Buffer.from(meta.data).toString('utf8')) as typeof info
  } catch {
    throw malformed(`${where}: its meta does not decode`)
  }
  if (info.deleted === true) throw missing()
  if ((info.nuid ?? '') === '' || info.options?.link != null || info.size !== ref.size) {
    throw malformed(`${where}: the object's meta says ${info.size ?? 0} bytes (a link: ${info.options?.link != null}), not the reference's ${ref.size}`)
  }
  const chunks = `$O.${PayloadsBucket}.C.${info.nuid}`
  const parts: Buffer[] = []
  let n = 0
  for (let seq = 1; ; ) {
    const m = await get(nc, `$JS.API.DIRECT.GET.${objStream}`, `${subject}: reading the chunks of ${ref.object}`, { seq, next_by_subj: chunks })
    if (m === undefined) break
    n += m.data.length
    if (n > ref.size) throw malformed(`${where}: the object's chunks hold more than the reference's ${ref.size} bytes`)
    parts.push(Buffer.from(m.data))
    seq = Number(m.headers?.get('Nats-Sequence') ?? '0') + 1
    if (seq <= 1) throw malformed(`${where}: a chunk without its sequence`)
    if (n === ref.size) break
  }
  const body = Buffer.concat(parts)
  if (body.length !== ref.size || createHash('sha256').update(body).digest('hex') !== ref.sha256) {
    throw malformed(`${where}: the object's ${body.length} bytes are not the reference's ${ref.size} bytes of digest ${ref.sha256}`)
  }
  return body
}

/**
 * resolveRef returns a message's headers and body with a body kept beside
 * the log read back in place of its reference (the content type the
 * body's own); a message that is no reference comes back as it is.
 */
export async function resolveRef(nc: NatsConnection, subject: string, hdr: HeaderReader, data: Uint8Array): Promise<{ headers: HeaderReader; data: Uint8Array }> {
  if (!isRef(hdr)) return { headers: hdr, data }
  const ref = parseRef(subject, header(hdr, 'ce-runid') ?? '', data)
  const body = await readObject(nc, subject, ref)
  const headers: HeaderReader = {
    keys: () => hdr.keys().filter((k) => k.toLowerCase() !== 'content-type' || ref.contentType !== ''),
    get: (k) => (k.toLowerCase() === 'content-type' ? ref.contentType : hdr.get(k)),
  }
  return { headers, data: body }
}

/** OffloadEvent names the event whose body offload keeps, for its errors. */
export interface OffloadEvent {
  runId: string
  type: string
}

/**
 * offload keeps an event's body (as it would be written: sealed, if the
 * process seals) in the payloads bucket and returns the reference to
 * write as the event's body in its place, with the content type
 * ContentRef (the body's own content type is in the reference). A body
 * over MaxPayloadObject is a WeftError PayloadTooLarge; a bucket that is
 * not there, or a publish that is refused or times out, an Error saying
 * which.
 */
export async function offload(nc: NatsConnection, e: OffloadEvent, body: Uint8Array, contentType: string): Promise<Uint8Array> {
  if (body.length > MaxPayloadObject) {
    throw new WeftError(
      'PayloadTooLarge',
      `event too large for one message: ${e.type} event of run ${JSON.stringify(e.runId)}: a body of ${body.length} bytes, the limit beside the log is ${MaxPayloadObject}`,
    )
  }
  const sum = createHash('sha256').update(body).digest()
  const digest = sum.toString('hex')
  const object = `${e.runId}.${digest}`
  const where = `keeping the ${body.length}-byte body of a ${e.type} event of run ${JSON.stringify(e.runId)} beside the log (object ${object} of bucket ${PayloadsBucket})`
  if (!(await written(nc, object, body.length, where))) await putObject(nc, object, body, sum, where)
  // The reference, as Go marshals its payloadRef (the same fields, in the same order).
  return enc.encode(JSON.stringify({ bucket: PayloadsBucket, object, size: body.length, sha256: digest, contentType }))
}

// written reports whether the object is there already, whole (Go's
// check before it puts: the meta says the same size, not deleted).
async function written(nc: NatsConnection, object: string, size: number, where: string): Promise<boolean> {
  let m: Msg | undefined
  try {
    m = await get(nc, `$JS.API.DIRECT.GET.${objStream}.${metaSubject(object)}`, 'reading its meta')
  } catch (err) {
    throw new Error(`${where}: ${(err as Error).message}`, { cause: err })
  }
  if (m === undefined) return false
  try {
    const info = JSON.parse(dec.decode(m.data)) as { size?: number; deleted?: boolean }
    return info.deleted !== true && info.size === size
  } catch {
    return false // a meta that does not decode is written over
  }
}

// putObject writes an object as nats.go's Put does: its chunks on a new
// nuid's subject (a window of them in flight), then its meta, rolling up
// any earlier meta of the name. Chunks an earlier, different meta of the
// name pointed at are left (Go purges them; no role may purge): a name is
// its content's digest, so there is no such meta but a broken write's.
async function putObject(nc: NatsConnection, object: string, body: Uint8Array, sum: Buffer, where: string): Promise<void> {
  const id = nuid.next()
  const chunks = `$O.${PayloadsBucket}.C.${id}`
  let n = 0
  const inflight = new Set<Promise<void>>()
  let failed: unknown
  for (let at = 0; at < body.length; at += ChunkSize) {
    const p = publish(nc, chunks, body.subarray(at, Math.min(at + ChunkSize, body.length)), undefined, where).then(
      () => {
        inflight.delete(p)
      },
      (err: unknown) => {
        inflight.delete(p)
        failed ??= err
      },
    )
    inflight.add(p)
    n++
    if (inflight.size >= window) await Promise.race(inflight)
    if (failed !== undefined) break
  }
  await Promise.all(inflight)
  if (failed !== undefined) throw failed
  // The meta, field for field as Go's json.Marshal of a jetstream.ObjectInfo.
  const info = {
    name: object,
    options: { max_chunk_size: ChunkSize },
    bucket: PayloadsBucket,
    nuid: id,
    size: body.length,
    mtime: '0001-01-01T00:00:00Z',
    chunks: n,
    digest: 'SHA-256=' + b64url(sum),
  }
  const h = natsHeaders()
  h.set('Nats-Rollup', 'sub')
  await publish(nc, metaSubject(object), enc.encode(JSON.stringify(info)), h, where)
}

// publish is one JetStream publish to the payloads bucket's stream, its
// acknowledgement checked.
async function publish(nc: NatsConnection, subject: string, data: Uint8Array, h: ReturnType<typeof natsHeaders> | undefined, where: string): Promise<void> {
  let m: Msg
  try {
    m = await nc.request(subject, data, h !== undefined ? { timeout: timeoutMs, headers: h } : { timeout: timeoutMs })
  } catch (err) {
    const e = err as Error
    if (noResponders(err)) {
      throw new Error(`${where}: no responders on ${subject}: is the ${PayloadsBucket} bucket there? (an admin's set-up, 'weft roles -setup', or a coordinator creates it)`, { cause: err })
    }
    throw new Error(`${where}: publishing to ${subject}: ${e.message}`, { cause: err })
  }
  let ack: { error?: { code?: number; err_code?: number; description?: string } }
  try {
    ack = JSON.parse(dec.decode(m.data)) as typeof ack
  } catch {
    throw new Error(`${where}: publishing to ${subject}: an answer that is no acknowledgement (status ${m.headers?.code ?? 0} ${m.headers?.description ?? ''})`)
  }
  if (ack.error !== undefined) {
    throw new Error(`${where}: publishing to ${subject}: ${ack.error.description ?? ''} (code ${ack.error.err_code ?? ack.error.code ?? 0})`)
  }
}

function noResponders(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e.name === 'NoRespondersError' || /no responders/i.test(e.message)) return true
  }
  return false
}
