#!/usr/bin/env node
// The chaos test's side-effecting worker in TypeScript: the same "ledger"
// node as the Go one (internal/reliability/ledgerworker, whose package doc
// says what the node does), on this SDK, talking to the same ledger, so
// that the TypeScript variant of the chaos test (TestChaosTypeScript,
// make chaos-ts) runs it beside the Go workers and SIGKILLs it like them.
//
// The node writes its attempt's idempotency key to the ledger, a
// JetStream KV bucket on the same cluster, with a create that the server
// refuses for a key that is there; records every attempt to write, with
// what the ledger answered, on a subject of its own; fails retryably
// before or after its effect by ledger.Rule (FNV-1a of the key, for
// attempts 1 and 2); and adds config.add, or local.item for a mapped
// node, to the run's state key "total", with the output {"add": n}.
//
// Flags are the Go worker's: -nats URLS, -name, -queue (ledger),
// -concurrency (16), -ack-wait (the queue's, when it creates it),
// -bucket (chaos_ledger), -writes (chaos.writes); -replicas is accepted
// and ignored. The worker's credentials come from WEFT_NATS_USER and
// WEFT_NATS_PASSWORD; with WEFT_LEDGER_NATS_USER and
// WEFT_LEDGER_NATS_PASSWORD set the ledger is reached over a second
// connection as that user (an external system to the engine), else over
// the worker's.

