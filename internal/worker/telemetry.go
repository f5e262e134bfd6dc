package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// Tracing and metrics of a work item (see internal/telemetry). Each
// delivery of a node attempt runs under a Consumer span "node <id>" whose
// parent is the node-ready event's trace context; the node's context holds
// it, so the node's own spans are its children, and the invoking, invoked,
// failed and cancelled events carry it. With no TracerProvider installed
// the ready event's context is passed on as it is, and nothing is recorded.

// nodeTelemetry is a work item's span and timing.
type nodeTelemetry struct {
	span    trace.Span
	elapsed time.Duration // the node's run time, once it ran
}

// startNode starts the item's span, records how long the work waited in
// the queue, and puts the trace ids on the item's logger.
func (w *Worker) startNode(ctx context.Context, q *queue, it *item, ready *events.Event, subject string) (context.Context, trace.Span) {
	r := it.ready
	ctx, span := telemetry.StartNode(ctx, ready, subject, telemetry.Node{
		RunID:     it.run,
		NodeID:    r.Node,
		Type:      r.Type,
		Iteration: r.Iteration,
		Attempt:   r.Attempt,
		Delivery:  it.delivery,
		Queue:     q.name,
		Worker:    w.opts.name,
	})
	it.tel.span = span
	if span.IsRecording() {
		it.base = w.log.With(telemetry.LogAttrs(span.SpanContext())...)
	}
	took := time.Now()
	if it.delivery == 1 {
		if telemetry.MetricsEnabledIn(ctx) {
			telemetry.QueueWait(ctx, q.name, r.Type, took.Sub(ready.Time))
		}
		telemetry.RecordWait(ctx, ready, q.name, took)
	}
	it.step(ctx, "took", logattr.Queue, q.name)
	return ctx, span
}

// traceOutcome gives an outcome event the item's trace context and
// records the attempt's end on its span and in the metrics.
func (it *item) traceOutcome(ctx context.Context, ev *events.Event) {
	telemetry.Inject(ctx, ev)
	span := it.tel.span
	recording := span != nil && span.IsRecording()
	if !recording && !telemetry.MetricsEnabledIn(ctx) {
		return
	}
	outcome, failure, msg := telemetry.OutcomeSucceeded, "", ""
	switch ev.Type {
	case events.NodeFailed:
		outcome = telemetry.OutcomeFailed
		if p, err := ev.Payload(); err == nil {
			f := p.(*events.NodeFailedData).Error
			failure, msg = f.Type, f.Message
		}
	case events.NodeCanceled:
		outcome = telemetry.OutcomeCancelled
	}
	if recording && outcome == telemetry.OutcomeFailed {
		telemetry.FailWith(span, failure, msg)
	}
	if outcome != telemetry.OutcomeCancelled {
		telemetry.NodeFinished(ctx, it.ready.Type, outcome, failure, it.tel.elapsed)
	}
}
