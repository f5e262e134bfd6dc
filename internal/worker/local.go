package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// ErrGivenUp is returned by InvokeLocal when ctx ended for another reason
// than the node's own timeout: the execution has no outcome to record.
var ErrGivenUp = errors.New("local execution given up")

// InvokeLocal runs one attempt of a work item in the calling process, for
// a coordinator that runs local nodes itself (events.LocalQueue), through
// the steps a worker takes (contract.go: input schema, Validate,
// ShouldExecute, Before, the phases or Execute, declared outputs, output
// schema, After; Failed and Fallback after a failure), bounded by timeout
// (the work item's own when it has one). ready must be resolved: the
// node's config and schemas and the run's invocation state filled in.
// There are no invoking or invoked filters (they belong to a worker), and
// Heartbeat returns ErrNoWorkItem.
//
// It returns the outcome event, node-invoked or node-failed, with id
// derived from the attempt (delivery 0, which no worker delivery uses),
// worker set to by, and Queue set to ready.Queue; or ErrGivenUp when ctx
// ended first, for another reason than the timeout
// (ErrGivenUp).
func InvokeLocal(ctx context.Context, node Node, run string, ready *events.NodeReadyData, readyEv *events.Event, by string, timeout time.Duration, log *slog.Logger) (*events.Event, error) {
	if log == nil {
		log = slog.Default()
	}
	w := &Worker{opts: options{name: by}}
	it := &item{run: run, ready: ready, base: log}
	if ready.TimeoutMs > 0 {
		timeout = time.Duration(ready.TimeoutMs) * time.Millisecond
	}
	if readyEv != nil {
		// The node's span, as a worker's (startNode), with no queue wait.
		var span trace.Span
		ctx, span = telemetry.StartNode(ctx, readyEv, eventlog.ReadySubject(run, ready.Queue), telemetry.Node{
			RunID: run, NodeID: ready.Node, Type: ready.Type, Iteration: ready.Iteration,
			Attempt: ready.Attempt, Delivery: 1, Queue: ready.Queue, Worker: by,
		})
		it.tel.span = span
		defer span.End()
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, nodeErr := w.call(runCtx, node, it)
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrGivenUp, context.Cause(ctx))
	}
	if nodeErr != nil && errors.Is(context.Cause(runCtx), context.DeadlineExceeded) && !isTimeout(nodeErr) {
		nodeErr = &Error{Type: events.FailureTimeout, Message: fmt.Sprintf("node timed out after %s", timeout), Retryable: true, Cause: nodeErr}
	}
	var ev *events.Event
	var err error
	if nodeErr == nil {
		ev, err = w.invokedEvent(it, res, elapsed)
		if err != nil {
			nodeErr = err
		}
	}
	if nodeErr != nil {
		ev, err = w.failedEvent(it, failureOf(nodeErr), elapsed)
		if err != nil {
			return nil, err
		}
	}
	ev.Queue = ready.Queue
	it.tel.elapsed = elapsed
	it.traceOutcome(ctx, ev)
	return ev, nil
}
