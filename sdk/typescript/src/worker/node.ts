// The node contract (Go: pkg/worker node.go, contract.go). A node type is
// an async function, or an object with the optional parts of the contract.
// The worker runs one execution in this order:
//
//  1. the node's input schema (from the graph), then validate;
//  2. shouldExecute: false ends the execution as a skip;
//  3. before;
//  4. prep → exec → post when the node has exec, else execute;
//  5. the node's declared outputs and output schema (from the graph);
//  6. after on success; failed on failure, then, when the failed attempt is
//     the last one, fallback.
//
// A failure anywhere fails the attempt as a throw from execute does.

import type { Context as OtelContext } from '@opentelemetry/api'
import type { Logger } from '../internal/util.js'

/** Input is what a node execution gets. Values are plain JSON values. */
export interface Input<State = Record<string, unknown>, Config = any> {
  runId: string
  /** nodeId is the node's id in the graph; type names its node type. */
  nodeId: string
  type: string
  /** queue is the task queue the work came from. */
  queue: string
  /** iteration is the node's activation (1-based), attempt the attempt of it (1-based), delivery how often this attempt's work item was delivered. */
  iteration: number
  attempt: number
  delivery: number
  /** item is the index of the item of a mapped node. */
  item?: number
  /** config is the node's configuration from the graph (undefined when it has none). */
  config: Config
  /** state is the node's view of the run's shared state (its input state). */
  state: State
  /** local is branch-local data: the forking data of the actions that led here, or the item of a map. */
  local: unknown
  /** invocation is the run's invocation state: runtime context given at start, read-only. */
  invocation: Record<string, unknown>
  /** idempotencyKey is the same on every delivery of this attempt: guard side effects with it. */
  idempotencyKey: string
  /** maxAttempts is the node's retry limit (0: unknown); attempt === maxAttempts is the last attempt. */
  maxAttempts: number
  /** effect is the node's effect class ("pure", "read", "write", "external", "human"). */
  effect: string
}

/** Action is an action a result triggers (it labels the edges the run follows), with optional branch-local data. */
export type Action = string | { name: string; data?: unknown }

/** Result is a node's success: its output, the state updates it makes, the actions it triggers. All values must be JSON. */
export interface Result {
  output?: unknown
  updates?: Record<string, unknown>
  actions?: Action[]
}

/** NodeContext is what a running node may use besides its input. */
export interface NodeContext {
  /**
   * signal aborts when the node must stop: its run was cancelled, its
   * timeout passed, the worker is draining and the drain timeout passed,
   * or its work item's heartbeat was lost. signal.reason says which (a
   * WeftAbort).
   */
  signal: AbortSignal
  /**
   * heartbeat reports progress: it marks the work item in progress
   * (extending its ack deadline) and appends a Heartbeat event with the
   * details (any JSON value) to the run's log, at most one per
   * HeartbeatEventInterval (or the node's heartbeat interval, when
   * shorter) per attempt; the first call's at once.
   */
  heartbeat(details?: unknown): Promise<void>
  log: Logger
  /** otel is the OpenTelemetry context of the node's span: start the node's own spans in it. */
  otel: OtelContext
}

/** NodeFunc is a node type as a function. */
export type NodeFunc<S = any, C = any> = (input: Input<S, C>, ctx: NodeContext) => Result | void | Promise<Result | void>

/** Node is a node type with the optional parts of the contract. */
export interface Node<S = any, C = any> {
  /** execute runs the node; required unless the node has exec. */
  execute?: NodeFunc<S, C>
  /** validate checks the input before the node runs; a throw fails the attempt with a non-retryable "ValidationError". */
  validate?(input: Input<S, C>): void | Promise<void>
  /** shouldExecute false skips the work: a success with no output, updates or actions, noted as "skipped". */
  shouldExecute?(input: Input<S, C>, ctx: NodeContext): boolean | Promise<boolean>
  before?(input: Input<S, C>, ctx: NodeContext): void | Promise<void>
  /** after runs after a success, with the result, which it may change. */
  after?(input: Input<S, C>, result: Result, ctx: NodeContext): void | Promise<void>
  /** failed runs after every failed attempt, with what it failed with; it cannot change the outcome. */
  failed?(input: Input<S, C>, err: unknown, ctx: NodeContext): void | Promise<void>
  /** fallback gives a result after the last attempt failed (not retryable, or attempt === maxAttempts), so that the flow goes on. */
  fallback?(input: Input<S, C>, err: unknown, ctx: NodeContext): Result | void | Promise<Result | void>
  /** prep reads the input and returns what exec needs (default: the input state). */
  prep?(input: Input<S, C>, ctx: NodeContext): unknown
  /** exec does the work from prep's result only. */
  exec?(prep: any, ctx: NodeContext): unknown
  /** post makes the result from the input, prep's and exec's results (default: exec's result is the output). */
  post?(input: Input<S, C>, prep: any, exec: any, ctx: NodeContext): Result | void | Promise<Result | void>
}

/** AbortKind says why a node's signal aborted. */
export type AbortKind = 'cancelled' | 'timeout' | 'drain' | 'heartbeat'

/** WeftAbort is the reason of a node's aborted signal. */
export class WeftAbort extends Error {
  override name = 'AbortError'
  constructor(
    readonly kind: AbortKind,
    message: string,
    /** by and reason say who cancelled the run, and why (kind "cancelled"). */
    readonly by = '',
    readonly reason = '',
  ) {
    super(message)
  }
}
