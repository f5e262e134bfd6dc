// Package logattr names the attribute keys Weft's structured logs use, in
// one place, so logs from every process line up.
package logattr

// Log attribute keys.
const (
	RunID     = "run_id"
	NodeID    = "node_id"
	Iteration = "iteration"
	Attempt   = "attempt"
	Delivery  = "delivery"
	Seq       = "seq"
	Subject   = "subject"
	EventType = "event_type"
	Queue     = "queue"
	Worker    = "worker"
	Error     = "error"
	TraceID   = "trace_id"
	SpanID    = "span_id"
	Component = "component"
	Partition = "partition"
)
