// The TypeScript side of examples/ts-worker/mixed.yaml: a worker of the
// task queue "ts" with two node types, on @weft/sdk (sdk/typescript, a
// file: dependency). It connects as WEFT_NATS_URL, WEFT_NATS_USER and
// WEFT_NATS_PASSWORD say (weft dev: nats://127.0.0.1:4222, no user) and
// runs until SIGTERM or SIGINT, then drains.
import { nonRetryable, Worker } from '@weft/sdk'

const worker = new Worker({ queues: ['ts'], concurrency: 8, name: process.env['WEFT_WORKER_NAME'] || 'ts-example' })

// wordstats counts the words of state.text and names the longest.
worker.handle<{ text: string }>('wordstats', (input) => {
  const words = input.state.text.split(/\s+/).filter((w) => w !== '')
  if (words.length === 0) throw nonRetryable('ValidationError', 'state.text has no words')
  const longest = words.reduce((a, b) => (b.length > a.length ? b : a))
  return { output: { words: words.length, longest }, updates: { words: words.length, longest } }
})

// slugify turns state.text into a slug for a file name or a URL.
worker.handle<{ text: string }>('slugify', (input) => {
  const slug = String(input.state.text ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
  return { updates: { slug } }
})

await worker.run()
