// End to end against a real engine (internal/sdkharness): an embedded NATS
// server with JetStream under Weft's roles, a Go coordinator, this SDK's
// worker (as weft-worker-ts) and client (as weft-client). Graphs run to
// their end, and what is asserted is what is in the log.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { Client, connect, nonRetryable, PayloadsBucket, retryable, slot, Worker } from '../dist/index.js'
import { Harness } from './harness.mjs'

const queue = 'ts'
let h
let client
let worker
let running
const exporter = new InMemorySpanExporter()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const quiet = { debug() {}, info() {}, warn() {}, error() {} }

// graph is a chain of nodes on the ts queue, START → … → END.
function graph(name, nodes) {
  const ids = nodes.map((n) => n.id)
  const edges = [START(ids[0]), ...ids.slice(1).map((id, i) => ({ from: ids[i], to: id })), { from: ids.at(-1), to: 'END' }]
  return { name, nodes: nodes.map((n) => ({ queue, ...n })), edges }
}
const START = (to) => ({ from: 'START', to })
// blob is n characters of text in which every 64-character line names its
// place, so that chunks read back out of order or one short do not match.
function blob(n) {
  const lines = []
  for (let i = 0; i * 64 < n; i++) lines.push(`${i}`.padStart(63, '.') + '\n')
  return lines.join('').slice(0, n)
}
const once = { maxAttempts: 1 }

async function logOf(run) {
  return client.events(run)
}
const ofType = (evs, t) => evs.filter((e) => e.type === `dev.weft.${t}.v1`)

before(async () => {
  h = await Harness.start({ roles: true, queues: [queue, 'drain'] })
  client = await Client.connect({ connection: h.connectOptions('weft-client'), identity: 'tester', tracerProvider })
  worker = new Worker({ connection: h.connectOptions(`weft-worker-${queue}`), queues: [queue], name: 'ts-test-worker', logger: quiet, tracerProvider, drainTimeout: 10_000 })
  const hooks = []
  worker
    .handle('greet', (input) => ({ output: { greeting: `Hello, ${input.state.name}!` }, updates: { greeting: `Hello, ${input.state.name}!`, count: 1 } }))
    .handle('configured', (input) => ({
      output: { config: input.config, invocation: input.invocation, key: input.idempotencyKey, attempt: input.attempt, delivery: input.delivery, effect: input.effect },
      updates: { items: [input.nodeId], count: 2 },
      actions: ['default'],
    }))
    .handle('throwString', () => {
      throw 'boom'
    })
    .handle('throwError', () => {
      throw new Error('outer', { cause: new TypeError('inner') })
    })
    .handle('bigint', () => ({ output: { n: 10n } }))
    .handle('cycle', () => {
      const o = { name: 'c' }
      o.self = o
      return { output: { list: [o] } }
    })
    .handle('badUpdate', () => ({ updates: { when: () => 1 } }))
    .handle('notResult', () => 42)
    .handle('forever', () => new Promise(() => {}))
    .handle('huge', () => ({ output: 'x'.repeat(64 << 20) }))
    .handle('large', (input) => ({ output: blob(input.config.bytes), ...(input.config.update ? { updates: { blob: blob(input.config.bytes) } } : {}) }))
    .handle('measure', (input) => ({ output: { length: input.state.big.length, head: input.state.big.slice(0, 3) } }))
    .handle('structured', (input) => {
      throw nonRetryable('Declined', 'card declined', { node: input.nodeId, code: 51 })
    })
    .handle('flaky', (input) => {
      if (input.attempt < 2) throw retryable('Flaky', `attempt ${input.attempt}`)
      return { output: { attempt: input.attempt } }
    })
    .handle('progress', async (input, ctx) => {
      for (let i = 0; i < 4; i++) {
        await ctx.heartbeat({ step: i })
        await new Promise((r) => setTimeout(r, 120))
      }
      return { output: { steps: 4 } }
    })
    .handle('block', (input, ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))))
    .handle('contract', {
      validate(input) {
        if (typeof input.state.n !== 'number') throw nonRetryable('ValidationError', 'state.n: want a number')
      },
      shouldExecute: (input) => input.state.n !== 0,
      before: (input) => hooks.push(`before ${input.state.n}`),
      prep: (input) => input.state.n,
      exec: (n) => n * 2,
      post: (input, prep, exec) => ({ output: { prep, exec } }),
      after: (input, res) => {
        res.output.after = true
      },
    })
    .handle('withFallback', {
      execute() {
        throw nonRetryable('Broken', 'always')
      },
      failed: (input, err) => hooks.push(`failed ${err.type}`),
      fallback: () => ({ output: { fallback: true } }),
    })
    .handle('sleepy', async (input, ctx) => {
      await new Promise((r) => setTimeout(r, input.config.ms))
      return { output: { slept: input.config.ms } }
    })
  worker.hooks = hooks
  running = worker.run({ signals: [] })
})

