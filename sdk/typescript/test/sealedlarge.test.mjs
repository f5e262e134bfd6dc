// Large outputs of a sealed deployment (docs/worker-protocol.md, "Large
// bodies beside the log" and "Sealed events"): a TypeScript node's output
// over 256 KiB is sealed, then kept in weft-payloads, and the Go engine,
// with the same key ring, reads it back; no byte of the object is
// plaintext.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { Client, connect, PayloadsBucket, Worker } from '../dist/index.js'
import { Harness } from './harness.mjs'

const queue = 'ts'
const secret = 'TOP-SECRET-' + randomBytes(8).toString('hex')
const quiet = { debug() {}, info() {}, warn() {}, error() {} }
let dir, h, client, worker, running

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'weft-sealedlarge-'))
  const ring = `k1:${randomBytes(32).toString('base64')}\n`
  writeFileSync(join(dir, 'keys'), ring, { mode: 0o600 })
  h = await Harness.start({ roles: true, queues: [queue], encryptKeys: join(dir, 'keys') })
  process.env.WEFT_ENCRYPT_KEYS = ring // the SDK's Store takes the ring from here (process-wide)
  client = await Client.connect({ connection: h.connectOptions('weft-client'), identity: 'tester' })
  worker = new Worker({ connection: h.connectOptions(`weft-worker-${queue}`), queues: [queue], name: 'ts-sealed-worker', logger: quiet })
  worker.handle('large', (input) => ({ output: { text: (secret + ' ').repeat(Math.ceil(input.config.bytes / (secret.length + 1))) } }))
  running = worker.run({ signals: [] })
})

after(async () => {
  worker?.stop()
  await running?.catch(() => undefined)
  await client?.close()
  await h?.stop()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

// rawObjects reads every message of the payloads bucket's stream as
// stored (direct gets: what an operator with the bucket's stream sees).
async function rawObjects() {
  const conn = await connect(h.connectOptions(`weft-worker-${queue}`))
  const out = []
  try {
    for (let seq = 1; ; ) {
      const m = await conn.nc.request(`$JS.API.DIRECT.GET.OBJ_${PayloadsBucket}`, new TextEncoder().encode(JSON.stringify({ seq, next_by_subj: `$O.${PayloadsBucket}.>` })), { timeout: 10_000 })
      if ((m.headers?.code ?? 0) === 404) break
      out.push({ subject: m.headers.get('Nats-Subject'), data: Buffer.from(m.data) })
      seq = Number(m.headers.get('Nats-Sequence')) + 1
    }
  } finally {
    await conn.nc.close()
  }
  return out
}

test('a sealed deployment: a TypeScript node’s 2 MB output is sealed beside the log, Go opens it, and the object holds no plaintext', async () => {
  const run = await client.start({ name: 'sealed-large', nodes: [{ id: 'big', type: 'large', queue, config: { bytes: 2_000_000 }, retry: { maxAttempts: 1 } }], edges: [{ from: 'START', to: 'big' }, { from: 'big', to: 'END' }] })
  const st = await client.wait(run, { timeout: 120_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st).slice(0, 2000))
  assert.ok(st.nodes.big.output.text.startsWith(secret), 'this SDK reads it back, opened')
  const goInvoked = (await h.ask({ op: 'history', run })).events.filter((e) => e.type === 'dev.weft.node.invoked.v1')
  assert.equal(goInvoked.length, 1)
  assert.equal(goInvoked[0].refused, undefined, 'Go reads the body')
  assert.equal(goInvoked[0].sealed, true, 'Go opened it: it was sealed')
  assert.ok(goInvoked[0].size > 2_000_000)
  // Go's fold has the same output.
  const goState = (await h.ask({ op: 'state', run })).state
  assert.equal(goState.status, 'completed')
  const raw = await rawObjects()
  const chunks = raw.filter((m) => m.subject.startsWith(`$O.${PayloadsBucket}.C.`))
  assert.ok(chunks.reduce((n, m) => n + m.data.length, 0) > 2_000_000, `the sealed body is in the bucket (${chunks.length} chunks)`)
  for (const m of raw) assert.ok(!m.data.includes(secret), `${m.subject}: no plaintext`)
})
