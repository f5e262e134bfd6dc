// Package worker is Weft's worker SDK: it runs the nodes of workflow graphs.
//
// A Worker pulls node-ready events (the work items the coordinator appends to
// the events stream) from one or more task queues, runs the Node registered
// for each item's node type, and appends the outcome to the run's log:
//
//	NodeReady ──pull──▶ NodeInvoking ──Execute──▶ NodeInvoked | NodeFailed | NodeCancelled ──▶ ack
//
// Every worker of a queue shares one durable JetStream pull consumer,
// "work-<queue>" (see EnsureQueue), filtered on the queue's node-ready subjects
// (events.QueueFilter).
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
// them. Items that are not valid node-ready events are terminated and
// counted as malformed.
//
// Run blocks until its context ends and then drains: it stops pulling, hands
// back items it has buffered but not started, and lets nodes in flight finish
// within the drain timeout; nodes still running after it are cancelled and
// handed back for redelivery.
//
// Package builtin holds the executors the nodeworker daemon registers
// (echo, noop, sleep, fail, http, transform).
package worker
