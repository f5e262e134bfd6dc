// Graph definitions as Go's pkg/graph reads them, to the byte: the same
// decoding (strict: an unknown field is an error that names where it is),
// the same normalisation (queue, join, effect, checkpoint, retry policy,
// edge actions and the iteration cap filled in, embedded JSON in canonical
// form, limits by type and queue given to their nodes) and the same
// canonical JSON, whose SHA-256 is the graph's digest.
// A run-started event records both; the coordinator compiles the graph
// from it and validates it fully (a run of an invalid graph fails at once
// with an error that says why). This module checks what names and links
// the graph (ids, types, queues, edge ends, enumerations) and the bounds
// of its limits before a run starts; the coordinator checks the rest
// (conditions and keys in CEL, executor configs, reachability).

import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { extname } from 'node:path'
import { formatDuration, parseDuration } from '../internal/duration.js'
import { compareUTF8, formatFloat, type JValue, JSONSyntaxError, marshal, parse, quote, render } from '../internal/gojson.js'
import { validToken } from '../events/subjects.js'
import { duplicateKeys, yamlToJSON } from './yaml.js'

/** GraphError lists every problem found in a graph, each naming where it is. */
export class GraphError extends Error {
  override name = 'GraphError'
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`${source !== '' ? source + ': ' : ''}${problems.join('; ')}`)
  }
}

/** Graph is a loaded graph: its canonical JSON (what a run-started records) and digest. */
export interface Graph {
  name: string
  /** canonical is the normalised definition's JSON, byte for byte Go's. */
  canonical: string
  /** digest is "sha256:<hex>" of canonical. */
  digest: string
  /** definition is the normalised definition as plain values. */
  definition: Record<string, unknown>
}

const maxFileSize = 8 << 20

/** loadGraphFile reads a graph file: .yaml or .yml for YAML, .json for JSON. */
export function loadGraphFile(path: string): Graph {
  const ext = extname(path).toLowerCase()
  if (ext !== '.yaml' && ext !== '.yml' && ext !== '.json') throw new GraphError(path, ['unknown graph file extension (want .yaml, .yml or .json)'])
  return parseGraph(readFileSync(path, 'utf8'), { source: path, format: ext === '.json' ? 'json' : 'yaml' })
}

/**
 * parseGraph reads a graph written in JSON or YAML (JSON when it starts
 * with "{" and is valid JSON), or given as an object.
 */
export function parseGraph(input: string | object, o: { source?: string; format?: 'json' | 'yaml' } = {}): Graph {
  const source = o.source ?? ''
  let v: JValue
  if (typeof input !== 'string') {
    v = parse(marshal(input))
  } else {
    if (input.length > maxFileSize) throw new GraphError(source, [`graph is ${input.length} bytes, larger than the limit of ${maxFileSize}`])
    const text = input.replace(/^\ufeff/, '')
    if (text.trim() === '') throw new GraphError(source, ['empty document'])
    let format = o.format
    if (format === undefined) {
      format = 'yaml'
      if (text.trim().startsWith('{')) {
        try {
          parse(text)
          format = 'json'
        } catch {
          try {
            yamlToJSON(text)
          } catch {
            format = 'json'
          }
        }
      }
    }
    try {
      v = format === 'json' ? parse(text) : yamlToJSON(text)
    } catch (err) {
      if (err instanceof JSONSyntaxError) {
        const before = text.slice(0, err.offset)
        const line = before.split('\n').length
        const col = Math.max(err.offset - (before.lastIndexOf('\n') + 1), 1)
        throw new GraphError(source, [`line ${line}, column ${col}: invalid JSON: ${err.message}`])
      }
      throw new GraphError(source, [`invalid YAML: ${(err as Error).message}`])
    }
    // A key given twice is an error in YAML, as in Go; JSON read as JSON
    // keeps JSON.parse's reading (the last one wins), as Go's does.
    if (format === 'yaml') {
      const dups = duplicateKeys(text)
      if (dups.length > 0) throw new GraphError(source, dups)
    }
  }
  const p = new Problems()
  const def = decodeDefinition(v, p, '')
  if (def === undefined || p.list.length > 0) throw new GraphError(source, p.list)
  normalise(def)
  validate(def, p, '')
  if (p.list.length > 0) throw new GraphError(source, p.list)
  const canonical = renderDefinition(def)
  return {
    name: def.name,
    canonical,
    digest: 'sha256:' + createHash('sha256').update(canonical, 'utf8').digest('hex'),
    definition: JSON.parse(canonical) as Record<string, unknown>,
  }
}

class Problems {
  list: string[] = []
  add(where: string, msg: string): void {
    this.list.push(where !== '' ? `${where}: ${msg}` : msg)
  }
}

// The decoded definition: Go's struct fields, with embedded JSON kept as parsed values.
interface Definition {
  name: string
  version: string
  description: string
  metadata?: Map<string, string>
  reducers?: Map<string, string>
  maxIterations: bigint
  nodes: GNode[]
  edges: Edge[]
  graphs?: Map<string, Definition>
  retention: string
  searchAttributes?: string[]
  continueAsNew?: ContinueSpec
  concurrency?: RunConcurrency
  limits?: Limits
}

// Go's RunConcurrency: the graph's limit on its runs in progress, by key.
interface RunConcurrency {
  max: bigint
  key: string
  name: string
  strategy: string
}

// Go's Limits: limits by node type and by queue, given at load to the
// nodes they apply to (the canonical form records them there too).
interface Limits {
  types?: Map<string, NodeLimits>
  queues?: Map<string, NodeLimits>
}