after(async () => {
  worker?.stop()
  await running?.catch(() => undefined)
  await client?.close()
  await h?.stop()
})

test('a run of TypeScript nodes completes, and its log says so as Go would write it', async () => {
  const g = graph('chain', [{ id: 'greet', type: 'greet' }, { id: 'cfg', type: 'configured', config: { answer: 42, nested: { a: [1, 2] } }, effect: 'write' }])
  const run = await client.start(g, { input: { name: 'Ada' }, invocation: { tier: 'premium' }, runId: 'chain-run-1' })
  assert.equal(run, 'chain-run-1')
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st))
  assert.deepEqual(st.state, { name: 'Ada', greeting: 'Hello, Ada!', count: 2, items: ['cfg'] })
  const cfg = st.nodes.cfg.output
  assert.deepEqual(cfg.config, { answer: 42, nested: { a: [1, 2] } })
  assert.deepEqual(cfg.invocation, { tier: 'premium' })
  assert.equal(cfg.key.length, 32)
  assert.equal(cfg.effect, 'write')
  // Go's own fold of the same log agrees.
  const goState = (await h.ask({ op: 'state', run })).state
  assert.equal(goState.status, 'completed')
  assert.deepEqual(goState.state, st.state)
  assert.deepEqual(goState.output, st.output)
  // The worker's events: ids by the formulas, on the queue's subjects.
  const evs = await logOf(run)
  assert.ok(evs.every((e) => e.refused === undefined), 'every event decodes')
  const invoking = ofType(evs, 'node.invoking')
  assert.deepEqual(invoking.map((e) => e.id), [`${run}:invoking:greet/1:1:1`, `${run}:invoking:cfg/1:1:1`])
  assert.deepEqual(ofType(evs, 'node.invoked').map((e) => e.id), [`${run}:invoked:greet/1:1:1`, `${run}:invoked:cfg/1:1:1`])
  for (const e of [...invoking, ...ofType(evs, 'node.invoked')]) {
    assert.equal(e.payload.worker, 'ts-test-worker')
    assert.equal(e.payload.delivery, 1)
  }
  assert.equal(slot(run).length, 2)
})

test('a child run’s node, started by the coordinator on the child’s decision subject, runs on this worker with its config', async () => {
  const g = {
    name: 'parent',
    graphs: { kid: { name: 'kid', nodes: [{ id: 'cfg', type: 'configured', queue, config: { answer: 7 } }], edges: [START('cfg'), { from: 'cfg', to: 'END' }] } },
    nodes: [{ id: 'sub', type: 'subgraph', config: { graph: 'kid' } }],
    edges: [START('sub'), { from: 'sub', to: 'END' }],
  }
  const run = await client.start(g, { invocation: { tier: 'gold' } })
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st))
  const started = ofType(await logOf(run), 'child.started')
  assert.equal(started.length, 1)
  const child = started[0].payload.childRunId
  const kid = await logOf(child)
  assert.equal(kid[0].type, 'dev.weft.run.started.v1')
  assert.equal(kid[0].decision, true, 'the child’s start is a decision')
  assert.equal(kid[0].payload.parent.runId, run)
  const invoked = ofType(kid, 'node.invoked')
  assert.equal(invoked.length, 1)
  assert.deepEqual(invoked[0].payload.output.config, { answer: 7 })
  assert.deepEqual(invoked[0].payload.output.invocation, { tier: 'gold' })
})

