// Sealed events: the data of events encrypted at rest with AES-256-GCM,
// as docs/worker-protocol.md ("Sealed events") and Go's
// internal/eventlog/seal.go define them. With a key ring in use
// (useKeys, or WEFT_ENCRYPT_KEYS when a Store opens), encode seals every
// event's body under the ring's first key and decode opens sealed bodies
// under any key of the ring; the envelope stays plain. A sealed body whose
// key the process does not hold is a WeftError with code KeyMissing,
// naming the key id: not malformed, and never read as data.

import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { WeftError } from './errors.js'

/** ContentSealed is a sealed event's datacontenttype. */
export const ContentSealed = 'application/vnd.weft.sealed.v1'
/** ExtKeyID is the CloudEvents extension naming a sealed event's key. */
export const ExtKeyID = 'weftkey'
/** EnvEncryptKeys is the variable a key ring may come from (its text form). */
export const EnvEncryptKeys = 'WEFT_ENCRYPT_KEYS'

const contentVendor = 'application/vnd.weft.'
/** ContentRef is the datacontenttype of an event whose body is kept in the payloads bucket beside the log. */
export const ContentRef = 'application/vnd.weft.ref.v1'
const nonceSize = 12
const tagSize = 16

/** Key is one data key: an id and 32 secret bytes. */
export interface Key {
  id: string
  secret: Buffer
}

/** KeyRing is a list of keys, the current one first. */
export type KeyRing = Key[]

interface DataKey {
  key: Buffer
  nonceKey: Buffer
}

let active: { ring: KeyRing; keys: Map<string, DataKey> } | undefined

function dataKey(k: Key): DataKey {
  return { key: k.secret, nonceKey: createHmac('sha256', k.secret).update('weft sealed.v1 nonce key').digest() }
}

/**
 * useKeys makes this process seal the events it encodes with ring's first
 * key and open sealed events with any of its keys; undefined turns sealing
 * off. Process-wide, as in Go.
 */
export function useKeys(ring: KeyRing | undefined): void {
  if (ring === undefined) {
    active = undefined
    return
  }
  if (ring.length === 0) throw new WeftError('BadKey', 'bad key: an empty key ring')
  const keys = new Map<string, DataKey>()
  for (const k of ring) {
    checkKey(k, 'key ring')
    keys.set(k.id, dataKey(k))
  }
  active = { ring, keys }
}

/** sealing reports whether this process seals the events it writes. */
export function sealing(): boolean {
  return active !== undefined
}

function checkKey(k: Key, where: string): void {
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(k.id)) throw new WeftError('BadKey', `bad key: ${where}: key id ${JSON.stringify(k.id)}: want 1 to 32 letters, digits, '-' or '_'`)
  if (k.secret.length !== 32) throw new WeftError('BadKey', `bad key: ${where}: key ${JSON.stringify(k.id)} is ${k.secret.length} bytes, want 32 (AES-256)`)
}

/** parseKeyRing reads a ring's text form ("<id>:<base64 key>" per line or comma, "#" comment lines); where names it in errors, never its text. */
export function parseKeyRing(where: string, text: string): KeyRing {
  const ring: KeyRing = []
  const entries: string[] = []
  for (const line of text.split('\n')) {
    if (line.trim().startsWith('#')) continue
    for (const e of line.split(',')) if (e.trim() !== '') entries.push(e.trim())
  }
  entries.forEach((entry, i) => {
    const c = entry.indexOf(':')
    if (c < 0) throw new WeftError('BadKey', `bad key: ${where}: entry ${i + 1}: want <id>:<base64 key>`)
    const id = entry.slice(0, c).trim()
    const b64 = entry.slice(c + 1).trim()
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) throw new WeftError('BadKey', `bad key: ${where}: key ${JSON.stringify(id)}: not standard base64`)
    const k = { id, secret: Buffer.from(b64, 'base64') }
    checkKey(k, where)
    if (ring.some((r) => r.id === id)) throw new WeftError('BadKey', `bad key: ${where}: key id ${JSON.stringify(id)} given twice`)
    ring.push(k)
  })
  if (ring.length === 0) throw new WeftError('BadKey', `bad key: ${where}: no keys`)
  return ring
}

