// Bodies kept beside the log (docs/worker-protocol.md, "Large payloads"):
// resolveRef reads the object a reference names with direct gets, checks
// it, and the event then decodes (a sealed one opened) as if written
// whole; what is wrong with a reference or its object is refused, never
// read as data. The object store here is a stand-in answering the direct
// gets as the server does (test/e2e.test.mjs runs the real one).
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { afterEach, test } from 'node:test'
import { ChunkSize, ContentRef, ContentSealed, decode, encode, EventType, isWeftError, MaxPayloadObject, newEvent, offload, PayloadsBucket, parseKeyRing, resolveRef, useKeys } from '../dist/index.js'

const run = '06h1c2dq3sbkce9j5fmrq0k7tg'
afterEach(() => useKeys(undefined))

function hdrs(pairs) {
  const m = new Map(pairs)
  return { keys: () => [...m.keys()], get: (k) => m.get(k) ?? '' }
}

function reply(data, h = {}) {
  return { data: Buffer.from(data), headers: { code: h.code ?? 0, description: '', get: (k) => h[k] ?? '' } }
}

// store stands in for the payloads bucket's stream: one object, its
// chunks at sequences 5, 9, … (other objects' messages between them).
function store(name, body, { chunkSize = 1000, meta = {}, lost = false, timeout = false } = {}) {
  const nuid = 'NUIDabc123'
  const chunks = []
  for (let i = 0; i < body.length; i += chunkSize) chunks.push({ seq: 5 + 4 * chunks.length, data: body.subarray(i, i + chunkSize) })
  // Go names the meta subject by the name in base64url with its padding.
  const b64 = Buffer.from(name).toString('base64url')
  const metaSubject = `$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}.$O.${PayloadsBucket}.M.${b64}${'='.repeat((4 - (b64.length % 4)) % 4)}`
  const gets = []
  return {
    gets,
    async request(subject, data) {
      gets.push(subject)
      if (timeout) throw new Error('TIMEOUT')
      if (subject.startsWith(`$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}.`)) {
        if (lost || subject !== metaSubject) return reply('', { code: 404 })
        return reply(JSON.stringify({ name, bucket: PayloadsBucket, nuid, size: body.length, chunks: chunks.length, ...meta }))
      }
      assert.equal(subject, `$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}`)
      const req = JSON.parse(Buffer.from(data).toString())
      assert.equal(req.next_by_subj, `$O.${PayloadsBucket}.C.${nuid}`)
      const c = chunks.find((c) => c.seq >= req.seq)
      return c === undefined ? reply('', { code: 404 }) : reply(c.data, { 'Nats-Sequence': String(c.seq) })
    },
  }
}

// kept turns an encoded event into what the log holds when its body is
// kept beside it: the reference, and the object's name and body.
function kept(w, over = {}) {
  const body = Buffer.from(w.data)
  const sum = createHash('sha256').update(body).digest('hex')
  const ct = new Map(w.headers).get('content-type') ?? ''
  const ref = { bucket: PayloadsBucket, object: `${run}.${sum}`, size: body.length, sha256: sum, contentType: ct, ...over }
  const headers = hdrs(w.headers.map(([k, v]) => (k === 'content-type' ? [k, ContentRef] : [k, v])))
  return { headers, data: Buffer.from(JSON.stringify(ref)), name: ref.object, body }
}

test('a sealed body kept beside the log is read back, checked and opened', async () => {
  useKeys(parseKeyRing('test', 'k1:' + Buffer.alloc(32, 3).toString('base64')))
  const secret = 'S'.repeat(3000) + 'SECRET'
  const w = encode(newEvent({ runId: run, id: 'sig-big', type: EventType.SignalReceived, data: JSON.stringify({ node: 'ask', data: { answer: secret } }) }))
  assert.equal(new Map(w.headers).get('content-type'), ContentSealed)
  const k = kept(w)
  assert.throws(() => decode(w.subject, k.headers, k.data), (e) => isWeftError(e, 'Unresolvable'), 'unresolved, a reference is not data')
  const nc = store(k.name, k.body)
  const r = await resolveRef(nc, w.subject, k.headers, k.data)
  assert.ok(nc.gets.length >= 4, `meta and 3+ chunks: ${nc.gets.length} gets`)
  const e = decode(w.subject, r.headers, r.data)
  assert.equal(JSON.parse(e.data).data.answer, secret)
  // A message that is no reference comes back as it is.
  const plain = await resolveRef(nc, w.subject, hdrs(w.headers), w.data)
  assert.equal(plain.data, w.data)
})

