// The ended notices spare the worker's read of whether a run ended
// (src/worker/endwatch.ts; docs/worker-protocol.md, "Ended notices"),
// against a real engine under Weft's roles (internal/sdkharness): its Go
// coordinator publishes a run's notice once the run's end is in the log.
// The reads are counted by the worker's stats (endReads). An item is
// checked when it waited in its queue longer than the worker's staleAfter
// (2 s): here, behind a node that holds the worker's only slot.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Client, connect, Worker } from '../dist/index.js'
import { EndWatch, endWatchMargin } from '../dist/worker/endwatch.js'
import { Harness } from './harness.mjs'

const queue = 'ends'
const staleAfter = 2_000
const quiet = { debug() {}, info() {}, warn() {}, error() {} }
let h
let client
let conn
let worker
let running
let watching
// hold: the running hold node's gate (release opens it), and its start.
let hold = { gate: Promise.resolve(), started() {} }
let release

const graph = (name, type) => ({ name, nodes: [{ id: 'n', type, queue }], edges: [{ from: 'START', to: 'n' }, { from: 'n', to: 'END' }] })
const ofType = (evs, t) => evs.filter((e) => e.type === `dev.weft.${t}.v1`)

// until polls cond (every 50 ms) until it holds, failing after a minute.
async function until(what, cond) {
  const deadline = Date.now() + 60_000
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`waited a minute for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

// queuedItem starts a run of one echo node and waits until its work item
// is in the queue; it resolves with the run and the item's time.
async function queuedItem(name) {
  const run = await client.start(graph(name, 'echo'))
  let at = 0
  await until(`${run}'s work item`, async () => {
    const ready = ofType(await client.events(run), 'node.ready')
    if (ready.length > 0) at = Date.parse(ready[0].time)
    return ready.length > 0
  })
  return { run, at }
}

// holding starts a run whose node holds the worker's only slot until
// released; it resolves once the node runs.
async function holding(name) {
  let started
  const running = new Promise((r) => (started = r))
  hold = { gate: new Promise((r) => (release = r)), started }
  const run = await client.start(graph(name, 'hold'))
  await running
  return run
}

// waited resolves once items made at the times given have waited in the
// queue longer than the worker's staleAfter.
const waited = (...ats) => until('the items to wait past staleAfter', () => Date.now() - Math.max(...ats) > staleAfter + 300)

before(async () => {
  h = await Harness.start({ roles: true, queues: [queue] })
  client = await Client.connect({ connection: h.connectOptions('weft-client'), identity: 'tester' })
  conn = await connect(h.connectOptions(`weft-worker-${queue}`))
  let up
  watching = new Promise((r) => (up = r))
  const logger = { ...quiet, info: (msg) => msg === 'worker running' && up(Date.now()) }
  worker = new Worker({ connection: conn, queues: [queue], concurrency: 1, name: 'ends-worker', logger, drainTimeout: 10_000 })
  worker
    .handle('echo', () => ({ output: { ok: true } }))
    .handle('hold', async () => {
      const { gate, started } = hold
      started()
      await gate
      return { output: { held: true } }
    })
  running = worker.run({ signals: [] })
})

after(async () => {
  release?.()
  worker?.stop()
  await running?.catch(() => undefined)
  await conn?.nc.close()
  await client?.close()
  await h?.stop()
})

test('an item of a run that ended while it waited is passed over with node.cancelled, and a live run’s item runs, neither with a read', async () => {
  // Items stored past the watch's clock margin from when it began.
  const since = await watching
  await until('the watch’s clock margin to pass', () => Date.now() - since > endWatchMargin + 200)
  const first = await holding('hold-1')
  const ended = await queuedItem('ends-while-waiting')
  const live = await queuedItem('live-while-waiting')
  await client.cancel(ended.run, 'ended while its item waited')
  assert.equal((await client.wait(ended.run, { timeout: 30_000 })).status, 'cancelled')
  await waited(ended.at, live.at)
  release()
  for (const run of [first, live.run]) assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'completed', run)
  let evs = []
  // The worker's outcome of the ended run's item: node.cancelled, for
  // the run's end or (had it taken the run for live) for the cancel
  // request it heard, or node.invoking.
  await until('the worker’s outcome of the ended run’s item', async () => {
    evs = await client.events(ended.run)
    return ofType(evs, 'node.invoking').length > 0 || ofType(evs, 'node.cancelled').length > 0
  })
  const c = ofType(evs, 'node.cancelled')[0]
  assert.equal(c?.payload.by, 'worker', JSON.stringify(c))
  assert.equal(c.payload.reason, 'run ended before the work started')
  assert.equal(ofType(evs, 'node.invoking').length, 0, 'the ended run’s node was not started')
  assert.equal(ofType(await client.events(live.run), 'node.invoked').length, 1)
  assert.equal(worker.stats().endReads, 0, 'no read of whether a run ended')
})

test('after a reconnection the worker reads again (notices may have been lost), then the watch vouches again', async () => {
  const before = worker.stats().endReads
  const back = (async () => {
    for await (const s of conn.nc.status()) if (s.type === 'reconnect') return
  })()
  await conn.nc.reconnect()
  await back
  const second = await holding('hold-2')
  const live = await queuedItem('live-after-reconnect')
  await waited(live.at)
  release()
  for (const run of [second, live.run]) assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'completed', run)
  assert.equal(worker.stats().endReads, before + 1, 'the item after the reconnection is read for')
  // The watch began again at that check: an item stored past its margin
  // is vouched for again.
  const restarted = Date.now()
  await until('the restarted watch’s clock margin to pass', () => Date.now() - restarted > endWatchMargin + 200)
  const third = await holding('hold-3')
  const again = await queuedItem('live-after-restart')
  await waited(again.at)
  release()
  for (const run of [third, again.run]) assert.equal((await client.wait(run, { timeout: 30_000 })).status, 'completed', run)
  assert.equal(worker.stats().endReads, before + 1, 'no read once the watch began again')
})

test('a user who may not subscribe to the notices gets no watch, and its connection works on', async () => {
  // weft-client's role may not subscribe to weft.ended.> (as a worker's
  // role generated before the notices); a worker's role may.
  const refused = await connect(h.connectOptions('weft-client'))
  try {
    assert.equal(await EndWatch.start(refused.nc), undefined, 'no watch when the subscription is refused')
    await refused.nc.flush()
    assert.equal(refused.nc.isClosed(), false)
  } finally {
    await refused.nc.close()
  }
  const allowed = await connect(h.connectOptions(`weft-worker-${queue}`))
  try {
    const w = await EndWatch.start(allowed.nc)
    assert.notEqual(w, undefined, 'a watch when the subscription is allowed')
    assert.equal(w.knows('some-run', Date.now() + 60_000).vouched, true, 'it vouches for an item stored later')
    w.stop()
  } finally {
    await allowed.nc.close()
  }
})
