#!/usr/bin/env node
// weftbench's Node floor (internal/bench, the "typescript" figure): the
// least a worker in Node does per work item on the NATS team's client, to
// tell the SDK's own cost from Node's and the client's. Per item it reads
// the node-ready's JSON (no envelope checks), appends node-invoking and
// node-invoked (the SDK's encoders, the same bytes as the SDK's worker
// writes), and double-acks the item; no run start, no span, no timers, no
// slots. It pulls batches of -concurrency items.
//
// Flags: -nats URL, -stream, -queue (default), -concurrency (16). It runs
// until SIGTERM.

import { jetstream, type JsMsg } from '@nats-io/jetstream'
import { headers as natsHeaders } from '@nats-io/nats-core'
import { connect, decisionId, encode, ensureQueue, EventType, newEvent, refKey, Store, type WeftEvent } from '../index.js'
import { encodeNodeInvoked, encodeNodeInvoking, type NodeReadyData } from '../events/payloads.js'
import { Flags } from '../internal/flags.js'
import { errorMessage } from '../internal/util.js'

async function main(): Promise<void> {
  const f = Flags.parse(process.argv.slice(2), ['nats', 'stream', 'queue', 'concurrency', 'name'])
  const queue = f.string('queue', 'default')
  const conn = await connect({ url: f.string('nats', process.env['WEFT_NATS_URL'] ?? ''), name: 'weftbench node floor' })
  const store = await Store.open(conn, { ...(f.string('stream') !== '' ? { stream: f.string('stream') } : {}) })
  await ensureQueue(store, queue, 0)
  const consumer = await jetstream(conn.nc).consumers.get(store.stream, `work-${queue}`)
  const dec = new TextDecoder()
  const append = async (ev: WeftEvent) => {
    const w = encode(ev)
    const h = natsHeaders()
    for (const [k, v] of w.headers) h.set(k, v)
    await conn.nc.request(w.subject, w.data, { headers: h, timeout: 10_000 })
  }
  const handle = async (m: JsMsg) => {
    const r = JSON.parse(dec.decode(m.data)) as NodeReadyData
    const run = m.headers?.get('ce-runid') ?? ''
    const delivery = m.info.deliveryCount
    const ref = { node: r.node, iteration: r.iteration ?? 0 }
    const at = [refKey(ref), String(r.attempt), String(delivery)]
    const common = { runId: run, nodeId: r.node, attempt: r.attempt, queue }
    await append(newEvent({ ...common, id: decisionId(run, EventType.NodeInvoking, ...at), type: EventType.NodeInvoking, data: encodeNodeInvoking({ ...ref, attempt: r.attempt, delivery, worker: 'node-floor' }) }))
    await append(
      newEvent({
        ...common,
        id: decisionId(run, EventType.NodeInvoked, ...at),
        type: EventType.NodeInvoked,
        data: encodeNodeInvoked({ ...ref, attempt: r.attempt, delivery, updates: [], actions: [], filters: [], durationMs: 0, worker: 'node-floor', fallback: false }),
      }),
    )
    await m.ackAck()
  }
  let stopping = false
  process.on('SIGTERM', () => {
    stopping = true
  })
  const max = f.int('concurrency', 16)
  while (!stopping) {
    const batch = await consumer.fetch({ max_messages: max, expires: 1_000 })
    for await (const m of batch) void handle(m).catch((err: unknown) => process.stderr.write(`node floor: ${errorMessage(err)}\n`))
  }
  await conn.nc.drain()
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`weftbench node floor: ${errorMessage(err)}\n`)
    process.exit(1)
  },
)
