package workqueue

import "errors"

// Local nodes: the coordinator runs the work items of events.LocalQueue
// itself, through the steps a worker takes.

// InvokeLocal is pkg/worker's runner of one local attempt, set by
// pkg/worker when it is initialised (it cannot be typed here: pkg/worker
// imports this package). The coordinator takes it as
//
//	func(ctx context.Context, node worker.Node, run string, ready *events.NodeReadyData,
//		readyEv *events.Event, by string, timeout time.Duration, log *slog.Logger) (*events.Event, error)
//
// It runs one attempt of a work item in the calling process (input
// schema, Validate, ShouldExecute, Before, the phases or Execute, outputs,
// After; Failed and Fallback after a failure), bounded by timeout, and
// returns the outcome event, or ErrGivenUp.
var InvokeLocal any

// ErrGivenUp is returned by InvokeLocal when ctx ended for another reason
// than the node's own timeout: the execution has no outcome to record.
var ErrGivenUp = errors.New("local execution given up")
