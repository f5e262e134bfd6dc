// Ids, derived exactly as the Go engine derives them (internal/eventlog
// ids.go, internal/eventstore IdempotencyKey, pkg/events ids.go), so that
// the same fact gets the same de-duplication key whichever process, in
// whichever language, writes it.

import { createHash, randomBytes } from 'node:crypto'
import { type EventType, kindOf } from './subjects.js'

const alphabet = '0123456789abcdefghijklmnopqrstuv'

/** base32 is Weft's id alphabet: lowercase, sortable, no padding. */
export function base32(b: Uint8Array): string {
  let out = ''
  let bits = 0
  let acc = 0
  for (const byte of b) {
    acc = (acc << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += alphabet[(acc >>> (bits - 5)) & 31]
      bits -= 5
    }
    acc &= (1 << bits) - 1
  }
  if (bits > 0) out += alphabet[(acc << (5 - bits)) & 31]
  return out
}

/** decisionId derives an event id from what the event states: "<run>:<kind>:<parts…>". */
export function decisionId(runId: string, t: EventType, ...parts: string[]): string {
  return runId + ':' + kindOf(t) + ':' + parts.join(':')
}

/** randomId is a random id for one-off facts. */
export function randomId(): string {
  return base32(randomBytes(10))
}

/** NodeRef names one execution of a node: its activation (iteration) and, for a mapped node, the item. */
export interface NodeRef {
  node: string
  iteration: number
  item?: number | undefined
}

/** refKey is "node/iteration[/item]". */
export function refKey(r: NodeRef): string {
  let k = `${r.node}/${r.iteration}`
  if (r.item !== undefined && r.item !== null) k += `/${r.item}`
  return k
}

/** idempotencyKey is the key of an attempt when its work item carries none. */
export function idempotencyKey(runId: string, ref: NodeRef, attempt: number): string {
  const h = createHash('sha256').update(`${runId}/${refKey(ref)}/${attempt}`).digest()
  return h.subarray(0, 16).toString('hex')
}

/** newNonce is a random nonce for a run's start: 26 characters, 128 random bits (Go's NewNonce). */
export function newNonce(): string {
  return base32(randomBytes(16))
}

/** newRunId is a new run id: 26 characters, sortable by creation time. */
export function newRunId(): string {
  const b = new Uint8Array(16)
  const ms = BigInt(Date.now()) << 16n
  for (let i = 0; i < 8; i++) b[i] = Number((ms >> BigInt(56 - 8 * i)) & 0xffn)
  b.set(randomBytes(10), 6)
  return base32(b)
}
