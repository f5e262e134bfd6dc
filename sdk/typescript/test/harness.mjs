// The Go side of the tests: internal/sdkharness, built once from this
// repository (build-harness.mjs) into .cache/sdkharness. A Harness runs it:
// an embedded NATS with JetStream and a coordinator (optionally under
// Weft's roles), and a line protocol to ask Go what it makes of things
// (the wire codec, graphs, a run's folded state).
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'

export const pkg = resolve(import.meta.dirname, '..')
export const root = resolve(pkg, '../..')
export const bin = join(pkg, '.cache', 'sdkharness')

export class Harness {
  url = ''
  roles = ''
  #proc
  #pending = []
  #lines

  // start runs the harness: engine false answers requests only;
  // encryptKeys, a key ring file, seals the engine's events.
  static async start({ roles = false, queues = ['default'], engine = true, encryptKeys = '' } = {}) {
    const h = new Harness()
    const args = ['-queues', queues.join(',')]
    if (roles) args.push('-roles')
    if (encryptKeys !== '') args.push('-encrypt-keys', encryptKeys)
    if (!engine) args.push('-no-engine')
    h.#proc = spawn(bin, args, { stdio: ['pipe', 'pipe', 'inherit'] })
    h.#lines = createInterface({ input: h.#proc.stdout })
    const ready = await new Promise((ok, fail) => {
      const t = setTimeout(() => fail(new Error('sdkharness did not start within 120 s')), 120_000)
      h.#proc.once('exit', (code) => fail(new Error(`sdkharness exited (${code})`)))
      h.#lines.once('line', (l) => {
        clearTimeout(t)
        ok(JSON.parse(l))
      })
    })
    h.#lines.on('line', (l) => h.#pending.shift()?.(JSON.parse(l)))
    h.url = ready.url
    h.roles = ready.roles
    return h
  }

  // ask sends one request and resolves with its answer.
  ask(req) {
    return new Promise((ok) => {
      this.#pending.push(ok)
      this.#proc.stdin.write(JSON.stringify(req) + '\n')
    })
  }

  // env is the environment a role's program gets: its .env file, and the URL.
  env(user) {
    const env = { WEFT_NATS_URL: this.url }
    if (this.roles !== '') {
      for (const line of readFileSync(join(this.roles, `${user}.env`), 'utf8').split('\n')) {
        const m = /^([A-Z_]+)=(.*)$/.exec(line)
        if (m) env[m[1]] = m[2]
      }
    }
    return env
  }

  // connectOptions are the SDK's connect options for a role.
  connectOptions(user) {
    const env = this.env(user)
    return { url: env.WEFT_NATS_URL, user: env.WEFT_NATS_USER ?? '', password: env.WEFT_NATS_PASSWORD ?? '', env: {} }
  }

  async stop() {
    if (this.#proc.exitCode !== null) return
    const gone = new Promise((ok) => this.#proc.once('exit', ok))
    this.#proc.stdin.end()
    const t = setTimeout(() => this.#proc.kill('SIGKILL'), 15_000)
    await gone
    clearTimeout(t)
  }
}
