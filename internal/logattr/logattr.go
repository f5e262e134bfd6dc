// Package logattr names the attribute keys Weft's structured logs use, in
// one place, so logs from every process line up: a run's lines, from the
// client, the coordinators and the workers, are found by run_id, a node's
// by run_id and node_id, a trace's by trace_id.
package logattr

// Log attribute keys.
const (
	RunID     = "run_id"
	NodeID    = "node_id"
	NodeType  = "node_type"
	Ref       = "ref" // a node activation: node, iteration and attempt in one
	Graph     = "graph"
	Iteration = "iteration"
	Attempt   = "attempt"
	Delivery  = "delivery"
	Seq       = "seq"
	Subject   = "subject"
	EventType = "event_type"
	Queue     = "queue"
	Worker    = "worker"
	Error     = "error"
	Failure   = "failure"
	Retryable = "retryable"
	Count     = "count"
	TraceID   = "trace_id"
	SpanID    = "span_id"
	Component = "component"
	Partition = "partition"
	// Coordinator is a coordinator's id, as it announces itself in the
	// leases bucket: which coordinator decided.
	Coordinator = "coordinator"
	Status      = "status"
	// Parent is the run a run was forked from (or a child's parent);
	// Position an event's place in its run (1, 2, …).
	Parent   = "parent"
	Position = "position"

	// Decision is the type of an event a coordinator decided; Cause and
	// CauseSeq name the event it decided on and its stream sequence.
	Decision = "decision"
	Cause    = "cause"
	CauseSeq = "cause_seq"
	// Step is a worker's step with a work item: took, ran, reported,
	// acked, handed back.
	Step = "step"
	// NATSUser is the NATS user a connection authenticated as (a role's
	// user name; never its password).
	NATSUser = "nats_user"
)
