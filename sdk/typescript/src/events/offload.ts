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

import { createHash } from 'node:crypto'
import type { Msg, NatsConnection } from '@nats-io/nats-core'
import type { HeaderReader } from './envelope.js'
import { WeftError } from './errors.js'
import { ContentRef } from './seal.js'

/** PayloadsBucket is the Object Store bucket of large payloads. */
export const PayloadsBucket = 'weft-payloads'
/** DefaultOffloadAt is the engine's default threshold: bodies over it are kept beside the log. */
export const DefaultOffloadAt = 256 << 10
/** MaxPayloadObject is the largest body kept beside the log. */
export const MaxPayloadObject = 64 << 20

const objStream = 'OBJ_' + PayloadsBucket
const timeoutMs = 30_000
const enc = new TextEncoder()

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

// readObject reads a reference's object: its meta, then its chunks, in order.
async function readObject(nc: NatsConnection, subject: string, ref: PayloadRef): Promise<Buffer> {
  const where = `${subject}: payload object ${ref.object} of bucket ${ref.bucket}`
  const name = Buffer.from(ref.object, 'utf8').toString('base64url')
  const pad = '='.repeat((4 - (name.length % 4)) % 4) // Go's base64.URLEncoding pads
  const meta = await get(nc, `$JS.API.DIRECT.GET.${objStream}.$O.${PayloadsBucket}.M.${name}${pad}`, `${subject}: reading the meta of ${ref.object}`)
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