test('a run whose input is over 256 KiB runs on this worker: its work item, kept beside the log, is read back from the payloads bucket', async () => {
  const big = 'abc' + 'x'.repeat((300 << 10) - 3)
  const run = await client.start(graph('large-input', [{ id: 'm', type: 'measure', retry: once }]), { input: { big } })
  const st = await client.wait(run, { timeout: 60_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st).slice(0, 2000))
  assert.deepEqual(st.nodes.m.output, { length: big.length, head: 'abc' })
  // The engine did keep a body of this run beside the log (an object
  // named "<run>.<sha256>" in weft-payloads), and the client reads the
  // log back whole, the reference resolved.
  const conn = await connect(h.connectOptions(`weft-worker-${queue}`))
  try {
    const r = await conn.nc.request('$JS.API.STREAM.INFO.OBJ_' + PayloadsBucket, new TextEncoder().encode(JSON.stringify({ subjects_filter: `$O.${PayloadsBucket}.M.>` })), { timeout: 10_000 })
    const info = JSON.parse(new TextDecoder().decode(r.data))
    const names = Object.keys(info.state?.subjects ?? {}).map((s) => Buffer.from(s.split('.').at(-1), 'base64url').toString())
    assert.ok(names.some((n) => n.startsWith(run + '.')), `an object of run ${run} among ${JSON.stringify(names)}`)
  } finally {
    await conn.nc.close()
  }
  const evs = await logOf(run)
  assert.ok(evs.every((e) => e.refused === undefined), 'every event decodes, references resolved')
  const ready = ofType(evs, 'node.ready')
  assert.equal(ready.length, 1)
  assert.ok(JSON.stringify(ready[0].payload).includes(big), 'the work item read back whole')
})

test('a TypeScript node’s output over 256 KiB (2 MB with a state update, 20 MB) is kept beside the log, and Go reads it back byte-equal', async () => {
  for (const [bytes, update] of [[2_000_000, true], [20_000_000, false]]) {
    const t0 = performance.now()
    const run = await client.start(graph(`large-output-${bytes}`, [{ id: 'big', type: 'large', retry: once, config: { bytes, update } }]))
    const st = await client.wait(run, { timeout: 120_000 })
    assert.equal(st.status, 'completed', JSON.stringify(st).slice(0, 2000))
    const want = blob(bytes)
    assert.ok(st.nodes.big.output === want, `${bytes}: the output read back by this SDK`)
    // The invoked event's body is an object of the run in weft-payloads
    // (with a state update, the run's end, the coordinator's, is another),
    // named by the digest of the body the event would have had; Go's
    // client reads that body back: the very bytes this SDK wrote.
    const objects = await objectsOf(run)
    const goEvents = (await h.ask({ op: 'history', run })).events
    const goInvoked = goEvents.filter((e) => e.type === 'dev.weft.node.invoked.v1')
    assert.equal(goInvoked.length, 1)
    assert.equal(goInvoked[0].refused, undefined, `${bytes}: Go reads the body`)
    assert.ok(objects.includes(`${run}.${goInvoked[0].sha256}`), `${bytes}: Go reads the bytes of an object of the run: ${goInvoked[0].sha256} among ${JSON.stringify(objects)}`)
    assert.ok(goInvoked[0].size > bytes, `${bytes}: Go reads ${goInvoked[0].size} bytes`)
    if (update) {
      // And Go's fold takes the state update from it.
      const goState = (await h.ask({ op: 'state', run })).state
      assert.equal(goState.status, 'completed')
      assert.ok(goState.state.blob === want, 'Go’s fold has the update')
    }
    console.log(`${bytes} bytes: run started, completed and read back in ${(performance.now() - t0).toFixed(0)} ms`)
  }
})

