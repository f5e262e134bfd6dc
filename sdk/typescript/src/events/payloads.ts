// The payloads this SDK reads and writes (Go: pkg/events payloads.go). The
// encoders write each payload's fields in the Go struct's order, with its
// omitempty rules and Go's escaping, so that the bytes are those the Go SDK
// writes for the same values.

import { compact, marshal, quote } from '../internal/gojson.js'
import type { NodeRef } from './ids.js'

/** Failure is a structured error, stored in the log as data. */
export interface Failure {
  type: string
  message: string
  retryable: boolean
  /** details is any JSON value (as JSON text when written). */
  details?: unknown
  cause?: Failure
}

/** Failure types the engine writes. */
export const FailureType = {
  Timeout: 'Timeout',
  PayloadTooLarge: 'PayloadTooLarge',
  UnknownType: 'UnknownNodeType',
  Cancelled: 'Cancelled',
  Validation: 'ValidationError',
  Panic: 'Panic',
  InvalidGraph: 'InvalidGraph',
  RunNotFound: 'RunNotFound',
  RunStartMismatch: 'RunStartMismatch',
  Error: 'Error',
} as const

/** NodeReadyData is a work item (as read: JSON values decoded). */
export interface NodeReadyData extends NodeRef {
  attempt: number
  type: string
  queue: string
  config?: unknown
  input?: unknown
  local?: unknown
  invocation?: unknown
  idempotencyKey: string
  /** startSeq: the stream sequence of the run's start the coordinator folded (absent: not said); a worker reads no other start for the item. */
  startSeq?: number
  timeoutMs?: number
  heartbeatMs?: number
  maxAttempts?: number
  effect?: string
  outputs?: string[]
  inputSchema?: unknown
  outputSchema?: unknown
}

/** FilterNote records what one invocation filter did. */
export interface FilterNote {
  filter: string
  action: string
  note?: string
}

/** Action is an action a result triggers, with optional branch-local data. */
export interface ActionOut {
  name: string
  /** data: JSON text. */
  data?: string
}

// Fields writes a JSON object field by field. Names are this file's
// literals (plain ASCII: written as they are, unquoted by quote).
class Fields {
  private text = ''
  raw(name: string, json: string): this {
    this.text += (this.text === '' ? '"' : ',"') + name + '":' + json
    return this
  }
  str(name: string, v: string, omitEmpty = false): this {
    return omitEmpty && v === '' ? this : this.raw(name, quote(v))
  }
  int(name: string, v: number, omitEmpty = false): this {
    return omitEmpty && v === 0 ? this : this.raw(name, String(Math.trunc(v)))
  }
  bool(name: string, v: boolean, omitEmpty = false): this {
    return omitEmpty && !v ? this : this.raw(name, v ? 'true' : 'false')
  }
  /** rawOpt writes JSON text, compacted, when there is some (json.RawMessage, omitempty). */
  rawOpt(name: string, json: string | undefined): this {
    return json === undefined || json === '' ? this : this.raw(name, compact(json))
  }
  ref(r: NodeRef): this {
    this.str('node', r.node).int('iteration', r.iteration)
    if (r.item !== undefined && r.item !== null) this.int('item', r.item)
    return this
  }
  done(): string {
    return '{' + this.text + '}'
  }
}

/** encodeFailure writes a Failure (details: any JSON value). */
export function encodeFailure(f: Failure): string {
  const o = new Fields().str('type', f.type).str('message', f.message).bool('retryable', f.retryable)
  if (f.details !== undefined) o.raw('details', marshal(f.details))
  if (f.cause !== undefined) o.raw('cause', encodeFailure(f.cause))
  return o.done()
}

function notes(o: Fields, name: string, fs: FilterNote[] | undefined): void {
  if (fs === undefined || fs.length === 0) return
  o.raw(name, '[' + fs.map((f) => new Fields().str('filter', f.filter).str('action', f.action).str('note', f.note ?? '', true).done()).join(',') + ']')
}

export function encodeNodeInvoking(d: NodeRef & { attempt: number; delivery: number; worker: string; filters?: FilterNote[] }): string {
  const o = new Fields().ref(d).int('attempt', d.attempt).int('delivery', d.delivery).str('worker', d.worker)
  notes(o, 'filters', d.filters)
  return o.done()
}

export interface NodeInvokedOut extends NodeRef {
  attempt: number
  delivery: number
  /** output, updates' values: JSON text. */
  output?: string
  updates?: [string, string][]
  actions?: ActionOut[]
  filters?: FilterNote[]
  durationMs: number
  worker: string
  fallback?: boolean
}

export function encodeNodeInvoked(d: NodeInvokedOut): string {
  const o = new Fields().ref(d).int('attempt', d.attempt).int('delivery', d.delivery, true).rawOpt('output', d.output)
  if (d.updates !== undefined && d.updates.length > 0) {
    const sorted = [...d.updates].sort((a, b) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])))
    o.raw('updates', '{' + sorted.map(([k, v]) => quote(k) + ':' + compact(v)).join(',') + '}')
  }
  if (d.actions !== undefined && d.actions.length > 0) {
    o.raw('actions', '[' + d.actions.map((a) => new Fields().str('name', a.name).rawOpt('data', a.data).done()).join(',') + ']')
  }
  notes(o, 'filters', d.filters)
  return o.int('durationMs', d.durationMs, true).str('worker', d.worker, true).bool('fallback', d.fallback ?? false, true).done()
}

export function encodeNodeFailed(d: NodeRef & { attempt: number; delivery: number; error: Failure; durationMs: number; worker: string }): string {
  return new Fields()
    .ref(d)
    .int('attempt', d.attempt)
    .int('delivery', d.delivery, true)
    .raw('error', encodeFailure(d.error))
    .int('durationMs', d.durationMs, true)
    .str('worker', d.worker, true)
    .done()
}

export function encodeNodeCancelled(d: NodeRef & { attempt: number; delivery: number; by: string; reason: string }): string {
  return new Fields().ref(d).int('attempt', d.attempt).int('delivery', d.delivery, true).str('by', d.by).str('reason', d.reason, true).done()
}

export function encodeHeartbeat(d: NodeRef & { attempt: number; details?: string }): string {
  return new Fields().ref(d).int('attempt', d.attempt).rawOpt('details', d.details).done()
}

export interface RunStartedOut {
  graphName: string
  graphDigest: string
  /** graph, input, invocation: JSON text. */
  graph: string
  input?: string
  invocation?: string
  startedBy?: string
  retention?: string
  /** nonce: random; the ids of the run's child runs are derived from it (newNonce). */
  nonce?: string
}

export function encodeRunStarted(d: RunStartedOut): string {
  return new Fields()
    .str('graphName', d.graphName)
    .str('graphDigest', d.graphDigest)
    .raw('graph', compact(d.graph))
    .rawOpt('input', d.input)
    .rawOpt('invocation', d.invocation)
    .str('startedBy', d.startedBy ?? '', true)
    .str('retention', d.retention ?? '', true)
    .str('nonce', d.nonce ?? '', true)
    .done()
}

export function encodeRunCancelRequested(d: { by: string; reason?: string; terminate?: boolean }): string {
  return new Fields().str('by', d.by).str('reason', d.reason ?? '', true).bool('terminate', d.terminate ?? false, true).done()
}

export function encodeSignalReceived(d: { node: string; data?: string; by?: string }): string {
  return new Fields().str('node', d.node).rawOpt('data', d.data).str('by', d.by ?? '', true).done()
}
