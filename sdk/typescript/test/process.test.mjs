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
