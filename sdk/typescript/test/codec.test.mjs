// The wire codec against Go's: every event the SDK writes is decoded by
// pkg/events, built anew from its payload with events.New and encoded by
// the Go hot path (internal/sdkharness "wire"); subject, every header and
// the body must be byte for byte what the SDK wrote. Ids, slots and keys
// against the protocol's worked examples.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { encode, decode, newEvent, EventType, decisionId, idempotencyKey, slot, newRunId, newNonce, marshalJSON, NotJSONError, startedSubject, childStartedSubject, graphDigest } from '../dist/index.js'
import {
  encodeHeartbeat,
  encodeNodeCancelled,
  encodeNodeFailed,
  encodeNodeInvoked,
  encodeNodeInvoking,
  encodeRunCancelRequested,
  encodeRunStarted,
  encodeSignalReceived,
} from '../dist/events/payloads.js'
import { formatDuration, parseDuration } from '../dist/internal/duration.js'
import { Harness } from './harness.mjs'

let go
before(async () => {
  go = await Harness.start({ engine: false })
})
after(() => go?.stop())

const run = '06h1c2dq3sbkce9j5fmrq0k7tg'
const tricky = 'a <b> & "c" \\ \u2028\u2029 \u0001\b\f\n\r\t é 😀 \u007f'

async function sameAsGo(ev) {
  const w = encode(ev)
  const headers = {}
  for (const [k, v] of w.headers) (headers[k] ??= []).push(v)
  const got = await go.ask({ op: 'wire', subject: w.subject, headers, data: Buffer.from(w.data).toString('base64') })
  assert.equal(got.decodeError, undefined, `Go could not decode the ${ev.type}: ${got.decodeError}`)
  assert.equal(got.error, undefined, got.error)
  assert.deepEqual(got.diffs ?? [], [], `${ev.type}: Go writes it otherwise`)
}

function traced(ev) {
  ev.traceParent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  ev.traceState = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'
  return ev
}

const ref = { node: 'charge', iteration: 1 }
const mapped = { node: 'charge', iteration: 2, item: 7 }

test('a worker’s events are written as Go writes them', async () => {
  const out = {
    z: 1,
    a: [1.5, 1e21, 1e-7, -0, 0.1, 12345678901234, 1e20, 2.5e-300],
    é: tricky,
    '😀': null,
    ﬀ: true,
    'a<b>': { nested: { y: 'x', b: [] } },
  }
  const cases = [
    newEvent({ runId: run, id: decisionId(run, EventType.NodeInvoking, 'charge/1', '3', '2'), type: EventType.NodeInvoking, nodeId: 'charge', attempt: 3, queue: 'default', data: encodeNodeInvoking({ ...ref, attempt: 3, delivery: 2, worker: 'host-1' }) }),
    newEvent({ runId: run, id: 'x1', type: EventType.NodeInvoking, nodeId: 'charge', attempt: 1, queue: 'q-1', data: encodeNodeInvoking({ ...mapped, attempt: 1, delivery: 1, worker: tricky, filters: [{ filter: 'f', action: 'passed' }, { filter: 'g', action: 'modified', note: tricky }] }) }),
    newEvent({
      runId: run,
      id: 'x2',
      type: EventType.NodeInvoked,
      nodeId: 'charge',
      attempt: 1,
      queue: 'default',
      data: encodeNodeInvoked({
        ...mapped,
        attempt: 1,
        delivery: 3,
        output: marshalJSON(out),
        updates: [['zeta', marshalJSON([1, 'two'])], ['alpha', marshalJSON({ b: 2, a: 1 })], ['é', '"x"']],
        actions: [{ name: 'approve', data: marshalJSON({ why: tricky }) }, { name: 'other' }],
        filters: [{ filter: 'shouldExecute', action: 'skipped' }],
        durationMs: 1234,
        worker: 'w',
        fallback: true,
      }),
    }),
    newEvent({ runId: run, id: 'x3', type: EventType.NodeInvoked, nodeId: 'charge', attempt: 2, queue: 'default', data: encodeNodeInvoked({ ...ref, attempt: 2, delivery: 1, durationMs: 0, worker: 'w' }) }),
    newEvent({
      runId: run,
      id: 'x4',
      type: EventType.NodeFailed,
      nodeId: 'charge',
      attempt: 1,
      queue: 'default',
      data: encodeNodeFailed({
        ...ref,
        attempt: 1,
        delivery: 1,
        durationMs: 5,
        worker: 'w',
        error: { type: 'ConfFatal', message: tricky, retryable: false, details: { node: 'a', list: [1, 2.25] }, cause: { type: 'Error', message: 'inner', retryable: true, cause: { type: 'Timeout', message: 'deep', retryable: true } } },
      }),
    }),
    newEvent({ runId: run, id: 'x5', type: EventType.NodeCancelled, nodeId: 'charge', attempt: 4, queue: 'default', data: encodeNodeCancelled({ ...ref, attempt: 4, delivery: 2, by: 'ada@host', reason: tricky }) }),
    newEvent({ runId: run, id: 'x6', type: EventType.NodeCancelled, nodeId: 'charge', attempt: 1, queue: 'default', data: encodeNodeCancelled({ ...ref, attempt: 1, delivery: 1, by: 'worker', reason: '' }) }),
    newEvent({ runId: run, id: 'x7', type: EventType.Heartbeat, nodeId: 'charge', attempt: 1, queue: 'default', data: encodeHeartbeat({ ...mapped, attempt: 1, details: marshalJSON({ step: 3, note: tricky }) }) }),
    newEvent({ runId: run, id: 'x8', type: EventType.Heartbeat, nodeId: 'charge', attempt: 1, queue: 'default', data: encodeHeartbeat({ ...ref, attempt: 1 }) }),
  ]
  for (const ev of cases) await sameAsGo(ev)
  for (const ev of cases) await sameAsGo(traced(ev))
})