interface NodeLimits {
  concurrency?: ConcurrencyLimit
  rate?: RateLimit
}

// Go's ConcurrencyLimit: a node's concurrency limit by key.
interface ConcurrencyLimit {
  max: bigint
  key: string
  name: string
}

// Go's RateLimit: a node's rate limit by key (units per per).
interface RateLimit {
  limit: bigint
  per: bigint
  key: string
  units: string
  name: string
}

// Go's ContinueSpec: how a run continues as new (an edge to CONTINUE).
interface ContinueSpec {
  graph: string
  onHistoryBudget: boolean
  maxStateBytes: bigint
}

interface GNode {
  id: string
  name: string
  description: string
  metadata?: Map<string, string>
  type: string
  queue: string
  local?: boolean
  config?: JValue
  inputs?: string[]
  outputs?: string[]
  inputSchema?: JValue
  outputSchema?: JValue
  outputAs: string
  when: string
  join?: { kind: 'all' | 'any' | 'n'; n: bigint }
  map?: { over: string; concurrency: bigint }
  retry?: Retry
  timeout: bigint
  heartbeat: bigint
  maxIterations: bigint
  effect: string
  checkpoint: string
  fallback?: JValue
  concurrency?: ConcurrencyLimit
  rate?: RateLimit
}

interface Retry {
  maxAttempts: bigint
  initialInterval: bigint
  backoffCoefficient: number
  maxInterval: bigint
  jitter?: number
  nonRetryableErrors?: string[]
}

interface Edge {
  from: string
  to: string
  action: string
  when: string
  timeout: boolean
  onMissing: string
}

type Members = Map<string, JValue>

function members(v: JValue): Members | undefined {
  if (v.kind !== 'object') return undefined
  const m = new Map<string, JValue>()
  for (const [k, e] of v.members) m.set(k, e)
  return m
}

function kindOf(v: JValue): string {
  switch (v.kind) {
    case 'object':
      return 'an object'
    case 'array':
      return 'a list'
    case 'string':
      return 'a string'
    case 'bool':
      return 'a boolean'
    case 'null':
      return 'null'
    case 'number':
      return 'a number'
  }
}

// Field decoders: each returns the value, or undefined after reporting.
type Report = (field: string, msg: string) => void

function got(v: JValue): string {
  return v.kind === 'number' ? `number ${v.text}` : v.kind === 'bool' ? 'bool' : v.kind === 'object' ? 'object' : v.kind === 'array' ? 'array' : v.kind
}

function str(v: JValue, f: string, r: Report): string | undefined {
  if (v.kind === 'string') return v.value
  r(f, `want a string, got ${got(v)}${v.kind === 'bool' ? ' (in YAML, quote values such as yes, no, on, off, y and n)' : ''}`)
  return undefined
}

function int(v: JValue, f: string, r: Report): bigint | undefined {
  if (v.kind === 'number' && /^-?[0-9]+$/.test(v.text)) {
    const n = BigInt(v.text)
    if (n >= -(1n << 63n) && n < 1n << 63n) return n
  }
  r(f, `want an integer, got ${got(v)}`)
  return undefined
}

function float(v: JValue, f: string, r: Report): number | undefined {
  if (v.kind === 'number' && Number.isFinite(Number(v.text))) return Number(v.text)
  r(f, `want a number, got ${got(v)}`)
  return undefined
}

function bool(v: JValue, f: string, r: Report): boolean | undefined {
  if (v.kind === 'bool') return v.value
  r(f, `want true or false, got ${got(v)}`)
  return undefined
}

function strings(v: JValue, f: string, r: Report): string[] | undefined {
  if (v.kind !== 'array' || v.items.some((i) => i.kind !== 'string' && i.kind !== 'null')) {
    r(f, `want a list of strings, got ${v.kind === 'array' ? 'a list with other values' : got(v)}`)
    return undefined
  }
  return v.items.map((i) => (i.kind === 'string' ? i.value : ''))
}

function strMap(v: JValue, f: string, r: Report): Map<string, string> | undefined {
  const m = members(v)
  if (m === undefined || [...m.values()].some((e) => e.kind !== 'string' && e.kind !== 'null')) {
    r(f, `want an object, got ${m === undefined ? got(v) : 'an object with values that are not strings'}`)
    return undefined
  }
  return new Map([...m].map(([k, e]) => [k, e.kind === 'string' ? e.value : '']))
}

function duration(v: JValue, f: string, r: Report): bigint | undefined {
  if (v.kind !== 'string') {
    r(f, `want a duration string such as "30s", got ${got(v)}`)
    return undefined
  }
  if (v.value === '') return 0n
  let d: bigint
  try {
    d = parseDuration(v.value)
  } catch {
    r(f, `malformed duration ${JSON.stringify(v.value)} (want e.g. "250ms", "30s", "1m")`)
    return undefined
  }
  if (d < 0n) {
    r(f, `negative duration ${JSON.stringify(v.value)}`)
    return undefined
  }
  return d
}

// fields calls each field's decoder for the keys present (null leaves the
// zero value) and reports unknown keys.
function fields(m: Members, known: Record<string, (v: JValue, f: string) => void>, prefix: string, r: Report, skip: string[] = []): void {
  for (const [k, v] of m) {
    const dec = known[k]
    if (dec === undefined) {
      if (skip.includes(k)) continue
      let msg = 'unknown field'
      let best = 3
      for (const name of [...Object.keys(known), ...skip]) {
        const d = editDistance(name.toLowerCase(), k.toLowerCase())
        if (d < best) {
          best = d
          msg = `unknown field (did you mean ${JSON.stringify(name)}?)`
        }
      }
      r(prefix + k, msg)
      continue
    }
    if (v.kind === 'null') continue
    dec(v, prefix + k)
  }
}