// objectsOf lists the names of a run's objects in the payloads bucket.
async function objectsOf(run) {
  const conn = await connect(h.connectOptions(`weft-worker-${queue}`))
  try {
    const r = await conn.nc.request('$JS.API.STREAM.INFO.OBJ_' + PayloadsBucket, new TextEncoder().encode(JSON.stringify({ subjects_filter: `$O.${PayloadsBucket}.M.>` })), { timeout: 10_000 })
    const info = JSON.parse(new TextDecoder().decode(r.data))
    return Object.keys(info.state?.subjects ?? {})
      .map((s) => Buffer.from(s.split('.').at(-1), 'base64url').toString())
      .filter((n) => n.startsWith(run + '.'))
  } finally {
    await conn.nc.close()
  }
}

test('bad nodes get a located failure in the log, and the worker keeps serving', async () => {
  const cases = [
    ['throwString', 'Error', true, /^boom$/],
    ['throwError', 'Error', true, /^outer$/],
    ['bigint', 'ValidationError', false, /encoding the node's output: output\.n: a BigInt \(10n\) is not a JSON value/],
    ['cycle', 'ValidationError', false, /encoding the node's output: output\.list\[0\]\.self: a cycle/],
    ['badUpdate', 'ValidationError', false, /encoding the node's update "when": updates\["when"\]: a function/],
    ['notResult', 'ValidationError', false, /the node returned 42, not a result/],
    ['forever', 'Timeout', true, /^node timed out after 300ms$/],
    ['structured', 'Declined', false, /^card declined$/],
  ]
  const runs = await Promise.all(cases.map(([type]) => client.start(graph(`bad-${type}`, [{ id: 'n', type, retry: once, ...(type === 'forever' ? { timeout: '300ms' } : {}) }]))))
  for (const [i, [type, ftype, retryable, msg]] of cases.entries()) {
    const st = await client.wait(runs[i], { timeout: 30_000 })
    assert.equal(st.status, 'failed', `${type}: ${JSON.stringify(st)}`)
    const failed = ofType(await logOf(runs[i]), 'node.failed').filter((e) => !e.decision)
    assert.equal(failed.length, 1, `${type}: one node.failed from the worker`)
    const f = failed[0].payload.error
    assert.equal(f.type, ftype, `${type}: ${JSON.stringify(f)}`)
    assert.equal(f.retryable, retryable, type)
    assert.match(f.message, msg, type)
    if (type === 'throwError') assert.deepEqual(f.cause, { type: 'Error', message: 'inner', retryable: true })
    if (type === 'structured') assert.deepEqual(f.details, { node: 'n', code: 51 })
  }
  // Still serving.
  const ok = await client.start(graph('after-bad', [{ id: 'g', type: 'greet' }]), { input: { name: 'Bob' } })
  assert.equal((await client.wait(ok, { timeout: 30_000 })).status, 'completed')
})

test('an output over the limit beside the log (64 MiB) gets a located failure, and the worker keeps serving', async () => {
  const run = await client.start(graph('bad-huge', [{ id: 'n', type: 'huge', retry: once }]))
  const st = await client.wait(run, { timeout: 120_000 })
  assert.equal(st.status, 'failed', JSON.stringify(st))
  const failed = ofType(await logOf(run), 'node.failed').filter((e) => !e.decision)
  assert.equal(failed.length, 1, 'one node.failed from the worker')
  const f = failed[0].payload.error
  assert.equal(f.type, 'PayloadTooLarge')
  assert.equal(f.retryable, false)
  assert.match(f.message, new RegExp(`^node "n": its result does not fit in an event: .*node\\.invoked\\.v1 event of run "${run}": a body of \\d+ bytes, the limit beside the log is 67108864$`))
  assert.deepEqual(await objectsOf(run), [], 'nothing kept beside the log')
  const ok = await client.start(graph('after-huge', [{ id: 'g', type: 'greet' }]), { input: { name: 'Eve' } })
  assert.equal((await client.wait(ok, { timeout: 30_000 })).status, 'completed')
})

test('a retryable failure is retried by the coordinator, the next attempt succeeds', async () => {
  const run = await client.start(graph('flaky', [{ id: 'f', type: 'flaky', retry: { maxAttempts: 3, initialInterval: '50ms', jitter: 0 } }]))
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed')
  assert.deepEqual(st.nodes.f.output, { attempt: 2 })
  const evs = await logOf(run)
  assert.deepEqual(ofType(evs, 'node.failed').map((e) => [e.id, e.payload.error.type, e.payload.error.retryable]), [[`${run}:nodefailed:f/1:1:1`, 'Flaky', true]])
  const keys = new Set(ofType(evs, 'node.ready').map((e) => e.payload.idempotencyKey))
  assert.equal(keys.size, 2, 'each attempt has its own idempotency key')
})

test('progress heartbeats are in the log, numbered, rate-limited by the node’s heartbeat', async () => {
  const run = await client.start(graph('progress', [{ id: 'p', type: 'progress', heartbeat: '200ms' }]))
  assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'completed')
  const beats = ofType(await logOf(run), 'node.heartbeat')
  assert.ok(beats.length >= 2 && beats.length <= 4, `heartbeats: ${beats.length}`)
  assert.deepEqual(beats.map((e) => e.id), beats.map((_, i) => `${run}:heartbeat:p/1:1:1:${i + 1}`))
  assert.deepEqual(beats[0].payload.details, { step: 0 })
  assert.ok(beats.every((e, i) => i === 0 || e.payload.details.step > beats[i - 1].payload.details.step))
})

test('a cancelled run aborts its node’s signal; the node is recorded cancelled, by whom and why', async () => {
  const run = await client.start(graph('cancel', [{ id: 'b', type: 'block' }]))
  for (let i = 0; i < 100 && ofType(await logOf(run), 'node.invoking').length === 0; i++) await new Promise((r) => setTimeout(r, 50))
  await client.cancel(run, 'changed my mind')
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'cancelled')
  const c = ofType(await logOf(run), 'node.cancelled')
  assert.equal(c.length, 1)
  assert.deepEqual([c[0].id, c[0].payload.by, c[0].payload.reason], [`${run}:nodecancelled:b/1:1:1`, 'tester', 'changed my mind'])
  await assert.rejects(client.cancel(run, 'again'), /has ended/)
})

test('the node contract: validate, should-execute, hooks, phases, failed and fallback', async () => {
  const run = await client.start(graph('contract', [{ id: 'c', type: 'contract', retry: once }, { id: 'fb', type: 'withFallback', retry: once }]), { input: { n: 21 } })
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st))
  assert.deepEqual(st.nodes.c.output, { prep: 21, exec: 42, after: true })
  assert.deepEqual(st.nodes.fb.output, { fallback: true })
  assert.equal(ofType(await logOf(run), 'node.invoked').at(-1).payload.fallback, true)
  assert.deepEqual(worker.hooks.slice(-2), ['before 21', 'failed Broken'])

  const skip = await client.start(graph('skip', [{ id: 'c', type: 'contract' }]), { input: { n: 0 } })
  await client.wait(skip, { timeout: 30_000 })
  const inv = ofType(await logOf(skip), 'node.invoked')[0].payload
  assert.deepEqual(inv.filters, [{ filter: 'shouldExecute', action: 'skipped' }])
  assert.equal(inv.output, undefined)

  const invalid = await client.start(graph('invalid', [{ id: 'c', type: 'contract' }]), { input: { n: 'x' } })
  assert.equal((await client.wait(invalid, { timeout: 30_000 })).status, 'failed')
  const f = ofType(await logOf(invalid), 'node.failed')[0].payload.error
  assert.deepEqual([f.type, f.retryable, f.message], ['ValidationError', false, 'invalid input: state.n: want a number'])
})