test('a client’s events are written as Go writes them', async () => {
  const graph = '{"name":"g","maxIterations":100,"nodes":[{"id":"a","type":"x"}],"edges":[]}'
  const cases = [
    newEvent({ runId: run, id: run, type: EventType.RunStarted, data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph }) }),
    newEvent({
      runId: run,
      id: run,
      type: EventType.RunStarted,
      data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph, input: marshalJSON({ name: tricky, n: 1 }), invocation: marshalJSON({ tier: 'premium' }), startedBy: 'ada@host', retention: '720h0m0s' }),
    }),
    newEvent({ runId: run, id: run, type: EventType.RunStarted, data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph, startedBy: 'ada@host', nonce: newNonce() }) }),
    newEvent({ runId: run, id: `${run}:cancelreq:`, type: EventType.RunCancelRequested, data: encodeRunCancelRequested({ by: 'ada', reason: tricky }) }),
    newEvent({ runId: run, id: `${run}:cancelreq:terminate`, type: EventType.RunCancelRequested, data: encodeRunCancelRequested({ by: 'ada', terminate: true }) }),
    newEvent({ runId: run, id: `${run}:signal:s-1`, type: EventType.SignalReceived, nodeId: 'approve', data: encodeSignalReceived({ node: 'approve', data: marshalJSON({ ok: true }), by: 'ada' }) }),
    newEvent({ runId: run, id: `${run}:signal:s-2`, type: EventType.SignalReceived, nodeId: 'approve', data: encodeSignalReceived({ node: 'approve' }) }),
  ]
  for (const ev of cases) await sameAsGo(ev)
  for (const ev of cases) await sameAsGo(traced(ev))
})

test('only a child run’s start, on its decision subject, may name a parent', () => {
  const graph = '{"name":"g","nodes":[],"edges":[]}'
  const body = (parent) => Buffer.from(JSON.stringify({ graphName: 'g', graphDigest: graphDigest(graph), graph: JSON.parse(graph), ...(parent ? { parent } : {}) }))
  const w = encode(newEvent({ runId: run, id: run, type: EventType.RunStarted, data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph }) }))
  const parent = { runId: 'victim1', ref: { node: 'child', iteration: 1 } }
  const hdr = new Map(w.headers)
  const reader = { keys: () => [...hdr.keys()], get: (k) => hdr.get(k) ?? '' }
  // A client's start naming a parent: someone passing a run off as another run's child.
  assert.throws(() => decode(startedSubject(run), reader, body(parent)), (err) => err.code === 'Misplaced' && /victim1/.test(err.message))
  // The coordinator's child start is read; one there that names no parent is not.
  assert.equal(decode(childStartedSubject(run), reader, body(parent)).type, EventType.RunStarted)
  assert.equal(decode(childStartedSubject(run), reader, body(parent)).decision, true)
  assert.throws(() => decode(childStartedSubject(run), reader, body(undefined)), (err) => err.code === 'Misplaced')
  assert.equal(decode(startedSubject(run), reader, body(undefined)).type, EventType.RunStarted)
  assert.match(newNonce(), /^[0-9a-v]{26}$/)
})

test('only the engine’s start, on the run’s decision subject, may name a schedule or trigger', () => {
  const graph = '{"name":"g","nodes":[],"edges":[]}'
  const body = (extra) => Buffer.from(JSON.stringify({ graphName: 'g', graphDigest: graphDigest(graph), graph: JSON.parse(graph), ...extra }))
  const w = encode(newEvent({ runId: run, id: run, type: EventType.RunStarted, data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph }) }))
  const trigger = { kind: 'schedule', name: 'nightly', fireTime: '2026-05-01T02:00:00Z' }
  const parent = { runId: 'victim1', ref: { node: 'child', iteration: 1 } }
  const hdr = new Map(w.headers)
  const reader = { keys: () => [...hdr.keys()], get: (k) => hdr.get(k) ?? '' }
  // A client's start naming a schedule: someone passing a run off as the schedule's (Go's TriggerClaimError).
  assert.throws(() => decode(startedSubject(run), reader, body({ trigger })), (err) => err.code === 'Misplaced' && /nightly/.test(err.message))
  // The engine's start of the schedule's run is read, as a decision.
  assert.equal(decode(childStartedSubject(run), reader, body({ trigger })).decision, true)
  // Naming both a parent and a trigger is no start at all.
  assert.throws(() => decode(childStartedSubject(run), reader, body({ trigger, parent })), (err) => err.code === 'Misplaced')
})

