package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/pkg/events"
)

// ScopeName is the instrumentation scope of Weft's spans and metrics.
const ScopeName = "github.com/weft-dev/weft"

// w3c is the propagator of event trace context. Events carry W3C trace
// context whatever the process's global propagator is: it is part of the
// event contract, not a deployment choice.
var w3c = propagation.TraceContext{}

// The providers OpenTelemetry starts with. A provider other than these has
// been installed, by Setup or by the application.
var (
	defaultTracerProvider = otel.GetTracerProvider()
	defaultMeterProvider  = otel.GetMeterProvider()
)

// Enabled reports whether a TracerProvider is installed. When it is not,
// the span helpers start nothing.
func Enabled() bool { return otel.GetTracerProvider() != defaultTracerProvider }

// MetricsEnabled reports whether a MeterProvider is installed.
func MetricsEnabled() bool { return otel.GetMeterProvider() != defaultMeterProvider }

// EventCarrier adapts an event's trace context fields to a
// propagation.TextMapCarrier.
type EventCarrier struct{ Event *events.Event }

// Get returns the value of the traceparent or tracestate field.
func (c EventCarrier) Get(key string) string {
	switch key {
	case events.ExtTraceParent:
		return c.Event.TraceParent
	case events.ExtTraceState:
		return c.Event.TraceState
	}
	return ""
}

// Set sets the traceparent or tracestate field; other keys are dropped.
func (c EventCarrier) Set(key, value string) {
	switch key {
	case events.ExtTraceParent:
		c.Event.TraceParent = value
	case events.ExtTraceState:
		c.Event.TraceState = value
	}
}

// Keys lists the fields the carrier holds.
func (c EventCarrier) Keys() []string {
	return []string{events.ExtTraceParent, events.ExtTraceState}
}

// Inject writes the span context of ctx into the events. Without a valid
// span context it writes nothing, so events stay without trace headers
// when tracing is off.
func Inject(ctx context.Context, evs ...*events.Event) {
	if len(evs) == 0 || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	// Encode once, share the strings.
	first := evs[0]
	first.TraceParent, first.TraceState = "", ""
	w3c.Inject(ctx, EventCarrier{first})
	for _, e := range evs[1:] {
		e.TraceParent, e.TraceState = first.TraceParent, first.TraceState
	}
}

// Extract returns ctx with the event's trace context as the remote parent.
// An event without one (or with an invalid one) gives ctx unchanged.
func Extract(ctx context.Context, e *events.Event) context.Context {
	if e == nil || e.TraceParent == "" {
		return ctx
	}
	return w3c.Extract(ctx, EventCarrier{e})
}

// SpanContextOf returns the trace context an event carries; it is invalid
// when the event carries none.
func SpanContextOf(e *events.Event) trace.SpanContext {
	if e == nil || e.TraceParent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), EventCarrier{e}))
}