test('input schemas and declared outputs are checked', async () => {
  const run = await client.start(
    graph('schema', [{ id: 'g', type: 'greet', retry: once, inputSchema: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 2 } } } }]),
    { input: { name: 'A' } },
  )
  assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'failed')
  const f = ofType(await logOf(run), 'node.failed')[0].payload.error
  assert.equal(f.type, 'ValidationError')
  assert.match(f.message, /^input does not match its schema: \/name: /)
  assert.deepEqual(f.details.fields.map((x) => x.field), ['/name'])

  const out = await client.start(graph('outputs', [{ id: 'g', type: 'greet', retry: once, outputs: ['greeting'] }]), { input: { name: 'Ada' } })
  await client.wait(out, { timeout: 30_000 })
  const f2 = ofType(await logOf(out), 'node.failed')[0].payload.error
  assert.match(f2.message, /updates state keys the node does not declare as outputs: count/)
})

test('a human node takes a signal', async () => {
  const g = {
    name: 'approval',
    nodes: [{ id: 'approve', type: 'human' }, { id: 'g', type: 'greet', queue }],
    edges: [{ from: 'START', to: 'approve' }, { from: 'approve', to: 'g', when: 'output.approved == true' }, { from: 'g', to: 'END' }],
  }
  const run = await client.start(g, { input: { name: 'Cy' } })
  for (let i = 0; i < 100 && (await client.status(run)).nodes.approve?.status !== 'waiting'; i++) await new Promise((r) => setTimeout(r, 50))
  await client.signal(run, 'approve', { approved: true })
  await client.signal(run, 'approve', { approved: true }) // a retry: the same signal
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed', JSON.stringify(st))
  assert.equal(st.state.greeting, 'Hello, Cy!')
  assert.equal(ofType(await logOf(run), 'signal.received').length, 1)
  await assert.rejects(client.signal(run, 'nope', {}), /has ended/)
})