test('a run’s start is read only under its own graph’s digest', () => {
  const graph = '{"name":"g","nodes":[{"id":"a","type":"x","config":{"who":"victim"}}],"edges":[]}'
  const evil = '{"name":"g","nodes":[{"id":"a","type":"x","config":{"who":"attacker"}}],"edges":[]}'
  const w = encode(newEvent({ runId: run, id: run, type: EventType.RunStarted, data: encodeRunStarted({ graphName: 'g', graphDigest: graphDigest(graph), graph }) }))
  const hdr = new Map(w.headers)
  const reader = { keys: () => [...hdr.keys()], get: (k) => hdr.get(k) ?? '' }
  assert.equal(decode(startedSubject(run), reader, w.data).type, EventType.RunStarted)
  // The victim's digest over the attacker's graph (Go: GraphDigestError).
  const forged = Buffer.from(`{"graphName":"g","graphDigest":${JSON.stringify(graphDigest(graph))},"graph":${evil}}`)
  assert.throws(() => decode(startedSubject(run), reader, forged), (err) => err.code === 'MalformedEvent' && /graph digest mismatch/.test(err.message))
  // A duplicate member: JSON.parse, as Go, reads the last one; so does the check.
  const dup = Buffer.from(`{"graphName":"g","graphDigest":${JSON.stringify(graphDigest(graph))},"graph":${graph},"graph":${evil}}`)
  assert.throws(() => decode(startedSubject(run), reader, dup), (err) => err.code === 'MalformedEvent')
})

test('times are written as Go’s RFC 3339 with nanoseconds', async () => {
  for (const ms of [0, 1, 10, 100, 120, 999]) {
    const ev = newEvent({ runId: run, id: 't', type: EventType.Heartbeat, nodeId: 'charge', attempt: 1, queue: 'q', time: new Date(Date.UTC(2026, 10, 23, 10, 0, 0, ms)), data: encodeHeartbeat({ ...ref, attempt: 1 }) })
    await sameAsGo(ev)
  }
})

test('ids, slots and idempotency keys follow the protocol’s formulas', () => {
  assert.equal(slot(run), '0a')
  assert.equal(decisionId(run, EventType.NodeInvoking, 'charge/1', '3', '2'), '06h1c2dq3sbkce9j5fmrq0k7tg:invoking:charge/1:3:2')
  assert.equal(decisionId(run, EventType.NodeFailed, 'charge/1', '3', '2'), '06h1c2dq3sbkce9j5fmrq0k7tg:nodefailed:charge/1:3:2')
  assert.equal(decisionId(run, EventType.Heartbeat, 'charge/1', '3', '2', '1'), '06h1c2dq3sbkce9j5fmrq0k7tg:heartbeat:charge/1:3:2:1')
  assert.equal(decisionId(run, EventType.RunCancelRequested), '06h1c2dq3sbkce9j5fmrq0k7tg:cancelreq:')
  assert.equal(idempotencyKey(run, ref, 3), 'dc1841be1a505081ca6ff94e322d1a07')
  assert.equal(idempotencyKey(run, { node: 'charge', iteration: 1, item: 2 }, 3), 'e4944459484f393f6e0b13d982e5a7d4')
  const id = newRunId()
  assert.match(id, /^[0-9a-v]{26}$/)
  // The first 48 bits are the milliseconds (the first 9 characters hold
  // 45 of them); within one millisecond the rest is random.
  const later = newRunId()
  assert.ok(later.slice(0, 9) >= id.slice(0, 9), `run ids sort by time: ${later} after ${id}`)
})

test('values that are not JSON are refused with where they are', () => {
  const cycle = { a: {} }
  cycle.a.self = cycle
  for (const [v, path] of [
    [{ a: [1, 2n] }, 'output.a[1]'],
    [cycle, 'output.a.self'],
    [{ x: NaN }, 'output.x'],
    [{ g: () => 1 }, 'output.g'],
    [new Map(), 'output'],
    [{ 'odd key': Symbol('s') }, 'output["odd key"]'],
  ]) {
    assert.throws(() => marshalJSON(v, 'output'), (e) => e instanceof NotJSONError && e.path === path, `${path}`)
  }
  assert.equal(marshalJSON({ b: undefined, a: [undefined], d: new Date(0) }), '{"a":[null],"d":"1970-01-01T00:00:00.000Z"}')
})

test('durations are Go’s', () => {
  for (const [s, want] of [
    ['90s', '1m30s'],
    ['1.5s', '1.5s'],
    ['250ms', '250ms'],
    ['1h', '1h0m0s'],
    ['720h', '720h0m0s'],
    ['2us', '2µs'],
    ['1ns', '1ns'],
    ['0', '0s'],
    ['1h2m3.004s', '1h2m3.004s'],
    ['-1.5m', '-1m30s'],
  ]) {
    assert.equal(formatDuration(parseDuration(s)), want, s)
  }
  assert.throws(() => parseDuration('5'))
  assert.throws(() => parseDuration('1x'))
})
