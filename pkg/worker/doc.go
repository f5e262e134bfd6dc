// Package worker is Weft's worker SDK: it runs the nodes of workflow graphs.
// It is a face (type aliases and thin constructors, sdk.go) over the
// engine's worker runtime, internal/worker, which the coordinator also
// uses to run its local nodes.
//
// What it offers:
//
//   - Worker, made by New over an events.Store with its options (WithName,
//     WithQueues, WithConcurrency, WithQueueConcurrency, WithAckWait,
//     WithHeartbeat, WithDrainTimeout, WithAnnounceInterval, WithLogger,
//     WithSchemaLoader, WithTracerProvider, WithMeterProvider), its
//     Handle (a node type's Node), Run, Name, Types and Stats.
//   - The node contract: Node and NodeFunc, Input and Result, Action, and
//     the optional interfaces a node may implement: Validator, Skipper,
//     BeforeHook, AfterHook, FailedHook, Fallbacker, and the phases
//     Preparer, Executor and Poster (Phases; RunPhases runs them).
//   - Invocation filters: InvokingFilter, InvokedFilter (and their Func
//     forms), FilterDecision with Pass, Modify and Cancel, added with
//     WithInvokingFilter and WithInvokedFilter.
//   - Failures and progress: Error, NonRetryable, Retryable, FieldError,
//     Heartbeat, FilterCancelledBy and the Filter… outcomes,
//     FailureRunNotFound, FailureRunStartMismatch, DefaultFallbackTimeout, HeartbeatEventInterval;
//     the errors ErrAlreadyRunning, ErrNoWorkItem,
//     ErrSchemaRefRefused; Announcement and LiveWorkers, the workers that
//     announced themselves; DefaultQueue; Protocol, the version of the
//     wire protocol the worker speaks (docs/worker-protocol.md, which a
//     worker in any language implements; internal/conformance checks).
//
// The built-in node types are in pkg/worker/builtin. The queues' consumers
// and the announcements bucket are set up by the engine
// (internal/workqueue), which also runs the coordinator's local nodes
// through the same steps.
//
// A Worker pulls node-ready events (the work items the coordinator appends to
// the events stream) from one or more task queues, runs the Node registered
// for each item's node type, and appends the outcome to the run's log:
//
//	NodeReady ──pull──▶ NodeInvoking ──Execute──▶ NodeInvoked | NodeFailed | NodeCancelled ──▶ ack
//
// Every worker of a queue shares one durable JetStream pull consumer,
// "work-<queue>" (internal/workqueue), filtered on the queue's node-ready subjects
// (eventlog.QueueFilter).
// Delivery is at least once: a work item is acknowledged only after its
// outcome is in the log, so a worker that dies mid-node leaves the item to be
// redelivered to another worker once the consumer's AckWait passes. Each
// delivery is visible in the log as a NodeInvoking event with its delivery
// number; the outcome of an attempt is de-duplicated by its event id, so the
// log holds at most one NodeInvoked for it. A node with side effects should
// guard them with Input.IdempotencyKey, which is the same on every delivery
// of an attempt.
//
// While a node runs, the worker tells JetStream it is still working
// (Msg.InProgress) every heartbeat interval; if that keeps failing the node's
// context is cancelled and the item is left to be redelivered. The node's
// context also ends when the node's timeout passes (the outcome is a
// retryable failure of type "Timeout") and when its run is cancelled (the
// worker listens for run-cancel requests; the outcome is NodeCancelled).
//
// A node reports a failure by returning an error. A *Error (see NonRetryable
// and Retryable) controls the failure's type, whether the coordinator may
// retry it, and its details; any other error is a retryable failure of type
// "Error". A panic is a non-retryable failure of type "Panic". The
// coordinator decides about retries; the worker only records facts.
//
// Items whose node type this worker has no handler for are not failed: they
// are handed back with a delay, so that a worker that has the handler takes
// them, and so are node-ready events of a newer type version than this
// worker's (a worker that speaks it takes them). Items that are not valid
// node-ready events are terminated and counted as malformed.
//
// Run blocks until its context ends and then drains: it stops pulling, hands
// back items it has buffered but not started, and lets nodes in flight finish
// within the drain timeout; nodes still running after it are cancelled and
// handed back for redelivery.
//
// # The node contract
//
// A Node's one required method is Execute. A node may also implement
// optional interfaces, found by type assertion: Validator (check the input
// before it runs; a refusal is a non-retryable "ValidationError"), Skipper
// (decide at run time not to run), Executor with Preparer and Poster (the
// prep → exec → post phases), BeforeHook, AfterHook and FailedHook
// (lifecycle hooks) and Fallbacker (a result after the last attempt failed,
// recorded as a NodeInvoked with Fallback set, so the flow goes on). The
// order in which the worker runs them is in contract.go's comment and on
// each interface. NodeFunc and Phases adapt plain functions.
//
// # Work items by reference
//
// A work item is small: the node's reference, attempt, type and queue, its
// policy (timeout, heartbeat, retry limit, effect class, declared output
// keys), the idempotency key, and its input (the state view) and local
// data. The node's config and its input and output JSON Schemas (in the
// graph) and the run's invocation state are not copied into every item:
// the worker reads them from the run's run-started event, once per run
// (a direct get of the last message on its start subject, kept in an LRU;
// the graph's node specs are shared by runs of one graph digest), see
// runinfo.go. A work item that carries them itself, as older coordinators
// wrote them, is used as it is. A run whose start is not in the stream, or
// whose graph lacks the node, fails the attempt at once with a
// non-retryable "RunNotFound" or "InvalidGraph". Schemas are validated with
// santhosh-tekuri/jsonschema (a violation is a non-retryable
// "ValidationError" naming the field as a JSON pointer); a schema loads no
// other document ($ref to a file or a URL fails the node, naming the URL
// and nothing of its content) unless the worker has WithSchemaLoader; an
// update to a key the node does not declare as an output is a
// ValidationError.
//
// # Work of ended runs
//
// A worker does not start work for a run that has ended. Before it runs an
// item that was delivered before, or that waited in its queue longer than a
// couple of seconds (staleAfter), it looks for the run's ending decision
// (eventlog.HasEnd: the message counts of the run's decision subjects, so
// that its role may count runs' ends without reading them, their outputs;
// a run seen ended is remembered); the hot path, a fresh first delivery,
// reads nothing. A worker's reads are each named in their request subject,
// so that NATS permissions scope them (deploy/SECURITY.md). Work of an ended run is recorded as
// NodeCancelled by "worker", reason "run ended before the work started",
// and acknowledged. A cancel request seen on core NATS also stops the
// run's nodes in flight at once. A work item put back into the log from an
// archive (eventlog.HdrRestored, 'weft admin restore') is acknowledged and
// nothing more: it records work done before.
//
// # Progress
//
// A node reports progress with Heartbeat(ctx, details) from its Execute (or
// any step): the work item is marked in progress, extending its ack
// deadline, and a Heartbeat event with the details is appended to the
// run's log, at most one per HeartbeatEventInterval (10s) per attempt, so
// that a node calling it in a loop does not flood the log.
//
// # Invocation filters
//
// WithInvokingFilter and WithInvokedFilter add filters that run around every
// node, in registration order. An invoking filter may change the input or
// cancel the execution (a NodeCancelled by "filter:<name>"; the coordinator
// routes a cancelled node like a skipped one: none of its edges is taken);
// an invoked filter may replace the result. Each filter's action is recorded
// as an events.FilterNote on NodeInvoking or NodeInvoked.
//
// # Retries, timeouts and heartbeats
//
// Retries are the coordinator's: a failed attempt that is retryable under
// the node's retry policy (graph.RetryPolicy, defaults in
// graph.DefaultRetryPolicy) gets a RetryScheduled and a durable timer (a
// JetStream message schedule), which survives the restart of every process;
// the next attempt is a new work item with Attempt one higher. A node's
// timeout is enforced by the worker (the node's context ends and the attempt
// fails with a retryable "Timeout"), and by the log: a worker that dies or
// stops heartbeating leaves its item unacknowledged, and JetStream delivers
// the same attempt again after the queue's AckWait (a new NodeInvoking with a
// higher delivery number). There is no separate coordinator-side timeout
// timer: redelivery after AckWait is what recovers a lost attempt, so keep
// AckWait short enough for your nodes' deadlines and the heartbeat (a third
// of it by default) running.
//
// # Effects, idempotency and the guarantee
//
// Execution is at least once: a node may run more than once for one attempt
// (redelivery after a crash, a lost ack). State transitions are exactly once:
// the log records at most one outcome per attempt (outcome event ids are
// de-duplicated by JetStream and the fold is first-wins), and the
// coordinator's decisions are de-duplicated and written under optimistic
// concurrency. Input.IdempotencyKey is the same on every delivery of an
// attempt (and differs between attempts), so a side effect guarded by it (the
// http and llm executors send it as the Idempotency-Key header) is applied
// once. The node's effect class (Input.Effect) says what re-running costs:
// "pure" and "read" nodes may be retried and replayed freely; "write" and
// "external" nodes only when they honour the idempotency key; "human" nodes
// are asked once (the coordinator never retries them).
//
// # Operations
//
// WithConcurrency bounds the nodes a worker runs at once and
// WithQueueConcurrency those of one queue. On SIGTERM (the context of Run
// ending) the worker drains. A running worker announces its queues and node
// types in the KV bucket "weft-workers" (see LiveWorkers); work of a type no
// live worker serves stays in its queue, as node status "ready", until one
// comes.
//
// Each delivery of a node runs under an OpenTelemetry span, and node
// durations, queue waits and failures are counted; WithTracerProvider and
// WithMeterProvider choose the providers (default the OpenTelemetry
// globals).
//
// Package builtin holds the executors the nodeworker daemon registers
// (echo, noop, sleep, fail, http, transform, llm).
package worker