/** loadKeys reads the key file at path, else the ring in WEFT_ENCRYPT_KEYS; undefined when neither is given. */
export function loadKeys(path?: string, env: NodeJS.ProcessEnv = process.env): KeyRing | undefined {
  if (path !== undefined && path !== '') return parseKeyRing(path, readFileSync(path, 'utf8'))
  const v = env[EnvEncryptKeys]
  if (v !== undefined && v.trim() !== '') return parseKeyRing(EnvEncryptKeys, v)
  return undefined
}

function aad(runId: string, type: string): Buffer {
  return Buffer.concat([Buffer.from('weft sealed.v1\0'), Buffer.from(runId), Buffer.from([0]), Buffer.from(type)])
}

/** seal returns an event's data sealed under the current key, or undefined when sealing is off. */
export function seal(id: string, runId: string, type: string, data: Buffer): { keyId: string; body: Buffer } | undefined {
  if (active === undefined) return undefined
  const k = active.ring[0]!
  const dk = active.keys.get(k.id)!
  const a = aad(runId, type)
  const nonce = createHmac('sha256', dk.nonceKey)
    .update(Buffer.concat([Buffer.from(id), Buffer.from([0]), a, Buffer.from([0]), data]))
    .digest()
    .subarray(0, nonceSize)
  const c = createCipheriv('aes-256-gcm', dk.key, nonce)
  c.setAAD(a)
  const ct = Buffer.concat([c.update(data), c.final()])
  return { keyId: k.id, body: Buffer.concat([nonce, ct, c.getAuthTag()]) }
}

function malformed(msg: string): WeftError {
  return new WeftError('MalformedEvent', `malformed event: ${msg}`)
}

/**
 * unseal returns an event's plain body, given its content type and key id
 * headers: the body as it is when it is plain JSON, opened when sealed.
 */
export function unseal(subject: string, runId: string, type: string, contentType: string | undefined, keyId: string, body: Uint8Array): Buffer {
  const ct = contentType ?? ''
  if (ct === ContentRef) {
    // A reference is resolved before decoding (resolveRef: the worker and
    // Store do it); one that reaches here was not: not malformed, only
    // not read yet.
    throw new WeftError('Unresolvable', `payload kept beside the log: ${subject}: the body is in the Object Store bucket named by its reference (${ContentRef}): read it with resolveRef before decoding`)
  }
  if (ct === ContentSealed) {
    if (keyId === '') throw malformed(`${subject}: sealed data without the "${ExtKeyID}" extension naming its key`)
    if (active === undefined) {
      throw new WeftError('KeyMissing', `sealed data's key not held: ${subject}: data sealed with key ${JSON.stringify(keyId)}, and this process holds no key ring (${EnvEncryptKeys})`)
    }
    const dk = active.keys.get(keyId)
    if (dk === undefined) throw new WeftError('KeyMissing', `sealed data's key not held: ${subject}: data sealed with key ${JSON.stringify(keyId)}, which this process's key ring does not hold`)
    const b = Buffer.from(body)
    if (b.length < nonceSize + tagSize) throw malformed(`${subject}: sealed data of ${b.length} bytes is truncated`)
    try {
      const d = createDecipheriv('aes-256-gcm', dk.key, b.subarray(0, nonceSize))
      d.setAAD(aad(runId, type))
      d.setAuthTag(b.subarray(b.length - tagSize))
      return Buffer.concat([d.update(b.subarray(nonceSize, b.length - tagSize)), d.final()])
    } catch {
      throw malformed(`${subject}: sealed data does not authenticate under key ${JSON.stringify(keyId)} (tampered with, truncated, or sealed for another run or type)`)
    }
  }
  if (keyId !== '') throw malformed(`${subject}: extension "${ExtKeyID}" on data that is not sealed (content type ${JSON.stringify(ct)})`)
  if (ct.startsWith(contentVendor)) throw malformed(`${subject}: unknown codec: content type ${JSON.stringify(ct)}`)
  return Buffer.from(body)
}
