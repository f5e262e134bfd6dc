// The errors of events and the store, named as pkg/events names them.

/** WeftError is the base of the SDK's own errors; code names the Go sentinel it stands for. */
export class WeftError extends Error {
  override name = 'WeftError'
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}

export type ErrorCode =
  | 'MalformedEvent'
  | 'UnknownType'
  | 'Misplaced'
  | 'Conflict'
  | 'RunExists'
  | 'RunNotFound'
  | 'PayloadTooLarge'
  | 'DuplicateMismatch'
  | 'InvalidID'
  | 'RunEnded'
  | 'SignalRefused'
  | 'InvalidInput'
  | 'InvalidGraph'
  | 'Timeout'
  | 'KeyMissing'
  | 'Unresolvable'
  | 'BadKey'

/** isWeftError reports whether err is a WeftError with the code. */
export function isWeftError(err: unknown, code?: ErrorCode): err is WeftError {
  return err instanceof WeftError && (code === undefined || err.code === code)
}
