// The conformance worker as a process of its own, on a server without
// roles (no credentials, replies on _INBOX): it serves its queue, and
// SIGTERM drains it: the node in flight finishes and it exits 0.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { Client } from '../dist/index.js'
import { Harness, pkg } from './harness.mjs'

let h
let client
let dir
before(async () => {
  h = await Harness.start({ queues: ['conf'] })
  client = await Client.connect({ connection: { url: h.url, env: {} } })
  dir = mkdtempSync(join(tmpdir(), 'weft-ts-process-'))
})
after(async () => {
  await client?.close()
  await h?.stop()
  rmSync(dir, { recursive: true, force: true })
})

test('the conformance worker serves its queue and drains on SIGTERM', async () => {
  const effects = join(dir, 'effects')
  const p = spawn(process.execPath, [join(pkg, 'dist/conformance/worker.js')], {
    env: { PATH: process.env.PATH, WEFT_NATS_URL: h.url, WEFT_QUEUE: 'conf', WEFT_CONF_EFFECTS: effects, WEFT_WORKER_NAME: 'proc-1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let log = ''
  p.stderr.on('data', (b) => (log += b))
  const exited = new Promise((ok) => p.once('exit', (code, sig) => ok(code ?? sig)))
  try {
    const g = (id, type, config) => ({ name: `proc-${id}`, nodes: [{ id, type, queue: 'conf', config }], edges: [{ from: 'START', to: id }, { from: id, to: 'END' }] })
    const echo = await client.start(g('e', 'conf.echo', { output: { hi: 1 } }))
    const st = await client.wait(echo, { timeout: 60_000 })
    assert.equal(st.status, 'completed', log)
    assert.deepEqual(st.nodes.e.output, { hi: 1 })

    const eff = await client.start(g('f', 'conf.effect', { ms: 1000 }))
    for (let i = 0; i < 200 && (await client.status(eff)).nodes.f?.status !== 'running'; i++) await new Promise((r) => setTimeout(r, 25))
    p.kill('SIGTERM')
    assert.equal(await exited, 0, log)
    const done = await client.wait(eff, { timeout: 30_000 })
    assert.equal(done.status, 'completed', 'the node in flight finished during the drain')
    assert.equal(readFileSync(effects, 'utf8'), `${done.nodes.f.output.key}\n`)
  } finally {
    p.kill('SIGKILL')
  }
})

test('the store’s request mux: a reply resolves its request, in any order; nobody answering and no answer are errors naming the subject', async () => {
  const { connect } = await import('../dist/index.js')
  const { Replies } = await import('../dist/internal/replies.js')
  const conn = await connect({ url: h.url, env: {} })
  try {
    // A responder that answers the second request before the first.
    let first
    const sub = conn.nc.subscribe('replies.test.echo', {
      callback: (_, m) => {
        if (first === undefined) first = m
        else {
          m.respond(new TextEncoder().encode('two'))
          first.respond(new TextEncoder().encode('one'))
        }
      },
    })
    await conn.nc.flush()
    const r = new Replies(conn.nc, conn.inboxPrefix)
    const [a, b] = await Promise.all([r.request('replies.test.echo', new Uint8Array(1), 5_000), r.request('replies.test.echo', new Uint8Array(2), 5_000)])
    assert.deepEqual([Buffer.from(a.data).toString(), Buffer.from(b.data).toString()], ['one', 'two'])
    await assert.rejects(r.request('replies.test.nobody', new Uint8Array(0), 5_000), (e) => e.name === 'NoResponders' && /replies\.test\.nobody: no responders/.test(e.message))
    const silent = conn.nc.subscribe('replies.test.silent', { callback: () => {} })
    await conn.nc.flush()
    await assert.rejects(r.request('replies.test.silent', new Uint8Array(0), 200), /replies\.test\.silent: request timed out after 200 ms/)
    const pending = r.request('replies.test.silent', new Uint8Array(0), 60_000)
    r.close()
    await assert.rejects(pending, /replies were closed/)
    sub.unsubscribe()
    silent.unsubscribe()
  } finally {
    await conn.nc.close()
  }
})
