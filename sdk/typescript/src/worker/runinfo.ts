// Work items refer to what the run's start holds (Go: pkg/worker
// runinfo.go). A node-ready event carries the node's type, policy and input
// state, not its config and JSON schemas (in the graph) or the run's
// invocation state: those are in the run's run-started event, which the
// worker reads once per run with a direct get of the last message on the
// run's start subject (the subject in the request subject, so that the
// worker's role may be granted it for runs' starts only), and keeps in an
// LRU; the node specs are shared by the runs of one graph digest. A work
// item that carries config, schemas or invocation itself is used as it is.

import { decode, type WeftEvent } from '../events/envelope.js'
import { childStartedSubject, EventType, startedSubject } from '../events/subjects.js'
import { FailureType, type NodeReadyData } from '../events/payloads.js'
import type { Store } from '../store.js'
import { errorMessage, sleep } from '../internal/util.js'
import { nonRetryable } from './errors.js'

const runStartCache = 16384
const graphCache = 256
const endedCache = 4096

interface NodeSpec {
  config?: unknown
  inputSchema?: unknown
  outputSchema?: unknown
}

interface RunStart {
  invocation: unknown
  nodes: Map<string, NodeSpec>
}

/** LRU is a least-recently-used map of bounded size. */
export class LRU<V> {
  private m = new Map<string, V>()
  constructor(private max: number) {}
  get(k: string): V | undefined {
    const v = this.m.get(k)
    if (v !== undefined) {
      this.m.delete(k)
      this.m.set(k, v)
    }
    return v
  }
  has(k: string): boolean {
    return this.get(k) !== undefined
  }
  set(k: string, v: V): void {
    this.m.delete(k)
    this.m.set(k, v)
    if (this.m.size > this.max) {
      const oldest = this.m.keys().next().value
      if (oldest !== undefined) this.m.delete(oldest)
    }
  }
}

class StartNotFound extends Error {}

// StartDigestMismatch: the run's start names another graph's digest than
// its own (refused by decode); its config is not believed, and reading it
// again will not change it.
class StartDigestMismatch extends Error {}

// StartMismatch: the item names the stream sequence of its run's start,
// and the last message on the run's start subjects is another (a second
// run-started, which the fold refuses: Go's errStartMismatch). The run's
// own start cannot be read by subject, so the attempt fails.
class StartMismatch extends Error {}

/** RunReader reads and caches runs' starts and ends. */
export class RunReader {
  private starts = new LRU<RunStart>(runStartCache)
  private graphs = new LRU<Map<string, NodeSpec>>(graphCache)
  private ended = new LRU<true>(endedCache)
  private loading = new Map<string, Promise<RunStart>>()
  /** endReads counts the reads of whether a run ended (Worker.stats). */
  endReads = 0

  constructor(private store: Store) {}

  private start(run: string, want: number): Promise<RunStart> {
    const key = want !== 0 ? `${run}@${want}` : run
    const cached = this.starts.get(key)
    if (cached !== undefined) return Promise.resolve(cached)
    let p = this.loading.get(key)
    if (p === undefined) {
      p = this.readStart(run, want).then(
        (s) => {
          this.loading.delete(key)
          this.starts.set(key, s)
          return s
        },
        (err: unknown) => {
          this.loading.delete(key)
          throw err
        },
      )
      this.loading.set(key, p)
    }
    return p
  }

  // lastStart reads the run's start: the last message on its client's start
  // subject (most runs), then, when there is none there or it is not a start
  // the engine accepts (a client's start claiming a parent, which anyone may
  // write on a child run's client subject), on the coordinator's (a child
  // run's). undefined when neither subject has a message; an error when the
  // one found was refused.
  private async lastStart(run: string, want: number): Promise<WeftEvent | undefined> {
    let refused: unknown
    let mismatch: StartMismatch | undefined
    for (const subject of [startedSubject(run), childStartedSubject(run)]) {
      const m = await this.store.lastOn(subject)
      if (m === undefined) continue
      if (want !== 0 && m.seq !== want) {
        mismatch ??= new StartMismatch(`run ${run}: the item names the start at sequence ${want}, the last message on ${subject} is at ${m.seq} (a second run-started?)`)
        continue
      }
      try {
        const ev = decode(m.subject, m.headers, m.data)
        if (ev.type !== EventType.RunStarted) throw new Error(`a ${ev.type} event`)
        return ev
      } catch (err) {
        refused ??= err
      }
    }
    if (refused !== undefined) {
      const msg = `run ${run}: its start: ${errorMessage(refused)}`
      throw errorMessage(refused).includes('graph digest mismatch') ? new StartDigestMismatch(msg) : new Error(msg)
    }
    if (mismatch !== undefined) throw mismatch
    return undefined
  }

