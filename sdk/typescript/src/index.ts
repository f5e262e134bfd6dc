// @weft/sdk: Weft's TypeScript worker SDK and client. A worker runs the
// nodes of workflow graphs from Weft's task queues on NATS JetStream; a
// client starts runs, waits for them, signals and cancels them, and reads
// their status and events. Both speak Weft's log protocol exactly as the Go
// engine does: the same CloudEvents headers, payloads, ids and subjects.

export { Worker, type WorkerOptions, type RunOptions, type Stats, DefaultQueue, DefaultConcurrency, DefaultDrainTimeout, DefaultAckWait, DefaultFallbackTimeout, HeartbeatEventInterval, ensureQueue, queueConsumer } from './worker/worker.js'
export type { Input, Result, Action, Node, NodeFunc, NodeContext, AbortKind } from './worker/node.js'
export { WeftAbort } from './worker/node.js'
export { NodeError, nonRetryable, retryable, failureOf, DrainTimeoutError } from './worker/errors.js'
export { Announcer, type Announcement, WorkersBucket, Protocol } from './worker/announce.js'
export { Client, type ClientOptions, type StartOptions, type SignalOptions, type RunEvent } from './client/client.js'
export { type RunStatus, type RunState, type NodeSummary, ended } from './client/fold.js'
export { type Graph, GraphError, loadGraphFile, parseGraph } from './graph/graph.js'
export { connect, connectionOptions, type Connection, type ConnectOptions, DefaultURL } from './connect.js'
export { Store, AnySeq, type RawMsg, decodeStored } from './store.js'
export { type WeftEvent, type Wire, encode, decode, newEvent, formatTime, graphDigest } from './events/envelope.js'
export { type Key, type KeyRing, ContentSealed, ContentRef, ExtKeyID, EnvEncryptKeys, useKeys, sealing, parseKeyRing, loadKeys } from './events/seal.js'
export { WeftError, isWeftError, type ErrorCode } from './events/errors.js'
export { isRef, resolveRef, offload, type OffloadEvent, PayloadsBucket, DefaultOffloadAt, MaxPayloadObject, ChunkSize } from './events/offload.js'
export { decisionId, idempotencyKey, newNonce, newRunId, refKey, type NodeRef } from './events/ids.js'
export { type Failure, FailureType } from './events/payloads.js'
export { EventType, Source, LocalQueue, DefaultStream, validToken, slot, subjectFor, runFilter, queueFilter, startedSubject, childStartedSubject, terminalSubjects } from './events/subjects.js'
export { NotJSONError, RawJSON, marshal as marshalJSON } from './internal/gojson.js'
export { type Logger, consoleLogger } from './internal/util.js'