import { jetstream, type JetStreamClient, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { connect, type Connection, consoleLogger, type Input, type Logger, nonRetryable, retryable, Worker } from '../index.js'
import { Flags } from '../internal/flags.js'
import { errorMessage, sleep } from '../internal/util.js'

const Bucket = 'chaos_ledger'
const WritesSubj = 'chaos.writes'
const Queue = 'ledger'
const NodeType = 'ledger'
/** maxFailingAttempt is the last attempt the rule may fail (ledger.MaxFailingAttempt). */
const maxFailingAttempt = 2

type Outcome = 'succeed' | 'failBefore' | 'failAfter'

/** rule is ledger.Rule: what an attempt with this key does. */
export function rule(key: string, attempt: number): Outcome {
  if (attempt > maxFailingAttempt) return 'succeed'
  let h = 0x811c9dc5
  for (const b of new TextEncoder().encode(key)) {
    h ^= b
    h = Math.imul(h, 0x01000193) >>> 0
  }
  switch (h % 10) {
    case 0:
    case 1:
      return 'failBefore'
    case 2:
    case 3:
      return 'failAfter'
  }
  return 'succeed'
}

/** Entry is ledger.Entry, field for field (encoded in the same order). */
interface Entry {
  run: string
  node: string
  iteration: number
  item?: number
  attempt: number
  delivery: number
  worker: string
  process: string
}

function same(a: Entry, b: Entry): boolean {
  return (
    a.run === b.run &&
    a.node === b.node &&
    a.iteration === b.iteration &&
    (a.item ?? null) === (b.item ?? null) &&
    a.attempt === b.attempt &&
    a.delivery === b.delivery &&
    a.worker === b.worker &&
    a.process === b.process
  )
}

/** connectRetrying connects, trying again while no server of the list answers (a cluster node may be down). */
async function connectRetrying(o: Parameters<typeof connect>[0], log: Logger): Promise<Connection> {
  for (let wait = 100; ; wait = Math.min(2 * wait, 2_000)) {
    try {
      return await connect(o)
    } catch (err) {
      log.warn('connecting', { name: o?.name, error: errorMessage(err) })
      await sleep(wait)
    }
  }
}

class Ledger {
  constructor(
    private readonly kv: KV,
    private readonly js: JetStreamClient,
    private readonly writes: string,
    private readonly log: Logger,
  ) {}

  /**
   * write creates the key in the ledger, trying again while the cluster is
   * unavailable (a create that timed out may have landed: the entry then
   * says it is this delivery's own), and records the attempt.
   */
  async write(key: string, e: Entry, signal: AbortSignal): Promise<void> {
    const body = JSON.stringify(e)
    const rec: { key: string; entry: Entry; result: string; prior?: Entry } = { key, entry: e, result: '' }
    for (let wait = 50; ; wait = Math.min(2 * wait, 1_000)) {
      let err: unknown
      try {
        await this.kv.create(key, body)
        rec.result = 'created'
        break
      } catch (e1) {
        err = e1
      }
      if (err instanceof JetStreamApiError && (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)) {
        try {
          const prior = await this.kv.get(key)
          if (prior !== null) {
            const p = prior.json<Entry>()
            if (same(p, e)) rec.result = 'created' // our own create, retried
            else {
              rec.result = 'exists'
              rec.prior = p
            }
            break
          }
          err = new Error('the key exists, yet reads as missing')
        } catch (gerr) {
          this.log.warn('ledger get', { key, error: errorMessage(gerr) })
          err = gerr
        }
      }
      if (signal.aborted) throw signal.reason
      this.log.warn('ledger create', { key, error: errorMessage(err) })
      await sleep(wait, signal)
    }
    // The record is for the test's eyes; a lost one is not an error of the
    // node (the ledger entry is what counts).
    const out = JSON.stringify(rec)
    for (let tries = 0; tries < 10; tries++) {
      try {
        await this.js.publish(this.writes, out, { timeout: 3_000 })
        return
      } catch (perr) {
        if (tries === 9) this.log.warn('recording a ledger write', { key, error: errorMessage(perr) })
        await sleep(200)
      }
    }
  }
}

async function main(): Promise<void> {
  const f = Flags.parse(process.argv.slice(2), ['nats', 'name', 'queue', 'concurrency', 'ack-wait', 'bucket', 'writes', 'replicas'])
  const log = consoleLogger('info')
  const url = f.string('nats', process.env['WEFT_NATS_URL'] ?? '')
  const name = f.string('name')
  const conn = await connectRetrying({ url, name: `weft-ts-ledgerworker ${name}` }, log)
  let ledgerConn = conn
  const user = process.env['WEFT_LEDGER_NATS_USER'] ?? ''
  if (user !== '') {
    ledgerConn = await connectRetrying({ url, user, password: process.env['WEFT_LEDGER_NATS_PASSWORD'] ?? '', name: `weft-ts-ledgerworker ledger ${name}`, env: {} }, log)
  }
  // The ledger's user may read and write its bucket and nothing else: no
  // account info (checkAPI), no stream info (the bucket is bound as it is).
  const js = jetstream(ledgerConn.nc, { checkAPI: false, timeout: 3_000 })
  const kv = await new Kvm(js).open(f.string('bucket', Bucket), { allow_direct: true })
  const ledger = new Ledger(kv, js, f.string('writes', WritesSubj), log)

  const ackWait = f.ms('ack-wait', 0)
  const w = new Worker({
    queues: [f.string('queue', Queue)],
    concurrency: f.int('concurrency', 16),
    ...(name !== '' ? { name } : {}),
    ...(ackWait > 0 ? { ackWait } : {}),
    logger: log,
    connection: conn,
  })
  const proc = `${process.pid}-${Date.now().toString(36)}`
  w.handle(NodeType, async (input: Input<Record<string, unknown>, { add?: unknown } | undefined>, ctx) => {
    let add: number
    const cfg = input.config
    if (cfg !== undefined && cfg !== null && typeof cfg === 'object' && cfg.add !== undefined && cfg.add !== null) {
      if (typeof cfg.add !== 'number') throw nonRetryable('ValidationError', 'ledger config: add: want a number')
      add = cfg.add
    } else {
      const item = (input.local as { item?: unknown } | null | undefined)?.item
      if (typeof item !== 'number') throw nonRetryable('ValidationError', `ledger: no config.add and no numeric local.item (local ${JSON.stringify(input.local)})`)
      add = item
    }
    const key = input.idempotencyKey
    const r = rule(key, input.attempt)
    if (r === 'failBefore') throw retryable('ChaosBefore', 'failing before the effect, by rule')
    const e: Entry = { run: input.runId, node: input.nodeId, iteration: input.iteration, ...(input.item !== undefined ? { item: input.item } : {}), attempt: input.attempt, delivery: input.delivery, worker: w.name, process: proc }
    await ledger.write(key, e, ctx.signal)
    if (r === 'failAfter') throw retryable('ChaosAfter', 'failing after the effect, by rule')
    return { output: { add }, updates: { total: add } }
  })
  try {
    await w.run()
  } finally {
    if (ledgerConn !== conn) await ledgerConn.nc.drain().catch(() => ledgerConn.nc.close())
    await conn.nc.drain().catch(() => conn.nc.close())
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`ts-ledgerworker: ${errorMessage(err)}\n`)
    process.exit(1)
  },
)
