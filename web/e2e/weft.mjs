// The engine the browser tests look at: weft built from this repository,
// `weft dev` on free loopback ports with a temporary data directory,
// `weft ui` beside it when a test wants other settings, and `weft run` to
// start runs. stop() ends every process started here, each with its whole
// process group, whatever happened before.
import { execFile, spawn } from 'node:child_process'
import { appendFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'

const exec = promisify(execFile)

export const root = resolve(import.meta.dirname, '../..')
export const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium'

// freePort asks the kernel for a free loopback port.
function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer()
    s.unref()
    s.on('error', fail)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => ok(port))
    })
  })
}

function alive(p) {
  return p.exitCode === null && p.signalCode === null
}

export class Weft {
  dir = mkdtempSync(join(tmpdir(), 'weft-e2e-'))
  bin = join(this.dir, 'weft')
  log = join(this.dir, 'weft.log')
  procs = []
  nats = ''
  url = ''

  constructor() {
    process.once('exit', () => this.procs.forEach((p) => this.kill(p, 'SIGKILL')))
  }

  // start builds weft and starts weft dev with the UI.
  async start() {
    if (!existsSync(chromiumPath)) {
      throw new Error(
        `The browser tests need Debian's Chromium at ${chromiumPath}: install it with 'apt-get install -y chromium' (make e2e does when run as root), or set CHROMIUM.`,
      )
    }
    await exec('go', ['build', '-o', this.bin, './cmd/weft'], { cwd: root, maxBuffer: 1 << 24 })
    const natsPort = await freePort()
    this.nats = `nats://127.0.0.1:${natsPort}`
    // -fake-model: the agent test's model, slow enough to watch it stream.
    const fake = ['-fake-model', '-fake-model-pace', '300ms']
    this.url = await this.serve('dev', ['-port', String(natsPort), '-data', join(this.dir, 'data'), ...fake], '-ui')
    return this
  }

  // ui starts `weft ui` against weft dev's NATS with more flags, and
  // returns its address.
  ui(...flags) {
    return this.serve('ui', ['-nats', this.nats, ...flags], '-addr')
  }

  // serve starts a weft command that serves the UI on a free port (given
  // with addrFlag) and waits until it prints that address.
  async serve(cmd, args, addrFlag) {
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const p = spawn(this.bin, [cmd, ...args, addrFlag, `127.0.0.1:${port}`], {
      cwd: root,
      detached: true, // its own process group, ended as one
      stdio: ['ignore', 'pipe', openSync(this.log, 'a')],
    })
    this.procs.push(p)
    let printed = ''
    return new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`weft ${cmd} did not print its UI address within 60 s`)), 60_000)
      p.stdout.on('data', (b) => {
        printed += b
        appendFileSync(this.log, b)
        if (printed.includes(url)) {
          clearTimeout(timer)
          ok(url)
        }
      })
      p.once('exit', (code, sig) => {
        clearTimeout(timer)
        fail(new Error(`weft ${cmd} exited (${code ?? sig}); the log:\n${readFileSync(this.log, 'utf8')}`))
      })
    })
  }

  // run starts a run of a graph file and returns its id; with wait, it
  // waits for the run's end (a failed run is no error here).
  async run(graph, { input, wait = false } = {}) {
    const args = ['run', resolve(root, graph), '-nats', this.nats]
    if (input !== undefined) args.push('-input', JSON.stringify(input))
    if (wait) args.push('-wait')
    let stdout
    try {
      ;({ stdout } = await exec(this.bin, args, { cwd: root, maxBuffer: 1 << 24 }))
    } catch (e) {
      // -wait exits 1 for a run that failed (fine here), and for one that
      // did not end within its minute (not fine).
      if (!wait || !e.stdout || /has not ended/.test(e.stderr)) throw new Error(`weft ${args.join(' ')}: ${e.stderr || e.message}`)
      stdout = e.stdout
    }
    const id = stdout.trim().split('\n')[0].trim()
    if (!/^[0-9a-z]+$/.test(id)) throw new Error(`weft run printed no run id: ${stdout}`)
    return id
  }

  // cli runs a weft command against weft dev's NATS and returns its
  // output.
  async cli(...args) {
    try {
      const { stdout } = await exec(this.bin, [...args, '-nats', this.nats], { cwd: root, maxBuffer: 1 << 24 })
      return stdout
    } catch (e) {
      throw new Error(`weft ${args.join(' ')}: ${e.stderr || e.message}`)
    }
  }

  kill(p, signal) {
    if (!alive(p)) return
    try {
      process.kill(-p.pid, signal)
    } catch {
      // already gone
    }
  }

  // stop ends the servers, the UI ones first (they read through weft
  // dev's NATS), and removes the temporary directory.
  async stop() {
    for (const p of [...this.procs].reverse()) {
      const gone = new Promise((ok) => (alive(p) ? p.once('exit', ok) : ok()))
      this.kill(p, 'SIGTERM')
      const t = setTimeout(() => this.kill(p, 'SIGKILL'), 10_000)
      await gone
      clearTimeout(t)
    }
    rmSync(this.dir, { recursive: true, force: true })
  }
}
