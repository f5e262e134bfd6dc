// Sealed events against the protocol: the document's conformance vector
// (docs/worker-protocol.md, "Sealed events"), read from the document as
// Go's TestProtocolSealedVector reads it, sealed and opened by the SDK;
// and what cannot be opened is refused as Go refuses it.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { afterEach, test } from 'node:test'
import { encode, decode, newEvent, EventType, useKeys, parseKeyRing, ContentSealed } from '../dist/index.js'
import { isWeftError } from '../dist/events/errors.js'

function vector() {
  const doc = readFileSync(new URL('../../../docs/worker-protocol.md', import.meta.url), 'utf8')
  const at = doc.indexOf('<!-- conformance:table sealed-vector -->')
  assert.ok(at >= 0, 'no sealed-vector table in the protocol document')
  const v = {}
  for (const line of doc.slice(at).split('\n').slice(3)) {
    if (!line.startsWith('|')) break
    const [field, value] = line.split('|').slice(1, 3).map((c) => c.trim().replace(/^`|`$/g, ''))
    v[field] = value
  }
  return v
}

function headers(w) {
  const m = new Map(w.headers)
  return { keys: () => [...m.keys()], get: (k) => m.get(k) ?? '' }
}

afterEach(() => useKeys(undefined))

test('the protocol’s sealed vector seals and opens', () => {
  const v = vector()
  useKeys(parseKeyRing('vector', `${v['key id']}:${v['key']}`))
  const e = newEvent({ runId: v['ce-runid'], id: v['ce-id'], type: v['ce-type'], data: v['data'] })
  const w = encode(e)
  assert.equal(Buffer.from(w.data).toString('base64'), v['body (base64)'])
  const h = new Map(w.headers)
  assert.equal(h.get('content-type'), ContentSealed)
  assert.equal(h.get('ce-weftkey'), v['key id'])
  assert.equal(decode(w.subject, headers(w), w.data).data, v['data'])
})

test('what cannot be opened is refused, naming the key', () => {
  const v = vector()
  const ring = parseKeyRing('vector', `${v['key id']}:${v['key']}`)
  useKeys(ring)
  const e = newEvent({ runId: v['ce-runid'], id: 'sig-2', type: EventType.SignalReceived, data: '{"node":"ask","data":{"answer":"SECRET"}}' })
  const w = encode(e)
  assert.ok(!Buffer.from(w.data).toString('latin1').includes('SECRET'))
  const tampered = Buffer.from(w.data)
  tampered[20] ^= 1
  assert.throws(() => decode(w.subject, headers(w), tampered), (err) => isWeftError(err, 'MalformedEvent') && /does not authenticate/.test(err.message))
  assert.throws(() => decode(w.subject, headers(w), Buffer.from(w.data).subarray(0, 10)), (err) => isWeftError(err, 'MalformedEvent') && /truncated/.test(err.message))
  useKeys(parseKeyRing('other', 'k9:' + Buffer.alloc(32, 7).toString('base64')))
  assert.throws(() => decode(w.subject, headers(w), w.data), (err) => isWeftError(err, 'KeyMissing') && /key "k1"/.test(err.message) && err.message.includes(w.subject))
  useKeys(undefined)
  assert.throws(() => decode(w.subject, headers(w), w.data), (err) => isWeftError(err, 'KeyMissing'))
  // Rotation: a ring with a new first key seals with it and opens k1's.
  useKeys([{ id: 'k2', secret: Buffer.alloc(32, 9) }, ...ring])
  assert.equal(decode(w.subject, headers(w), w.data).data, e.data)
  assert.equal(new Map(encode(e).headers).get('ce-weftkey'), 'k2')
})

test('key rings refuse bad keys without printing them', () => {
  for (const text of ['', 'k1', 'k1:%%%', 'k1:AAAA', 'k 1:' + Buffer.alloc(32).toString('base64')]) {
    assert.throws(() => parseKeyRing('f', text), (err) => isWeftError(err, 'BadKey') && !err.message.includes('AAAA'))
  }
})

test('a body kept beside the log is not read as data, nor as malformed', () => {
  const e = newEvent({ runId: '06h1c2dq3sbkce9j5fmrq0k7tg', id: 'big-1', type: EventType.SignalReceived, data: '{"node":"ask"}' })
  const w = encode(e)
  w.headers = w.headers.map(([k, v]) => (k === 'content-type' ? [k, 'application/vnd.weft.ref.v1'] : [k, v]))
  assert.throws(() => decode(w.subject, headers(w), Buffer.from('{"bucket":"weft-payloads"}')), (err) => isWeftError(err, 'Unresolvable'))
})
