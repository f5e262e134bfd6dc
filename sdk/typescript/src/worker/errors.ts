// Node failures (Go: pkg/worker errors.go). A node fails by throwing. A
// NodeError says the failure's type, whether the coordinator may retry it,
// and its details; any other Error is a retryable failure of type "Error";
// a thrown value that is not an Error (a string, an object) is a retryable
// failure of type "Error" whose message is the value.

import { type Failure, FailureType } from '../events/payloads.js'
import { marshal } from '../internal/gojson.js'
import { errorMessage } from '../internal/util.js'

/** NodeError is a node failure with a type, whether it may be retried, and details (any JSON value). */
export class NodeError extends Error {
  override name = 'NodeError'
  readonly type: string
  readonly retryable: boolean
  readonly details: unknown
  constructor(type: string, message: string, o: { retryable?: boolean; details?: unknown; cause?: unknown } = {}) {
    super(message, o.cause !== undefined ? { cause: o.cause } : undefined)
    this.type = type
    this.retryable = o.retryable ?? false
    this.details = o.details
  }
}

/** nonRetryable is a failure of type `type` that the coordinator does not retry. */
export function nonRetryable(type: string, message: string, details?: unknown): NodeError {
  return new NodeError(type, message, { retryable: false, details })
}

/** retryable is a failure of type `type` that the coordinator may retry (within the node's retry policy). */
export function retryable(type: string, message: string, details?: unknown): NodeError {
  return new NodeError(type, message, { retryable: true, details })
}

/** failureOf maps what a node threw onto the failure stored in the log. */
export function failureOf(err: unknown, depth = 0): Failure {
  if (!(err instanceof NodeError)) {
    const f: Failure = { type: FailureType.Error, message: errorMessage(err), retryable: true }
    if (err instanceof Error && err.cause !== undefined && depth < 8) f.cause = failureOf(err.cause, depth + 1)
    return f
  }
  const f: Failure = { type: err.type === '' ? FailureType.Error : err.type, message: err.message, retryable: err.retryable }
  if (err.details !== undefined) {
    try {
      marshal(err.details)
      f.details = err.details
    } catch (e) {
      f.details = `details do not encode as JSON: ${errorMessage(e)}`
    }
  }
  if (err.cause !== undefined && depth < 8) f.cause = failureOf(err.cause, depth + 1)
  return f
}

/** DrainTimeoutError is what Worker.run rejects with when nodes had to be handed back. */
export class DrainTimeoutError extends Error {
  override name = 'DrainTimeoutError'
  constructor() {
    super('drain timeout: nodes still running were handed back')
  }
}