test('a bad reference, or an object that is not what it names, is refused, saying why', async () => {
  const w = encode(newEvent({ runId: run, id: 'sig-big', type: EventType.SignalReceived, data: JSON.stringify({ node: 'ask', data: 'x'.repeat(2500) }) }))
  const k = kept(w)
  const refused = async (what, nc, kk, code, msg) => {
    await assert.rejects(resolveRef(nc, w.subject, kk.headers, kk.data), (e) => (isWeftError(e, code) && msg.test(e.message) && e.message.includes(w.subject)) || assert.fail(`${what}: ${e.code}: ${e.message}`))
  }
  const other = kept(w, { object: `06h1c2dq3sbkce9j5fmrq0k7th.${k.name.split('.')[1]}` })
  await refused('another run’s object', store(other.name, k.body), other, 'MalformedEvent', /not one of run 06h1c2dq3sbkce9j5fmrq0k7tg/)
  const bucket = kept(w, { bucket: 'elsewhere' })
  await refused('another bucket', store(k.name, k.body), bucket, 'MalformedEvent', /bucket "elsewhere"/)
  const unknown = kept(w, { extra: 1 })
  await refused('an unknown field', store(k.name, k.body), unknown, 'MalformedEvent', /unknown field "extra"/)
  const toRef = kept(w, { contentType: ContentRef })
  await refused('a reference to a reference', store(k.name, k.body), toRef, 'MalformedEvent', /a payload reference to a reference/)
  const huge = kept(w, { size: MaxPayloadObject + 1 })
  await refused('over the limit', store(k.name, k.body), huge, 'PayloadTooLarge', /the limit is 67108864/)
  await refused('a missing object', store(k.name, k.body, { lost: true }), k, 'MalformedEvent', /is missing/)
  await refused('a deleted object', store(k.name, k.body, { meta: { deleted: true } }), k, 'MalformedEvent', /is missing/)
  await refused('a link', store(k.name, k.body, { meta: { options: { link: { bucket: 'b' } } } }), k, 'MalformedEvent', /a link: true/)
  const tampered = Buffer.from(k.body)
  tampered[1500] ^= 1
  await refused('bytes that are not the digest', store(k.name, tampered), k, 'MalformedEvent', /not the reference's \d+ bytes of digest/)
  await refused('more bytes than the reference', store(k.name, Buffer.concat([k.body, Buffer.from('!')]), { meta: { size: k.body.length } }), k, 'MalformedEvent', /hold more than/)
  await refused('no answer', store(k.name, k.body, { timeout: true }), k, 'Unresolvable', /TIMEOUT/)
})

// bucket stands in for the payloads bucket's stream taking writes: it
// stores what is published (acknowledging each as JetStream does) and
// answers the direct gets of resolveRef from it.
function bucket({ refuse = false, absent = false } = {}) {
  const msgs = []
  const nc = {
    msgs,
    async request(subject, data, opts) {
      if (subject.startsWith('$JS.API.DIRECT.GET.')) {
        if (absent) throw Object.assign(new Error('no responders'), { name: 'NoRespondersError' })
        if (subject !== `$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}`) {
          const want = subject.slice(`$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}.`.length)
          const m = msgs.findLast((m) => m.subject === want)
          return m === undefined ? reply('', { code: 404 }) : reply(m.data)
        }
        const req = JSON.parse(Buffer.from(data).toString())
        const i = msgs.findIndex((m, i) => i + 1 >= req.seq && m.subject === req.next_by_subj)
        return i < 0 ? reply('', { code: 404 }) : reply(msgs[i].data, { 'Nats-Sequence': String(i + 1) })
      }
      if (absent) throw new Error('request failed', { cause: Object.assign(new Error('no responders'), { name: 'NoRespondersError' }) })
      if (refuse) return reply(JSON.stringify({ error: { code: 400, err_code: 10054, description: 'maximum bytes exceeded' } }))
      msgs.push({ subject, data: Buffer.from(data), rollup: opts?.headers?.get('Nats-Rollup') ?? '' })
      return reply(JSON.stringify({ stream: `OBJ_${PayloadsBucket}`, seq: msgs.length }))
    },
  }
  return nc
}

test('offload writes a body as Go’s writer does: 128 KiB chunks, then the meta Go writes, rolled up; resolveRef reads it back', async () => {
  useKeys(parseKeyRing('test', 'k1:' + Buffer.alloc(32, 5).toString('base64')))
  const e = newEvent({ runId: run, id: 'inv-big', type: EventType.NodeInvoked, nodeId: 'n', attempt: 1, queue: 'q', data: JSON.stringify({ node: 'n', iteration: 1, attempt: 1, output: 'y'.repeat(300_000) }) })
  const w = encode(e)
  const nc = bucket()
  const refBody = await offload(nc, e, w.data, ContentSealed)
  const sum = createHash('sha256').update(w.data).digest()
  const hex = sum.toString('hex')
  assert.equal(Buffer.from(refBody).toString(), JSON.stringify({ bucket: PayloadsBucket, object: `${run}.${hex}`, size: w.data.length, sha256: hex, contentType: ContentSealed }))
  const chunks = nc.msgs.filter((m) => m.subject.startsWith(`$O.${PayloadsBucket}.C.`))
  assert.deepEqual(chunks.map((m) => m.data.length), [ChunkSize, ChunkSize, w.data.length - 2 * ChunkSize])
  assert.equal(new Set(chunks.map((m) => m.subject)).size, 1, 'one nuid')
  const meta = nc.msgs.at(-1)
  const b64 = Buffer.from(`${run}.${hex}`).toString('base64url')
  assert.equal(meta.subject, `$O.${PayloadsBucket}.M.${b64}${'='.repeat((4 - (b64.length % 4)) % 4)}`)
  assert.equal(meta.rollup, 'sub')
  const nuid = chunks[0].subject.split('.').at(-1)
  const digest = sum.toString('base64url') + '='.repeat((4 - (sum.toString('base64url').length % 4)) % 4)
  // Byte for byte what Go's json.Marshal of a jetstream.ObjectInfo gives.
  assert.equal(
    meta.data.toString(),
    `{"name":"${run}.${hex}","options":{"max_chunk_size":131072},"bucket":"${PayloadsBucket}","nuid":"${nuid}","size":${w.data.length},"mtime":"0001-01-01T00:00:00Z","chunks":3,"digest":"SHA-256=${digest}"}`,
  )
  // Read back through the reference, and opened.
  const headers = hdrs(w.headers.map(([k, v]) => (k === 'content-type' ? [k, ContentRef] : [k, v])))
  const r = await resolveRef(nc, w.subject, headers, refBody)
  assert.equal(decode(w.subject, r.headers, r.data).data, e.data)
  // A retried append finds the object whole and writes nothing.
  const n = nc.msgs.length
  assert.deepEqual(await offload(nc, e, w.data, ContentSealed), refBody)
  assert.equal(nc.msgs.length, n)
})

test('offload refuses a body over the object limit, and says where a write went wrong', async () => {
  const e = { runId: run, type: EventType.NodeInvoked }
  await assert.rejects(offload(bucket(), e, Buffer.alloc(MaxPayloadObject + 1), 'application/json'), (err) => isWeftError(err, 'PayloadTooLarge') && /a body of 67108865 bytes, the limit beside the log is 67108864/.test(err.message))
  await assert.rejects(offload(bucket({ refuse: true }), e, Buffer.alloc(300_000, 1), 'application/json'), /keeping the 300000-byte body of a dev\.weft\.node\.invoked\.v1 event of run "06h1c2dq3sbkce9j5fmrq0k7tg" beside the log .*maximum bytes exceeded \(code 10054\)/)
  await assert.rejects(offload(bucket({ absent: true }), e, Buffer.alloc(300_000, 1), 'application/json'), /keeping the 300000-byte body .*no responders/)
})
