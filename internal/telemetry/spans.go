package telemetry

import (
	"context"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Span attribute keys of Weft's own (the messaging ones come from semconv).
const (
	AttrRunID     = attribute.Key("weft.run.id")
	AttrGraphName = attribute.Key("weft.graph.name")
	// AttrForkOf, on a forked run's link to its parent's trace, names the
	// parent run.
	AttrForkOf        = attribute.Key("weft.fork.of")
	AttrGraphDigest   = attribute.Key("weft.graph.digest")
	AttrParentRunID   = attribute.Key("weft.run.parent_id")
	AttrEventType     = attribute.Key("weft.event.type")
	AttrEventSeq      = attribute.Key("weft.event.seq")
	AttrNodeID        = attribute.Key("weft.node.id")
	AttrNodeType      = attribute.Key("weft.node.type")
	AttrNodeIteration = attribute.Key("weft.node.iteration")
	AttrNodeAttempt   = attribute.Key("weft.node.attempt")
	AttrNodeDelivery  = attribute.Key("weft.node.delivery")
	AttrQueue         = attribute.Key("weft.queue")
	AttrWorker        = attribute.Key("weft.worker")
	AttrFailureType   = attribute.Key("weft.failure.type")
	AttrRunStatus     = attribute.Key("weft.run.status")
)

// Span names (the dynamic part follows the space).
const (
	SpanRun       = "run"     // "run <graph>"
	SpanProcess   = "process" // "process <event>", e.g. "process node.invoked"
	SpanNode      = "node"    // "node <id>"
	SpanDecisions = "send decisions"
)

var messagingNATS = semconv.MessagingSystemKey.String("nats")

// noSpan is what the span helpers return with tracing off: a span that
// does nothing, so that ending it never ends a caller's span.
var noSpan = trace.SpanFromContext(context.Background())

type cachedTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

var tracerCache atomic.Pointer[cachedTracer]

// tracer returns Weft's tracer of the provider of ctx (its Providers',
// else the installed global one), or false when none is installed.
func tracer(ctx context.Context) (trace.Tracer, bool) {
	tp, cache := otel.GetTracerProvider(), &tracerCache
	if p := providersOf(ctx); p != nil && p.tp != nil {
		tp, cache = p.tp, &p.tracer
	}
	if tp == defaultTracerProvider {
		return nil, false
	}
	if c := cache.Load(); c != nil && c.tp == tp {
		return c.t, true
	}
	t := tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	cache.Store(&cachedTracer{tp: tp, t: t})
	return t, true
}

// EventName is the short name of an event type: "dev.weft.node.invoked.v1"
// is "node.invoked".
func EventName(t events.Type) string {
	s := strings.TrimPrefix(string(t), "dev.weft.")
	if i := strings.LastIndex(s, ".v"); i > 0 {
		s = s[:i]
	}
	return s
}

// StartRun starts the client's span of a run: a Producer span, child of
// the span in ctx if any, whose context the run-started event must carry
// (Inject). With tracing off it returns ctx as it is, so that a caller's
// own span context still reaches the event, and a span that does nothing.
func StartRun(ctx context.Context, runID, graphName, subject string, links ...trace.Link) (context.Context, trace.Span) {
	t, ok := tracer(ctx)
	if !ok {
		return ctx, noSpan
	}
	return t.Start(ctx, SpanRun+" "+graphName,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(runID),
			AttrRunID.String(runID),
			AttrGraphName.String(graphName),
		))
}

// StartProcess starts a Consumer span for handling an event read from
// subject: its parent is the event's trace context. With tracing off it
// returns ctx with the event's context, so that what is appended while
// handling it carries the run's trace on.
func StartProcess(ctx context.Context, e *events.Event, subject, consumer string) (context.Context, trace.Span) {
	ctx = Extract(ctx, e)
	t, ok := tracer(ctx)
	if !ok {
		return ctx, noSpan
	}
	attrs := []attribute.KeyValue{
		messagingNATS,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(subject),
		semconv.MessagingMessageID(e.ID),
		semconv.MessagingConsumerGroupName(consumer),
		AttrRunID.String(e.RunID),
		AttrEventType.String(string(e.Type)),
		AttrEventSeq.Int64(int64(e.Seq)),
	}
	if e.NodeID != "" {
		attrs = append(attrs, AttrNodeID.String(e.NodeID), AttrNodeAttempt.Int(e.Attempt))
	}
	return t.Start(ctx, SpanProcess+" "+EventName(e.Type),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// StartDecisions starts the Producer span of appending a batch of
// decisions to a run, links it to the causes given (the trace contexts of
// the events a join waited for), and injects its context into the events.
func StartDecisions(ctx context.Context, runID string, evs []*events.Event, causes []trace.SpanContext) (context.Context, trace.Span) {
	t, ok := tracer(ctx)
	if !ok {
		Inject(ctx, evs...)
		return ctx, noSpan
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(strings.TrimSuffix(eventlog.DecisionFilter(runID), ">")+"*"),
			semconv.MessagingBatchMessageCount(len(evs)),
			AttrRunID.String(runID),
		),
		trace.WithAttributes(decisionAttrs(evs)...),
	}
	if len(causes) > 0 {
		links := make([]trace.Link, 0, len(causes))
		for _, sc := range causes {
			if sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
		opts = append(opts, trace.WithLinks(links...))
	}
	ctx, span := t.Start(ctx, SpanDecisions, opts...)
	Inject(ctx, evs...)
	return ctx, span
}

// Node describes one delivery of a node attempt, for StartNode.
type Node struct {
	RunID     string
	NodeID    string
	Type      string
	Iteration int
	Attempt   int
	Delivery  int
	Queue     string
	Worker    string
}

// StartNode starts the worker's Consumer span of a node attempt: its
// parent is the node-ready event's trace context, and the events the
// attempt appends carry its own (Inject).
func StartNode(ctx context.Context, ready *events.Event, subject string, n Node) (context.Context, trace.Span) {
	ctx = Extract(ctx, ready)
	t, ok := tracer(ctx)
	if !ok {
		return ctx, noSpan
	}
	return t.Start(ctx, SpanNode+" "+n.NodeID,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			messagingNATS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(ready.ID),
			semconv.MessagingConsumerGroupName(n.Queue),
			AttrRunID.String(n.RunID),
			AttrNodeID.String(n.NodeID),
			AttrNodeType.String(n.Type),
			AttrNodeIteration.Int(n.Iteration),
			AttrNodeAttempt.Int(n.Attempt),
			AttrNodeDelivery.Int(n.Delivery),
			AttrQueue.String(n.Queue),
			AttrWorker.String(n.Worker),
		))
}

// Fail marks the span failed with err (a no-op on a span that does not
// record).
func Fail(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// FailWith marks the span failed with a failure's type and message.
func FailWith(span trace.Span, typ, msg string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrFailureType.String(typ), semconv.ErrorTypeKey.String(typ))
	span.SetStatus(codes.Error, msg)
}
