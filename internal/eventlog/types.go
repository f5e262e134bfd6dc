package eventlog

// Type is a CloudEvents type of the Weft catalogue. Types are versioned: a
// payload change that old readers cannot take gets a new version suffix.
type Type string

// The catalogue.
const (
	RunStarted         Type = "dev.weft.run.started.v1"
	RunCompleted       Type = "dev.weft.run.completed.v1"
	RunFailed          Type = "dev.weft.run.failed.v1"
	RunCancelRequested Type = "dev.weft.run.cancel_requested.v1"
	RunCancelled       Type = "dev.weft.run.cancelled.v1"

	NodeReady    Type = "dev.weft.node.ready.v1"
	NodeInvoking Type = "dev.weft.node.invoking.v1"
	NodeInvoked  Type = "dev.weft.node.invoked.v1"
	NodeFailed   Type = "dev.weft.node.failed.v1"
	NodeSkipped  Type = "dev.weft.node.skipped.v1"
	NodeWaiting  Type = "dev.weft.node.waiting.v1"
	NodeRouted   Type = "dev.weft.node.routed.v1"
	NodeCanceled Type = "dev.weft.node.cancelled.v1"
	Heartbeat    Type = "dev.weft.node.heartbeat.v1"
	NodeStep     Type = "dev.weft.node.step.v1"

	RetryScheduled   Type = "dev.weft.retry.scheduled.v1"
	TimerFired       Type = "dev.weft.timer.fired.v1"
	SignalReceived   Type = "dev.weft.signal.received.v1"
	ChildRunStarted  Type = "dev.weft.child.started.v1"
	ChildRunFinished Type = "dev.weft.child.finished.v1"
)

// Source is the CloudEvents source of events Weft writes.
const Source = "weft"

// Extension attribute names (CloudEvents extension names are lowercase
// alphanumerics).
const (
	ExtRunID       = "runid"
	ExtNodeID      = "nodeid"
	ExtAttempt     = "attempt"
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// catalogue lists the types in a fixed order: runs, nodes, the rest.
var catalogue = []Type{
	RunStarted, RunCompleted, RunFailed, RunCancelRequested, RunCancelled,
	NodeReady, NodeInvoking, NodeInvoked, NodeFailed, NodeSkipped, NodeWaiting,
	NodeRouted, NodeCanceled, Heartbeat, NodeStep,
	RetryScheduled, TimerFired, SignalReceived, ChildRunStarted, ChildRunFinished,
}

// Types lists every type of the catalogue, in a fixed order.
func Types() []Type { return append([]Type(nil), catalogue...) }

// Known reports whether t is a type of the catalogue.
func (t Type) Known() bool { _, ok := Kind(t); return ok }

// Decision reports whether events of type t are always coordinator
// decisions. (NodeInvoked is a worker's outcome, or a decision when the
// coordinator records a router's or a fallback's outcome.)
func (t Type) Decision() bool { return Class(t) == ClassCoordinator }

// Terminal reports whether t ends a run.
func (t Type) Terminal() bool {
	return t == RunCompleted || t == RunFailed || t == RunCancelled
}