test('the node’s span joins the run’s trace: read from the work item, written on the outcome', async () => {
  exporter.reset()
  const run = await client.start(graph('traced', [{ id: 'g', type: 'greet' }]), { input: { name: 'Tia' } })
  await client.wait(run, { timeout: 30_000 })
  const evs = await logOf(run)
  const tp = (e) => e.traceParent
  const raw = await client.store.read(run)
  const started = raw.find((e) => e.type === 'dev.weft.run.started.v1')
  const ready = raw.find((e) => e.type === 'dev.weft.node.ready.v1')
  const invoked = raw.find((e) => e.type === 'dev.weft.node.invoked.v1')
  const trace = started.traceParent.split('-')[1]
  assert.match(started.traceParent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
  assert.equal(ready.traceParent.split('-')[1], trace, 'the coordinator carries the run’s trace')
  assert.equal(invoked.traceParent.split('-')[1], trace, 'the outcome carries the run’s trace')
  const span = exporter.getFinishedSpans().find((s) => s.name === 'node g')
  assert.ok(span, 'a node span was recorded')
  assert.equal(span.spanContext().traceId, trace)
  assert.equal(span.parentSpanContext?.spanId ?? span.parentSpanId, ready.traceParent.split('-')[2], 'the node span’s parent is the work item')
  assert.equal(invoked.traceParent.split('-')[2], span.spanContext().spanId, 'the outcome carries the node span')
  void evs
  void tp
})

test('the client refuses what Go refuses', async () => {
  await assert.rejects(client.start(graph('dup', [{ id: 'g', type: 'greet' }]), { runId: 'chain-run-1' }), /already exists/)
  await assert.rejects(client.start(graph('badid', [{ id: 'g', type: 'greet' }]), { runId: 'a.b' }), /invalid id/)
  await assert.rejects(client.start({ name: 'x', nodes: [{ id: 'a', type: 'x', tipe: 1 }], edges: [] }), /tipe: unknown field/)
  await assert.rejects(client.start(graph('input', [{ id: 'g', type: 'greet' }]), { input: [1] }), /input must be a JSON object/)
  await assert.rejects(client.status('no-such-run'), /run not found/)
  await assert.rejects(client.wait('no-such-run'), /run not found/)
})

test('a worker that is stopped drains: the node in flight finishes, and its outcome is in the log', async () => {
  const w2 = new Worker({ connection: h.connectOptions('weft-worker-drain'), queues: ['drain'], name: 'drainer', logger: quiet, drainTimeout: 10_000 })
  w2.handle('drainable', async () => {
    await new Promise((r) => setTimeout(r, 800))
    return { output: { drained: true } }
  })
  const r2 = w2.run({ signals: [] })
  const run = await client.start(graph('drain', [{ id: 'd', type: 'drainable', queue: 'drain' }]))
  for (let i = 0; i < 200 && ofType(await logOf(run), 'node.invoking').length === 0; i++) await new Promise((r) => setTimeout(r, 25))
  w2.stop()
  await r2
  const st = await client.wait(run, { timeout: 30_000 })
  assert.equal(st.status, 'completed')
  assert.deepEqual(st.nodes.d.output, { drained: true })
  assert.equal(w2.stats().succeeded, 1)
})

test('a queue’s concurrency bounds its nodes in flight', async () => {
  let now = 0
  let most = 0
  const w = new Worker({ connection: h.connectOptions('weft-worker-drain'), queues: ['drain'], name: 'bounded', logger: quiet, concurrency: 4, queueConcurrency: { drain: 1 } })
  w.handle('counted', async () => {
    most = Math.max(most, ++now)
    await new Promise((r) => setTimeout(r, 150))
    now--
    return { output: { ok: true } }
  })
  const r = w.run({ signals: [] })
  const runs = await Promise.all([1, 2, 3].map((i) => client.start(graph(`bounded-${i}`, [{ id: 'c', type: 'counted', queue: 'drain' }]))))
  for (const run of runs) assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'completed')
  w.stop()
  await r
  assert.equal(most, 1)
})