function decodeDefinition(v: JValue, p: Problems, graphPrefix: string): Definition | undefined {
  const m = members(v)
  if (m === undefined) {
    p.add(graphPrefix, `want a graph object, got ${kindOf(v)}`)
    return undefined
  }
  const top: Report = (f, msg) => p.add(graphPrefix + f, msg)
  const d: Definition = { name: '', version: '', description: '', maxIterations: 0n, nodes: [], edges: [], retention: '' }
  fields(
    m,
    {
      name: (x, f) => (d.name = str(x, f, top) ?? ''),
      version: (x, f) => (d.version = str(x, f, top) ?? ''),
      description: (x, f) => (d.description = str(x, f, top) ?? ''),
      metadata: (x, f) => (d.metadata = strMap(x, f, top)),
      state: (x, f) => {
        const s = members(x)
        if (s === undefined) return top(f, `want an object, got ${kindOf(x)}`)
        fields(s, { reducers: (y, g) => (d.reducers = strMap(y, g, top)) }, f + '.', top)
      },
      maxIterations: (x, f) => (d.maxIterations = int(x, f, top) ?? 0n),
      retention: (x, f) => (d.retention = str(x, f, top) ?? ''),
      searchAttributes: (x, f) => (d.searchAttributes = strings(x, f, top)),
      continueAsNew: (x, f) => (d.continueAsNew = decodeContinue(x, f, top)),
      concurrency: (x, f) => (d.concurrency = decodeRunConcurrency(x, f, top)),
      limits: (x, f) => (d.limits = decodeLimits(x, f, top)),
      nodes: (x, f) => {
        if (x.kind !== 'array') return top(f, `want a list of nodes, got ${kindOf(x)}`)
        d.nodes = x.items.map((item, i) => decodeNode(item, i, p, graphPrefix))
      },
      edges: (x, f) => {
        if (x.kind !== 'array') return top(f, `want a list of edges, got ${kindOf(x)}`)
        d.edges = x.items.map((item, i) => decodeEdge(item, i, p, graphPrefix))
      },
      graphs: (x, f) => {
        const g = members(x)
        if (g === undefined) return top(f, `want an object of graphs by name, got ${kindOf(x)}`)
        d.graphs = new Map()
        for (const name of [...g.keys()].sort(compareUTF8)) {
          const sub = decodeDefinition(g.get(name) as JValue, p, `${graphPrefix}graph ${JSON.stringify(name)}: `)
          if (sub !== undefined) d.graphs.set(name, sub)
        }
      },
    },
    '',
    top,
  )
  return d
}

