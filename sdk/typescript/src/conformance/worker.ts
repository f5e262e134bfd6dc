#!/usr/bin/env node
// The TypeScript SDK's conformance worker (docs/conformance.md): it
// registers the kit's node types on the queue WEFT_QUEUE, connects with
// WEFT_NATS_URL, WEFT_NATS_USER and WEFT_NATS_PASSWORD (or WEFT_NATS_CREDS),
// announces itself as WEFT_WORKER_NAME, and runs until SIGTERM (a graceful
// drain, then exit 0) or SIGKILL.
//
//   weft conformance -worker 'node sdk/typescript/dist/conformance/worker.js'

import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs'
import { consoleLogger, type Input, type NodeContext, nonRetryable, retryable, Worker } from '../index.js'

function cfg<T extends object>(input: Input): Partial<T> {
  const c: unknown = input.config
  if (c === undefined || c === null) return {}
  if (typeof c !== 'object' || Array.isArray(c)) throw nonRetryable('ValidationError', 'config: not an object')
  return c as Partial<T>
}

function num(v: unknown, what: string): number {
  if (v === undefined || v === null) return 0
  if (typeof v !== 'number' || !Number.isInteger(v)) throw nonRetryable('ValidationError', `config: ${what}: want an integer`)
  return v
}

/** sleep waits ms, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(t)
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** appendLine appends line and a newline to the file at path, synced. */
function appendLine(path: string, line: string): void {
  const fd = openSync(path, 'a', 0o644)
  try {
    writeSync(fd, line + '\n')
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

async function slow(input: Input, ctx: NodeContext): Promise<{ output: unknown }> {
  const c = cfg<{ ms: number; beatMs: number; noBeat: boolean }>(input)
  const ms = num(c.ms, 'ms')
  const beatMs = num(c.beatMs, 'beatMs')
  let timer: NodeJS.Timeout | undefined
  if (c.noBeat !== true && beatMs > 0) {
    let step = 0
    const beat = () => void ctx.heartbeat({ step: step++ }).catch((err: unknown) => ctx.log.warn('heartbeat', { error: String(err) }))
    beat()
    timer = setInterval(beat, beatMs)
  }
  try {
    await sleep(ms, ctx.signal)
  } finally {
    clearInterval(timer)
  }
  return { output: { slept: ms } }
}

function main(): void {
  const queue = process.env['WEFT_QUEUE'] ?? ''
  const effects = process.env['WEFT_CONF_EFFECTS'] ?? ''
  if (queue === '' || effects === '') {
    process.stderr.write('conformance worker: WEFT_QUEUE and WEFT_CONF_EFFECTS must be set\n')
    process.exit(2)
  }
  const name = process.env['WEFT_WORKER_NAME']
  const w = new Worker({
    queues: [queue],
    drainTimeout: 20_000,
    logger: consoleLogger('info'),
    ...(name !== undefined && name !== '' ? { name } : {}),
  })

  w.handle('conf.echo', (input) => {
    const c = cfg<{ output: unknown }>(input)
    return { output: c.output !== undefined && c.output !== null ? c.output : input.state }
  })

  w.handle('conf.fail', (input) => {
    const times = num(cfg<{ times: number }>(input).times, 'times')
    if (input.attempt <= times) throw retryable('ConfFail', `attempt ${input.attempt} of ${times} failing`)
    return { output: { attempt: input.attempt } }
  })

  w.handle('conf.fatal', (input) => {
    throw nonRetryable('ConfFatal', 'fatal', { node: input.nodeId })
  })

  w.handle('conf.slow', slow)

  w.handle('conf.block', async (_input, ctx) => {
    await new Promise((_resolve, reject) => {
      if (ctx.signal.aborted) return reject(ctx.signal.reason)
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true })
    })
    return {}
  })

  w.handle('conf.effect', async (input, ctx) => {
    const ms = num(cfg<{ ms: number }>(input).ms, 'ms')
    appendLine(effects, input.idempotencyKey)
    await sleep(ms, ctx.signal)
    return { output: { key: input.idempotencyKey } }
  })

  w.handle('conf.validate', {
    validate(input) {
      if (input.state['ok'] !== true) throw nonRetryable('ValidationError', 'field "ok": want true')
    },
    execute: () => ({ output: { valid: true } }),
  })

  // The trace rides on a per-execution object from step to step.
  const traces = new WeakMap<Input, string[]>()
  w.handle('conf.hooks', {
    before(input) {
      traces.set(input, ['before'])
    },
    prep(input) {
      const t = traces.get(input) ?? []
      t.push('prep')
      return t
    },
    exec(t: string[]) {
      t.push('exec')
      return t
    },
    post(_input, _prep, t: string[]) {
      t.push('post')
      return { output: { trace: t } }
    },
    after(_input, result) {
      ;(result.output as { trace: string[] }).trace.push('after')
    },
  })

  w.handle('conf.throw', () => {
    throw 'boom' // a thrown non-Error: a retryable failure of type "Error"
  })

  w.run().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`conformance worker: ${err instanceof Error ? err.message : String(err)}\n`)
      process.exit(1)
    },
  )
}

main()