test('a node still running when the drain times out is aborted and handed back, and runs again elsewhere', async () => {
  const w = new Worker({ connection: h.connectOptions('weft-worker-drain'), queues: ['drain'], name: 'impatient', logger: quiet, drainTimeout: 300 })
  let aborted
  w.handle('stubborn', (input, ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject((aborted = ctx.signal.reason)))))
  const r = w.run({ signals: [] })
  const run = await client.start(graph('stubborn', [{ id: 's', type: 'stubborn', queue: 'drain' }]))
  for (let i = 0; i < 200 && ofType(await logOf(run), 'node.invoking').length === 0; i++) await new Promise((res) => setTimeout(res, 25))
  w.stop()
  await assert.rejects(r, { name: 'DrainTimeoutError' })
  assert.equal(aborted?.kind, 'drain')
  assert.equal(ofType(await logOf(run), 'node.failed').length, 0, 'nothing recorded for a node given up')
  const w2 = new Worker({ connection: h.connectOptions('weft-worker-drain'), queues: ['drain'], name: 'patient', logger: quiet })
  w2.handle('stubborn', (input) => ({ output: { delivery: input.delivery } }))
  const r2 = w2.run({ signals: [] })
  const st = await client.wait(run, { timeout: 30_000 })
  w2.stop()
  await r2
  assert.equal(st.status, 'completed')
  assert.deepEqual(st.nodes.s.output, { delivery: 2 })
})
