package telemetry

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/pkg/events"
)

// Attribute keys of the spans of this file and of "send decisions".
const (
	AttrDecisionTypes = attribute.Key("weft.decision.types") // event names, in order
	AttrDecisionNodes = attribute.Key("weft.decision.nodes") // their nodes, deduplicated
	AttrSignalNode    = attribute.Key("weft.signal.node")
)

// More span names.
const (
	SpanLifetime = "run lifetime" // "run lifetime <graph>": run-started to the run's end
	SpanWait     = "wait"         // "wait <queue>": a work item in its queue
	SpanSignal   = "signal"       // "signal <node>": a client's signal
	SpanUpdate   = "update"       // "update <node>": a client's update
	SpanCancel   = "cancel"       // a client's cancel request
)

// StartControl starts the Producer span of a client's event sent to a
// running run (a signal or a cancel request): its parent is the run's
// trace context, read from the run's run-started event, so that the
// event joins the run's trace; the span in ctx, the caller's, if any, is
// linked. The event must carry the returned context (Inject). With
// tracing off it returns ctx with the run's trace context, so that the
// event still carries it on.
func StartControl(ctx context.Context, runStarted *events.Event, name, runID, subject string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	caller := trace.SpanContextFromContext(ctx)
	if sc := SpanContextOf(runStarted); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	t, ok := tracer(ctx)
	if !ok {
		return ctx, noSpan
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append([]attribute.KeyValue{
			messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(subject),
			AttrRunID.String(runID),
		}, attrs...)...),
	}
	if caller.IsValid() && caller.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
	}
	return t.Start(ctx, name, opts...)
}

// RecordLifetime records, once a run has ended, the span of its whole
// life: from run-started's stored time to its end event's, a child of the
// run's root (run-started's trace context), so that a tracing UI shows
// how long the run took and what happened within. status is the run's end
// status ("completed", "failed", "cancelled").
func RecordLifetime(ctx context.Context, root trace.SpanContext, runID, graphName, status string, start, end time.Time) {
	t, ok := tracer(ctx)
	if !ok || !root.IsValid() || start.IsZero() {
		return
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, root)
	_, span := t.Start(ctx, SpanLifetime+" "+graphName,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(AttrRunID.String(runID), AttrGraphName.String(graphName), AttrRunStatus.String(status)))
	if status == "failed" {
		span.SetStatus(codes.Error, "run failed")
	}
	if end.Before(start) {
		end = start
	}
	span.End(trace.WithTimestamp(end))
}

// RecordWait records the time a work item waited in its queue: a span
// from the node-ready event's stored time to took (when a worker picked it
// up), under the decision that made the item (ctx holds the ready event's
// context, see StartNode's parent).
func RecordWait(ctx context.Context, ready *events.Event, queue string, took time.Time) {
	t, ok := tracer(ctx)
	if !ok {
		return
	}
	start := ready.Stored
	if start.IsZero() {
		start = ready.Time
	}
	if start.IsZero() || took.Before(start) {
		return
	}
	_, span := t.Start(Extract(ctx, ready), SpanWait+" "+queue,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(AttrRunID.String(ready.RunID), AttrNodeID.String(ready.NodeID), AttrQueue.String(queue)))
	span.End(trace.WithTimestamp(took))
}

// decisionAttrs says what a batch of decisions decided: the event names in
// order, and the nodes they are about.
func decisionAttrs(evs []*events.Event) []attribute.KeyValue {
	types := make([]string, 0, len(evs))
	var nodes []string
	for _, e := range evs {
		types = append(types, EventName(e.Type))
		if e.NodeID != "" && !slices.Contains(nodes, e.NodeID) {
			nodes = append(nodes, e.NodeID)
		}
	}
	attrs := []attribute.KeyValue{AttrDecisionTypes.StringSlice(types)}
	if len(nodes) > 0 {
		attrs = append(attrs, AttrDecisionNodes.StringSlice(nodes))
	}
	return attrs
}

// Flush exports the spans ended so far, waiting at most until ctx ends (5
// seconds when it has no deadline). A short-lived process (the CLI) calls
// it after each command, so that being killed later (a closed pipe) loses
// nothing; with tracing off it does nothing.
func Flush(ctx context.Context) error {
	f, ok := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error })
	if !ok || !Enabled() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	return f.ForceFlush(ctx)
}

// TraceID returns the trace id a run's event carries, or "" when none.
func TraceID(e *events.Event) string {
	if sc := SpanContextOf(e); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
