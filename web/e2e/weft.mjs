// The engine the browser tests look at: weft built from this repository,
// `weft dev` on free loopback ports with a temporary data directory, and
// `weft run` to start runs. stop() ends weft dev's whole process group,
// whatever happened before.
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

export class Weft {
  dir = mkdtempSync(join(tmpdir(), 'weft-e2e-'))
  bin = join(this.dir, 'weft')
  log = join(this.dir, 'dev.log')
  proc = null
  nats = ''
  url = ''

  async start() {
    if (!existsSync(chromiumPath)) {
      throw new Error(
        `The browser tests need Debian's Chromium at ${chromiumPath}: install it with 'apt-get install -y chromium' (make e2e does when run as root), or set CHROMIUM.`,
      )
    }
    await exec('go', ['build', '-o', this.bin, './cmd/weft'], { cwd: root, maxBuffer: 1 << 24 })
    const [natsPort, uiPort] = [await freePort(), await freePort()]
    this.nats = `nats://127.0.0.1:${natsPort}`
    const err = openSync(this.log, 'a')
    this.proc = spawn(
      this.bin,
      ['dev', '-port', String(natsPort), '-data', join(this.dir, 'data'), '-ui', `127.0.0.1:${uiPort}`],
      { cwd: root, detached: true, stdio: ['ignore', 'pipe', err] },
    )
    process.once('exit', () => this.kill('SIGKILL'))
    // weft dev prints the UI's address once it serves it.
    let printed = ''
    this.url = await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error('weft dev did not print its UI address within 60 s')), 60_000)
      this.proc.stdout.on('data', (b) => {
        printed += b
        appendFileSync(this.log, b)
        if (printed.includes(`http://127.0.0.1:${uiPort}`)) {
          clearTimeout(timer)
          ok(`http://127.0.0.1:${uiPort}`)
        }
      })
      this.proc.once('exit', (code, sig) => {
        clearTimeout(timer)
        fail(new Error(`weft dev exited (${code ?? sig}); its output:\n${readFileSync(this.log, 'utf8')}`))
      })
    })
    return this
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
      if (!wait || !e.stdout) throw e
      stdout = e.stdout // -wait exits 1 for a failed run
    }
    const id = stdout.trim().split('\n')[0].trim()
    if (!/^[0-9a-z]+$/.test(id)) throw new Error(`weft run printed no run id: ${stdout}`)
    return id
  }

  kill(signal) {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      try {
        process.kill(-this.proc.pid, signal)
      } catch {
        // already gone
      }
    }
  }

  async stop() {
    if (this.proc) {
      const gone = new Promise((ok) => {
        if (this.proc.exitCode !== null || this.proc.signalCode !== null) ok()
        else this.proc.once('exit', ok)
      })
      this.kill('SIGTERM')
      const t = setTimeout(() => this.kill('SIGKILL'), 10_000)
      await gone
      clearTimeout(t)
    }
    rmSync(this.dir, { recursive: true, force: true })
  }
}