  private async readStart(run: string, want: number): Promise<RunStart> {
    const read = async (last: boolean): Promise<WeftEvent | undefined> => {
      try {
        return await this.lastStart(run, want)
      } catch (err) {
        // A replica that is behind may hold another message than the one named.
        if (err instanceof StartMismatch && !last) return undefined
        throw err
      }
    }
    const retries = this.store.replicas > 1 ? 8 : 1
    let ev = await read(retries === 1)
    // A replica that is behind may answer on a replicated stream.
    for (let tries = 1; ev === undefined && tries < retries; tries++) {
      await sleep(tries * 40)
      ev = await read(tries === retries - 1)
    }
    if (ev === undefined) throw new StartNotFound(`run ${run}: the run's run-started event is not in the stream`)
    const started = JSON.parse(ev.data) as { graphDigest?: string; graph?: { nodes?: ({ id?: string } & NodeSpec)[] }; invocation?: unknown }
    const digest = started.graphDigest ?? ''
    let nodes = digest !== '' ? this.graphs.get(digest) : undefined
    if (nodes === undefined) {
      nodes = new Map()
      for (const n of started.graph?.nodes ?? []) {
        if (typeof n.id === 'string') nodes.set(n.id, { config: n.config, inputSchema: n.inputSchema, outputSchema: n.outputSchema })
      }
      if (digest !== '') this.graphs.set(digest, nodes)
    }
    return { invocation: started.invocation, nodes }
  }

  /**
   * resolved is resolve without a wait: the item filled in (in place:
   * the worker's own decoded copy) when it needs nothing or its run's
   * start is cached and names its node; undefined when resolve must read
   * (or fail).
   */
  resolved(run: string, ready: NodeReadyData): NodeReadyData | undefined {
    if (selfContained(ready)) return ready
    const want = ready.startSeq ?? 0
    const s = this.starts.get(want !== 0 ? `${run}@${want}` : run)
    const spec = s?.nodes.get(ready.node)
    if (s === undefined || spec === undefined) return undefined
    ready.config = spec.config
    ready.inputSchema = spec.inputSchema
    ready.outputSchema = spec.outputSchema
    ready.invocation = s.invocation
    return ready
  }

  /**
   * resolve fills in a work item what it refers to. A run whose start is
   * not in the stream, or whose graph lacks the node, is a non-retryable
   * failure (RunNotFound, InvalidGraph); another error is a read error.
   */
  async resolve(run: string, ready: NodeReadyData): Promise<NodeReadyData> {
    if (selfContained(ready)) return ready
    let s: RunStart
    try {
      s = await this.start(run, ready.startSeq ?? 0)
    } catch (err) {
      if (err instanceof StartNotFound) throw nonRetryable(FailureType.RunNotFound, `node ${JSON.stringify(ready.node)}: ${err.message}`)
      if (err instanceof StartMismatch) throw nonRetryable(FailureType.RunStartMismatch, `node ${JSON.stringify(ready.node)}: ${err.message}`)
      if (err instanceof StartDigestMismatch) throw nonRetryable(FailureType.InvalidGraph, `node ${JSON.stringify(ready.node)}: ${err.message}`)
      throw err
    }
    const spec = s.nodes.get(ready.node)
    if (spec === undefined) throw nonRetryable(FailureType.InvalidGraph, `the graph of run ${run} has no node ${JSON.stringify(ready.node)}`)
    return { ...ready, config: spec.config, inputSchema: spec.inputSchema, outputSchema: spec.outputSchema, invocation: s.invocation }
  }

  /** hasEnded reports whether the run's log holds an ending decision; a run once seen ended is remembered. */
  async hasEnded(run: string): Promise<boolean> {
    if (this.ended.has(run)) return true
    this.endReads++
    const ended = await this.store.hasEnd(run)
    if (ended) this.ended.set(run, true)
    return ended
  }

  /** knownEnded reports whether the run was seen ended, without a read. */
  knownEnded(run: string): boolean {
    return this.ended.has(run)
  }
}

function selfContained(r: NodeReadyData): boolean {
  return r.config !== undefined || r.inputSchema !== undefined || r.outputSchema !== undefined || r.invocation !== undefined
}