function decodeContinue(v: JValue, f: string, top: Report): ContinueSpec | undefined {
  const m = members(v)
  if (m === undefined) {
    top(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const c: ContinueSpec = { graph: '', onHistoryBudget: false, maxStateBytes: 0n }
  fields(
    m,
    {
      graph: (x, g) => (c.graph = str(x, g, top) ?? ''),
      onHistoryBudget: (x, g) => (c.onHistoryBudget = bool(x, g, top) ?? false),
      maxStateBytes: (x, g) => (c.maxStateBytes = int(x, g, top) ?? 0n),
    },
    f + '.',
    top,
  )
  return c
}

function decodeRunConcurrency(v: JValue, f: string, r: Report): RunConcurrency | undefined {
  const m = members(v)
  if (m === undefined) {
    r(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const c: RunConcurrency = { max: 0n, key: '', name: '', strategy: '' }
  fields(
    m,
    {
      max: (x, g) => (c.max = int(x, g, r) ?? 0n),
      key: (x, g) => (c.key = str(x, g, r) ?? ''),
      name: (x, g) => (c.name = str(x, g, r) ?? ''),
      strategy: (x, g) => (c.strategy = str(x, g, r) ?? ''),
    },
    f + '.',
    r,
  )
  return c
}

function decodeConcurrency(v: JValue, f: string, r: Report): ConcurrencyLimit | undefined {
  const m = members(v)
  if (m === undefined) {
    r(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const c: ConcurrencyLimit = { max: 0n, key: '', name: '' }
  fields(m, { max: (x, g) => (c.max = int(x, g, r) ?? 0n), key: (x, g) => (c.key = str(x, g, r) ?? ''), name: (x, g) => (c.name = str(x, g, r) ?? '') }, f + '.', r)
  return c
}

function decodeRate(v: JValue, f: string, r: Report): RateLimit | undefined {
  const m = members(v)
  if (m === undefined) {
    r(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const c: RateLimit = { limit: 0n, per: 0n, key: '', units: '', name: '' }
  fields(
    m,
    {
      limit: (x, g) => (c.limit = int(x, g, r) ?? 0n),
      per: (x, g) => (c.per = duration(x, g, r) ?? 0n),
      key: (x, g) => (c.key = str(x, g, r) ?? ''),
      units: (x, g) => (c.units = str(x, g, r) ?? ''),
      name: (x, g) => (c.name = str(x, g, r) ?? ''),
    },
    f + '.',
    r,
  )
  return c
}

// decodeLimits reads limits: {types, queues}, each entry field by field
// as Go's loader does (an unknown key refused, with its place).
function decodeLimits(v: JValue, f: string, r: Report): Limits | undefined {
  const m = members(v)
  if (m === undefined) {
    r(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const l: Limits = {}
  const byName = (x: JValue, g: string): Map<string, NodeLimits> | undefined => {
    const entries = members(x)
    if (entries === undefined) {
      r(g, `want an object, got ${kindOf(x)}`)
      return undefined
    }
    const out = new Map<string, NodeLimits>()
    for (const [name, e] of entries) {
      const limits = decodeNodeLimits(e, `${g}.${name}`, r)
      if (limits !== undefined) out.set(name, limits)
    }
    return out
  }
  fields(m, { types: (x, g) => (l.types = byName(x, g)), queues: (x, g) => (l.queues = byName(x, g)) }, f + '.', r)
  return l
}

// decodeNodeLimits reads one entry of limits.types or limits.queues.
function decodeNodeLimits(v: JValue, f: string, r: Report): NodeLimits | undefined {
  const m = members(v)
  if (m === undefined) {
    r(f, `want an object, got ${kindOf(v)}`)
    return undefined
  }
  const e: NodeLimits = {}
  fields(m, { concurrency: (x, g) => (e.concurrency = decodeConcurrency(x, g, r)), rate: (x, g) => (e.rate = decodeRate(x, g, r)) }, f + '.', r)
  return e
}

function decodeNode(v: JValue, i: number, p: Problems, graphPrefix: string): GNode {
  const n: GNode = { id: '', name: '', description: '', type: '', queue: '', outputAs: '', when: '', timeout: 0n, heartbeat: 0n, maxIterations: 0n, effect: '', checkpoint: '' }
  const m = members(v)
  if (m === undefined) {
    p.add(`${graphPrefix}nodes[${i}]`, `want a node object, got ${kindOf(v)}`)
    return n
  }
  const idv = m.get('id')
  const id = idv?.kind === 'string' ? idv.value : ''
  const r: Report = (f, msg) => p.add(`${graphPrefix}${id !== '' ? `node ${JSON.stringify(id)}: ` : `nodes[${i}].`}${f}`, msg)
  const raw = (x: JValue) => x
  fields(
    m,
    {
      id: (x, f) => (n.id = str(x, f, r) ?? ''),
      name: (x, f) => (n.name = str(x, f, r) ?? ''),
      description: (x, f) => (n.description = str(x, f, r) ?? ''),
      metadata: (x, f) => (n.metadata = strMap(x, f, r)),
      type: (x, f) => (n.type = str(x, f, r) ?? ''),
      queue: (x, f) => (n.queue = str(x, f, r) ?? ''),
      local: (x, f) => (n.local = bool(x, f, r)),
      config: (x) => (n.config = raw(x)),
      inputs: (x, f) => (n.inputs = strings(x, f, r)),
      outputs: (x, f) => (n.outputs = strings(x, f, r)),
      inputSchema: (x) => (n.inputSchema = raw(x)),
      outputSchema: (x) => (n.outputSchema = raw(x)),
      outputAs: (x, f) => (n.outputAs = str(x, f, r) ?? ''),
      when: (x, f) => (n.when = str(x, f, r) ?? ''),
      join: (x, f) => {
        if (x.kind === 'number' && /^-?[0-9]+$/.test(x.text)) {
          const k = BigInt(x.text)
          if (k < 1n) return r(f, `n-of needs n ≥ 1, got ${k}`)
          n.join = { kind: 'n', n: k }
        } else if (x.kind === 'string' && ['', 'all', 'any'].includes(x.value.toLowerCase())) {
          const k = x.value.toLowerCase()
          if (k !== '') n.join = { kind: k as 'all' | 'any', n: 0n }
        } else r(f, `want "all", "any" or a number, got ${x.kind === 'string' ? JSON.stringify(x.value) : render(x)}`)
      },
      map: (x, f) => {
        const mm = members(x)
        if (mm === undefined) return r(f, `want an object, got ${kindOf(x)}`)
        const spec = { over: '', concurrency: 0n }
        fields(mm, { over: (y, g) => (spec.over = str(y, g, r) ?? ''), concurrency: (y, g) => (spec.concurrency = int(y, g, r) ?? 0n) }, f + '.', r)
        n.map = spec
      },
      retry: (x, f) => {
        const mm = members(x)
        if (mm === undefined) return r(f, `want an object, got ${kindOf(x)}`)
        const rp: Retry = { maxAttempts: 0n, initialInterval: 0n, backoffCoefficient: 0, maxInterval: 0n }
        fields(
          mm,
          {
            maxAttempts: (y, g) => (rp.maxAttempts = int(y, g, r) ?? 0n),
            initialInterval: (y, g) => (rp.initialInterval = duration(y, g, r) ?? 0n),
            backoffCoefficient: (y, g) => (rp.backoffCoefficient = float(y, g, r) ?? 0),
            maxInterval: (y, g) => (rp.maxInterval = duration(y, g, r) ?? 0n),
            jitter: (y, g) => (rp.jitter = float(y, g, r)),
            nonRetryableErrors: (y, g) => (rp.nonRetryableErrors = strings(y, g, r)),
          },
          f + '.',
          r,
        )
        n.retry = rp
      },
      timeout: (x, f) => (n.timeout = duration(x, f, r) ?? 0n),
      heartbeat: (x, f) => (n.heartbeat = duration(x, f, r) ?? 0n),
      maxIterations: (x, f) => (n.maxIterations = int(x, f, r) ?? 0n),
      effect: (x, f) => (n.effect = str(x, f, r) ?? ''),
      checkpoint: (x, f) => (n.checkpoint = str(x, f, r) ?? ''),
      fallback: (x) => (n.fallback = raw(x)),
      concurrency: (x, f) => (n.concurrency = decodeConcurrency(x, f, r)),
      rate: (x, f) => (n.rate = decodeRate(x, f, r)),
    },
    '',
    r,
  )
  return n
}

function decodeEdge(v: JValue, i: number, p: Problems, graphPrefix: string): Edge {
  const e: Edge = { from: '', to: '', action: '', when: '', timeout: false, onMissing: '' }
  const m = members(v)
  const where = () => `${graphPrefix}edge ${i}${e.from !== '' || e.to !== '' ? ` (${e.from} -> ${e.to})` : ''}`
  if (m === undefined) {
    p.add(where(), `want an edge object, got ${kindOf(v)}`)
    return e
  }
  const f0 = m.get('from')
  const t0 = m.get('to')
  if (f0?.kind === 'string') e.from = f0.value
  if (t0?.kind === 'string') e.to = t0.value
  const r: Report = (f, msg) => p.add(`${where()}: ${f}`, msg)
  fields(
    m,
    {
      from: (x, f) => (e.from = str(x, f, r) ?? ''),
      to: (x, f) => (e.to = str(x, f, r) ?? ''),
      action: (x, f) => (e.action = str(x, f, r) ?? ''),
      when: (x, f) => (e.when = str(x, f, r) ?? ''),
      timeout: (x, f) => (e.timeout = bool(x, f, r) ?? false),
      onMissing: (x, f) => (e.onMissing = str(x, f, r) ?? ''),
    },
    '',
    r,
  )
  return e
}

const second = 1_000_000_000n
const defaultRetry: Retry = { maxAttempts: 3n, initialInterval: second, backoffCoefficient: 2, maxInterval: 60n * second, jitter: 0.2 }

function defaultEffect(type: string): string {
  switch (type) {
    case 'echo':
    case 'noop':
    case 'sleep':
    case 'fail':
    case 'transform':
    case 'router':
    case 'wait':
      return 'pure'
    case 'human':
      return 'human'
  }
  return 'external'
}

// normalise fills defaults so that the canonical form says everything a
// replay needs (Go: pkg/graph compile.go normalise).
function normalise(d: Definition): void {
  if (d.maxIterations === 0n) d.maxIterations = 100n
  if (d.metadata?.size === 0) delete d.metadata
  if (d.reducers?.size === 0) delete d.reducers
  if (d.graphs?.size === 0) delete d.graphs
  for (const [name, sub] of d.graphs ?? []) if (sub.name === '') sub.name = name
  for (const n of d.nodes) {
    if (n.queue === '') n.queue = 'default'
    n.join ??= { kind: 'all', n: 0n }
    if (n.effect === '') n.effect = defaultEffect(n.type)
    if (n.checkpoint === '') n.checkpoint = 'none'
    if (n.retry === undefined) n.retry = { ...defaultRetry }
    else {
      const r = n.retry
      if (r.maxAttempts === 0n) r.maxAttempts = defaultRetry.maxAttempts
      if (r.initialInterval === 0n) r.initialInterval = defaultRetry.initialInterval
      if (r.backoffCoefficient === 0) r.backoffCoefficient = defaultRetry.backoffCoefficient
      if (r.maxInterval === 0n) r.maxInterval = defaultRetry.maxInterval
      if (r.nonRetryableErrors?.length === 0) delete r.nonRetryableErrors
    }
    if (n.metadata?.size === 0) delete n.metadata
    if (n.inputs?.length === 0) delete n.inputs
    if (n.outputs?.length === 0) delete n.outputs
    for (const k of ['config', 'inputSchema', 'outputSchema', 'fallback'] as const) {
      const v = n[k]
      if (v === undefined || v.kind === 'null') delete n[k]
    }
  }
  for (const e of d.edges) if (e.action === '') e.action = 'default'
  for (const sub of d.graphs?.values() ?? []) normalise(sub)
}

const idRule = "must start with a letter or digit and hold only letters, digits, '-' and '_' (at most 128)"

// validate checks what names and links the graph; the coordinator checks the rest.
function validate(d: Definition, p: Problems, prefix: string): void {
  if (d.name === '') p.add(prefix + 'name', 'missing graph name')
  if (d.nodes.length === 0) p.add(prefix + 'nodes', 'graph has no nodes')
  if (d.maxIterations < 0n) p.add(prefix + 'maxIterations', `must not be negative, got ${d.maxIterations}`)
  if (d.retention !== '') {
    try {
      if (parseDuration(d.retention) < 0n) p.add(prefix + 'retention', `must not be negative, got ${d.retention}`)
    } catch {
      p.add(prefix + 'retention', `want a duration such as 720h, got ${JSON.stringify(d.retention)}`)
    }
  }
  if ((d.searchAttributes?.length ?? 0) > 8) p.add(prefix + 'searchAttributes', `at most 8, got ${d.searchAttributes?.length}`)
  for (const [k, r] of d.reducers ?? []) {
    if (!['replace', 'append', 'merge', 'sum'].includes(r)) p.add(`${prefix}state.reducers.${k}`, `unknown reducer ${JSON.stringify(r)} (want replace, append, merge or sum)`)
  }
  lowerLimits(d, p, prefix)
  validateRunConcurrency(d.concurrency, p, prefix)
  const ids = new Set<string>()
  for (const [i, n] of d.nodes.entries()) {
    const at = `${prefix}${n.id !== '' ? `node ${JSON.stringify(n.id)}` : `nodes[${i}]`}`
    if (n.id === '') p.add(at, 'missing id')
    else if (n.id === 'START' || n.id === 'END' || n.id === 'CONTINUE') p.add(at, `${n.id} is reserved`)
    else if (!validToken(n.id)) p.add(at, `id ${JSON.stringify(n.id)} ${idRule}`)
    else if (ids.has(n.id)) p.add(at, 'duplicate node id')
    ids.add(n.id)
    if (n.type === '') p.add(at + ': type', 'missing node type')
    if (!validToken(n.queue)) p.add(at + ': queue', `queue ${JSON.stringify(n.queue)} ${idRule}`)
    if (n.local === true) p.add(at + ': local', 'can only be false (a node runs locally by its type, not by asking)')
    if (!['pure', 'read', 'write', 'external', 'human'].includes(n.effect)) p.add(at + ': effect', `unknown effect ${JSON.stringify(n.effect)} (want pure, read, write, external or human)`)
    if (!['none', 'before', 'after', 'both'].includes(n.checkpoint)) p.add(at + ': checkpoint', `unknown checkpoint ${JSON.stringify(n.checkpoint)} (want none, before, after or both)`)
    if (n.map !== undefined && n.map.over === '') p.add(at + ': map.over', 'missing expression')
    const bad = (f: string, msg: string) => p.add(`${at}: ${f}`, msg)
    validateConcurrency(n.concurrency, n.type, bad)
    validateRate(n.rate, n, bad)
  }
  for (const [i, e] of d.edges.entries()) {
    const at = `${prefix}edge ${i} (${e.from} -> ${e.to})`
    if (e.from === '' || (e.from !== 'START' && !ids.has(e.from))) p.add(at + ': from', e.from === '' ? 'missing' : e.from === 'END' || e.from === 'CONTINUE' ? `no edge may leave ${e.from}` : `unknown node ${JSON.stringify(e.from)}`)
    if (e.to === '' || (e.to !== 'END' && e.to !== 'CONTINUE' && !ids.has(e.to))) p.add(at + ': to', e.to === '' ? 'missing' : e.to === 'START' ? 'no edge may enter START' : `unknown node ${JSON.stringify(e.to)}`)
    if (e.onMissing !== '' && e.onMissing !== 'fail' && e.onMissing !== 'false') p.add(at + ': onMissing', `want "false" or "fail", got ${JSON.stringify(e.onMissing)}`)
    else if (e.onMissing !== '' && e.when === '') p.add(at + ': onMissing', 'the edge has no condition (when) to read a key')
  }
  for (const [name, sub] of d.graphs ?? []) {
    if (!validToken(name)) p.add(`${prefix}graphs`, `graph name ${JSON.stringify(name)} ${idRule}`)
    else if (sub.name !== name) p.add(`${prefix}graphs.${name}`, `graph's name ${JSON.stringify(sub.name)} differs from its key ${JSON.stringify(name)}`)
    validate(sub, p, `${prefix}graph ${JSON.stringify(name)}: `)
  }
}

// The limits' bounds (Go: pkg/graph MaxConcurrency, MaxRate, MaxLimitNameLen).
const maxConcurrency = 1000n
const maxRate = 1_000_000n
const maxLimitNameLen = 256
const millisecond = 1_000_000n

// coordinatorType says whether nodes of a type are the coordinator's own:
// they take no worker, queue, slot or rate.
function coordinatorType(t: string): boolean {
  return t === 'router' || t === 'human' || t === 'subgraph' || t === 'wait'
}

function checkName(name: string, f: string, bad: Report): void {
  const n = Buffer.byteLength(name, 'utf8')
  if (n > maxLimitNameLen) bad(f, `is ${n} characters, the limit is ${maxLimitNameLen}`)
}

// validateRunConcurrency checks the graph's run limit (its key's CEL is
// the coordinator's to compile).
function validateRunConcurrency(c: RunConcurrency | undefined, p: Problems, prefix: string): void {
  if (c === undefined) return
  const bad: Report = (f, msg) => p.add(prefix + f, msg)
  if (c.max < 1n) bad('concurrency.max', `must be at least 1, got ${c.max}`)
  else if (c.max > maxConcurrency) bad('concurrency.max', `must be at most ${maxConcurrency}, got ${c.max}`)
  checkName(c.name, 'concurrency.name', bad)
  if (!['', 'queue', 'cancel-newest', 'cancel-oldest'].includes(c.strategy)) {
    bad('concurrency.strategy', `unknown strategy ${JSON.stringify(c.strategy)} (want "queue", "cancel-newest" or "cancel-oldest")`)
  }
}

// validateConcurrency checks a node's concurrency limit (type: the node's).
function validateConcurrency(c: ConcurrencyLimit | undefined, type: string, bad: Report): void {
  if (c === undefined) return
  if (c.max < 1n) bad('concurrency.max', `must be at least 1, got ${c.max}`)
  else if (c.max > maxConcurrency) bad('concurrency.max', `must be at most ${maxConcurrency}, got ${c.max}`)
  checkName(c.name, 'concurrency.name', bad)
  if (coordinatorType(type)) bad('concurrency', `a ${type} node runs in the coordinator and takes no slot; limit the nodes that do the work`)
}

// validateRate checks a node's rate limit.
function validateRate(r: RateLimit | undefined, n: { type: string; map?: unknown; concurrency?: ConcurrencyLimit }, bad: Report): void {
  if (r === undefined) return
  if (r.limit < 1n) bad('rate.limit', `must be at least 1, got ${r.limit}`)
  else if (r.limit > maxRate) bad('rate.limit', `must be at most ${maxRate}, got ${r.limit}`)
  if (r.per < millisecond) bad('rate.per', `must be at least 1ms, got ${formatDuration(r.per)}`)
  checkName(r.name, 'rate.name', bad)
  if (coordinatorType(n.type)) bad('rate', `a ${n.type} node runs in the coordinator; limit the nodes that do the work`)
  else if (n.concurrency !== undefined) bad('rate', 'a node with a concurrency limit cannot have a rate limit too, yet')
}

// lowerLimits checks the graph's limits by type and queue and gives each
// valid one to the nodes it applies to that have no limit of their own,
// named "type/<type>" or "queue/<queue>" unless it names one, as Go's
// pkg/graph does at load: the canonical form records them on the nodes.
function lowerLimits(d: Definition, p: Problems, prefix: string): void {
  const l = d.limits
  if (l === undefined) return
  const okTypes = checkNodeLimits(l.types, 'types', 'type', new Set(d.nodes.map((n) => n.type)), p, prefix)
  const okQueues = checkNodeLimits(l.queues, 'queues', 'queue', new Set(d.nodes.map((n) => n.queue)), p, prefix)
  for (const n of d.nodes) {
    if (n.concurrency !== undefined || n.rate !== undefined) continue // its own limit replaces them
    const t = okTypes.get(n.type)
    const q = coordinatorType(n.type) ? undefined : okQueues.get(n.queue)
    const at = `${prefix}node ${JSON.stringify(n.id)}: `
    if (t !== undefined && q !== undefined) {
      p.add(at + 'type', `node is under both limits.types.${n.type} and limits.queues.${n.queue}: give it a limit of its own, or keep one of the two`)
    } else if (t !== undefined) giveLimits(n, t, 'type/' + n.type)
    else if (q !== undefined) giveLimits(n, q, 'queue/' + n.queue)
  }
}

// checkNodeLimits checks the entries of limits.<kind> and returns the valid ones.
function checkNodeLimits(entries: Map<string, NodeLimits> | undefined, kind: string, what: string, used: Set<string>, p: Problems, prefix: string): Map<string, NodeLimits> {
  const ok = new Map<string, NodeLimits>()
  for (const name of [...(entries?.keys() ?? [])].sort(compareUTF8)) {
    const e = entries?.get(name) as NodeLimits
    const at = `${prefix}limits.${kind}.${name}`
    const before = p.list.length
    const bad: Report = (f, msg) => p.add(`${at}.${f}`, msg)
    if (!used.has(name)) p.add(at, `no node of this graph has ${what} ${JSON.stringify(name)} (they have: ${[...used].sort(compareUTF8).join(', ')})`)
    else if (e.concurrency === undefined && e.rate === undefined) p.add(at, 'give a concurrency or a rate limit')
    const type = kind === 'queues' ? '' : name
    validateConcurrency(e.concurrency, type, bad)
    validateRate(e.rate, { type, concurrency: e.concurrency }, bad)
    if (p.list.length === before) ok.set(name, e)
  }
  return ok
}

// giveLimits gives node n an entry's limits, named name unless the entry
// names them; a map node's items take each of them, item by item.
function giveLimits(n: GNode, e: NodeLimits, name: string): void {
  if (e.concurrency !== undefined) n.concurrency = { ...e.concurrency, name: e.concurrency.name !== '' ? e.concurrency.name : name }
  if (e.rate !== undefined) n.rate = { ...e.rate, name: e.rate.name !== '' ? e.rate.name : name }
}

// canonicalJSON is Go's: the value re-encoded with sorted keys, integers
// kept as written, other numbers as float64.
function canonicalJSON(v: JValue): string {
  switch (v.kind) {
    case 'null':
      return 'null'
    case 'bool':
      return v.value ? 'true' : 'false'
    case 'string':
      return quote(v.value)
    case 'number':
      return normNumber(v.text)
    case 'array':
      return '[' + v.items.map(canonicalJSON).join(',') + ']'
    case 'object': {
      const m = new Map<string, JValue>()
      for (const [k, e] of v.members) m.set(k, e)
      return '{' + [...m.keys()].sort(compareUTF8).map((k) => quote(k) + ':' + canonicalJSON(m.get(k) as JValue)).join(',') + '}'
    }
  }
}

function normNumber(t: string): string {
  if (/^-?[0-9]+$/.test(t)) {
    const n = BigInt(t)
    if (n >= -(1n << 63n) && n < 1n << 63n) return t
    if (n >= 0n && n < 1n << 64n) return t
  }
  const f = Number(t)
  return Number.isFinite(f) ? formatFloat(f) : t
}

class Obj {
  private parts: string[] = []
  f(name: string, json: string): this {
    this.parts.push(quote(name) + ':' + json)
    return this
  }
  s(name: string, v: string, omitEmpty = true): this {
    return omitEmpty && v === '' ? this : this.f(name, quote(v))
  }
  i(name: string, v: bigint): this {
    return v === 0n ? this : this.f(name, v.toString())
  }
  done(): string {
    return '{' + this.parts.join(',') + '}'
  }
}

function mapJSON(m: Map<string, string>): string {
  return '{' + [...m.keys()].sort(compareUTF8).map((k) => quote(k) + ':' + quote(m.get(k) as string)).join(',') + '}'
}

function listJSON(l: string[]): string {
  return '[' + l.map(quote).join(',') + ']'
}

// renderDefinition writes the normalised definition in Go's struct order
// with its omitempty rules.
function renderDefinition(d: Definition): string {
  const o = new Obj().s('name', d.name, false).s('version', d.version).s('description', d.description)
  if (d.metadata !== undefined) o.f('metadata', mapJSON(d.metadata))
  if (d.reducers !== undefined) o.f('state', `{"reducers":${mapJSON(d.reducers)}}`)
  o.i('maxIterations', d.maxIterations)
  o.f('nodes', '[' + d.nodes.map(renderNode).join(',') + ']')
  o.f('edges', '[' + d.edges.map(renderEdge).join(',') + ']')
  if (d.graphs !== undefined) {
    o.f('graphs', '{' + [...d.graphs.keys()].sort(compareUTF8).map((k) => quote(k) + ':' + renderDefinition(d.graphs?.get(k) as Definition)).join(',') + '}')
  }
  o.s('retention', d.retention)
  if (d.searchAttributes !== undefined && d.searchAttributes.length > 0) o.f('searchAttributes', listJSON(d.searchAttributes))
  if (d.continueAsNew !== undefined) {
    const c = new Obj().s('graph', d.continueAsNew.graph)
    if (d.continueAsNew.onHistoryBudget) c.f('onHistoryBudget', 'true')
    o.f('continueAsNew', c.i('maxStateBytes', d.continueAsNew.maxStateBytes).done())
  }
  if (d.concurrency !== undefined) {
    const c = d.concurrency
    o.f('concurrency', new Obj().f('max', c.max.toString()).s('key', c.key).s('name', c.name).s('strategy', c.strategy).done())
  }
  if (d.limits !== undefined) {
    const lo = new Obj()
    for (const k of ['types', 'queues'] as const) {
      const m = d.limits[k]
      if (m === undefined || m.size === 0) continue
      lo.f(k, '{' + [...m.keys()].sort(compareUTF8).map((name) => quote(name) + ':' + renderNodeLimits(m.get(name) as NodeLimits)).join(',') + '}')
    }
    o.f('limits', lo.done())
  }
  return o.done()
}

function renderNode(n: GNode): string {
  const o = new Obj().s('id', n.id, false).s('name', n.name).s('description', n.description)
  if (n.metadata !== undefined) o.f('metadata', mapJSON(n.metadata))
  o.s('type', n.type, false).s('queue', n.queue)
  if (n.local !== undefined) o.f('local', n.local ? 'true' : 'false')
  if (n.config !== undefined) o.f('config', canonicalJSON(n.config))
  if (n.inputs !== undefined) o.f('inputs', listJSON(n.inputs))
  if (n.outputs !== undefined) o.f('outputs', listJSON(n.outputs))
  if (n.inputSchema !== undefined) o.f('inputSchema', canonicalJSON(n.inputSchema))
  if (n.outputSchema !== undefined) o.f('outputSchema', canonicalJSON(n.outputSchema))
  o.s('outputAs', n.outputAs).s('when', n.when)
  if (n.join !== undefined) o.f('join', n.join.kind === 'n' ? n.join.n.toString() : quote(n.join.kind))
  if (n.map !== undefined) o.f('map', new Obj().s('over', n.map.over, false).i('concurrency', n.map.concurrency).done())
  if (n.retry !== undefined) {
    const r = n.retry
    const ro = new Obj().i('maxAttempts', r.maxAttempts)
    if (r.initialInterval !== 0n) ro.f('initialInterval', quote(formatDuration(r.initialInterval)))
    if (r.backoffCoefficient !== 0) ro.f('backoffCoefficient', formatFloat(r.backoffCoefficient))
    if (r.maxInterval !== 0n) ro.f('maxInterval', quote(formatDuration(r.maxInterval)))
    if (r.jitter !== undefined) ro.f('jitter', formatFloat(r.jitter))
    if (r.nonRetryableErrors !== undefined) ro.f('nonRetryableErrors', listJSON(r.nonRetryableErrors))
    o.f('retry', ro.done())
  }
  if (n.timeout !== 0n) o.f('timeout', quote(formatDuration(n.timeout)))
  if (n.heartbeat !== 0n) o.f('heartbeat', quote(formatDuration(n.heartbeat)))
  o.i('maxIterations', n.maxIterations).s('effect', n.effect).s('checkpoint', n.checkpoint)
  if (n.fallback !== undefined) o.f('fallback', canonicalJSON(n.fallback))
  if (n.concurrency !== undefined) o.f('concurrency', renderConcurrency(n.concurrency))
  if (n.rate !== undefined) o.f('rate', renderRate(n.rate))
  return o.done()
}

function renderConcurrency(c: ConcurrencyLimit): string {
  return new Obj().f('max', c.max.toString()).s('key', c.key).s('name', c.name).done()
}

function renderRate(r: RateLimit): string {
  return new Obj().f('limit', r.limit.toString()).f('per', quote(formatDuration(r.per))).s('key', r.key).s('units', r.units).s('name', r.name).done()
}

function renderNodeLimits(e: NodeLimits): string {
  const o = new Obj()
  if (e.concurrency !== undefined) o.f('concurrency', renderConcurrency(e.concurrency))
  if (e.rate !== undefined) o.f('rate', renderRate(e.rate))
  return o.done()
}

function renderEdge(e: Edge): string {
  const o = new Obj().s('from', e.from, false).s('to', e.to, false).s('action', e.action).s('when', e.when)
  if (e.timeout) o.f('timeout', 'true')
  return o.s('onMissing', e.onMissing).done()
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] as number) + 1, (cur[j - 1] as number) + 1, (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[b.length] as number
}
