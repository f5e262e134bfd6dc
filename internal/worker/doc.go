// Package worker is the worker runtime: it pulls node-ready work items
// from the task queues, runs each node through the node contract (input
// schema, Validate, ShouldExecute, hooks, prep → exec → post, declared
// outputs, Fallback), heartbeats, and appends the outcome before it acks.
// It is engine code: the coordinator runs its local nodes through the same
// steps (InvokeLocal), and the worker daemon (internal/nodeworker) runs a
// Worker with the built-in executors (package builtin below).
//
// pkg/worker is its face: the SDK users import, type aliases and thin
// constructors over this package, documented there (the node contract,
// delivery, heartbeats, failures, filters).
package worker
