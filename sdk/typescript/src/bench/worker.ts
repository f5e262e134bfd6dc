#!/usr/bin/env node
// weftbench's TypeScript worker (internal/bench, the "typescript"
// figure): the node types the benchmark's chains use, done as the Go
// worker's built-in executors do them, so that the figure measures the
// SDK's own work per node (pull, decode, the run's start, appends, ack):
//
//   noop   succeeds with no output
//   echo   outputs its input state
//
// Flags: -nats URL (else WEFT_NATS_URL), -stream (else WEFT_STREAM),
// -queue (default "default"), -concurrency (16), -name. It runs until
// SIGTERM or SIGINT, then drains.

import { consoleLogger, Worker } from '../index.js'
import { Flags } from '../internal/flags.js'
import { errorMessage } from '../internal/util.js'

async function main(): Promise<void> {
  const f = Flags.parse(process.argv.slice(2), ['nats', 'stream', 'queue', 'concurrency', 'name'])
  const name = f.string('name')
  const stream = f.string('stream')
  const w = new Worker({
    queues: [f.string('queue', 'default')],
    concurrency: f.int('concurrency', 16),
    drainTimeout: 5_000,
    logger: consoleLogger('warn'),
    connection: { url: f.string('nats', process.env['WEFT_NATS_URL'] ?? ''), name: `weftbench ts worker ${name}` },
    ...(name !== '' ? { name } : {}),
    ...(stream !== '' ? { stream } : {}),
  })
  w.handle('noop', () => ({}))
  w.handle('echo', (input) => ({ output: input.state }))
  await w.run()
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`weftbench ts worker: ${errorMessage(err)}\n`)
    process.exit(1)
  },
)
