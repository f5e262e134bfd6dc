package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

var testSpan = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	TraceFlags: trace.FlagsSampled,
	TraceState: mustTraceState("weft=1"),
})

func mustTraceState(s string) trace.TraceState {
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		panic(err)
	}
	return ts
}

func newEvent(t testing.TB) *events.Event {
	t.Helper()
	e, err := events.New("run1", "run1", time.Time{}, &events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTraceContextOnTheWire injects a span context into events, encodes
// them as NATS messages, decodes them and extracts it again.
func TestTraceContextOnTheWire(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), testSpan)
	a, b := newEvent(t), newEvent(t)
	telemetry.Inject(ctx, a, b)
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if a.TraceParent != want || b.TraceParent != want || a.TraceState != "weft=1" {
		t.Fatalf("injected %q %q %q, want %q and tracestate weft=1", a.TraceParent, b.TraceParent, a.TraceState, want)
	}
	msg, err := eventlog.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"ce-traceparent", "traceparent"} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	for _, h := range []string{"ce-tracestate", "tracestate"} {
		if got := msg.Header.Get(h); got != "weft=1" {
			t.Errorf("header %s = %q, want weft=1", h, got)
		}
	}
	got, err := events.Decode(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), got))
	if !sc.IsRemote() || sc.TraceID() != testSpan.TraceID() || sc.SpanID() != testSpan.SpanID() || !sc.IsSampled() || sc.TraceState().String() != "weft=1" {
		t.Errorf("extracted %+v, want %+v (remote)", sc, testSpan)
	}
	if telemetry.SpanContextOf(got).SpanID() != testSpan.SpanID() {
		t.Errorf("SpanContextOf: %v", telemetry.SpanContextOf(got))
	}
}

func TestNoSpanNoTraceHeaders(t *testing.T) {
	e := newEvent(t)
	telemetry.Inject(context.Background(), e)
	if e.TraceParent != "" || e.TraceState != "" {
		t.Fatalf("injected %q %q without a span", e.TraceParent, e.TraceState)
	}
	msg, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("traceparent") != "" || msg.Header.Get("ce-traceparent") != "" {
		t.Errorf("trace headers without a span: %v", msg.Header)
	}
	if ctx := telemetry.Extract(context.Background(), e); trace.SpanContextFromContext(ctx).IsValid() {
		t.Errorf("extracted a span context from an event without one")
	}
	e.TraceParent = "00-garbage"
	if sc := telemetry.SpanContextOf(e); sc.IsValid() {
		t.Errorf("extracted %v from a malformed traceparent", sc)
	}
}

// TestOffIsFree checks that with no providers installed the hot paths of
// the coordinator and the worker allocate nothing.
func TestOffIsFree(t *testing.T) {
	if telemetry.Enabled() || telemetry.MetricsEnabled() {
		t.Fatal("providers installed at the start of the test")
	}
	ctx := context.Background()
	e := newEvent(t)
	started, ready := eventlog.StartedSubject("run1"), eventlog.ReadySubject("run1", "default")
	allocs := testing.AllocsPerRun(1000, func() {
		pctx, span := telemetry.StartProcess(ctx, e, started, "coordinator")
		dctx, send := telemetry.StartDecisions(pctx, "run1", []*events.Event{e}, nil)
		telemetry.Inject(dctx, e)
		send.End()
		nctx, node := telemetry.StartNode(pctx, e, ready, telemetry.Node{})
		telemetry.QueueWait(nctx, "default", "echo", time.Millisecond)
		telemetry.NodeFinished(nctx, "echo", telemetry.OutcomeSucceeded, "", time.Millisecond)
		telemetry.RunStarted(nctx, "g")
		telemetry.RunEnded(nctx, "g", "completed")
		node.End()
		span.End()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per event with telemetry off, want 0", allocs)
	}
	if e.TraceParent != "" {
		t.Errorf("trace context written with telemetry off: %q", e.TraceParent)
	}
}

func TestSpanHelpersDoNotEndCallersSpan(t *testing.T) {
	rec := installTracing(t)
	ctx, caller := otel.Tracer("test").Start(context.Background(), "caller")
	otel.SetTracerProvider(origTracerProvider) // tracing off again
	_, span := telemetry.StartRun(ctx, "run1", "g", eventlog.StartedSubject("run1"))
	span.End()
	if len(rec.Ended()) != 0 {
		t.Fatalf("ending the helper's span ended the caller's")
	}
	caller.End()
}

func clearOTelEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	} {
		t.Setenv(k, "")
	}
}

func TestSetupConfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		wantErr error
	}{
		{name: "nothing set"},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: telemetry.ErrConfig},
		{name: "unknown protocol", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: telemetry.ErrConfig},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			shutdown, err := telemetry.Setup(context.Background(), "test")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Setup: %v, want %v", err, tt.wantErr)
			}
			if telemetry.Enabled() || telemetry.MetricsEnabled() {
				t.Errorf("providers installed")
			}
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

// TestSetupExports sets up OTLP export over each protocol from the
// environment and checks a span reaches the collector.
func TestSetupExports(t *testing.T) {
	col := startCollector(t)
	for _, tt := range []struct{ protocol, endpoint string }{
		{telemetry.ProtocolHTTP, col.HTTPEndpoint},
		{telemetry.ProtocolGRPC, col.GRPCEndpoint},
	} {
		t.Run(tt.protocol, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tt.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tt.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Cleanup(func() {
				otel.SetTracerProvider(origTracerProvider)
				otel.SetMeterProvider(origMeterProvider)
			})
			shutdown, err := telemetry.Setup(context.Background(), "setup-"+tt.protocol)
			if err != nil {
				t.Fatal(err)
			}
			if !telemetry.Enabled() || !telemetry.MetricsEnabled() {
				t.Fatalf("Setup with an endpoint installed no providers")
			}
			e := newEvent(t)
			_, span := telemetry.StartProcess(context.Background(), e, eventlog.StartedSubject("run1"), "coordinator")
			span.End()
			telemetry.RunStarted(context.Background(), "g")
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			found := false
			for _, s := range col.Spans() {
				found = found || s.Service == "setup-"+tt.protocol && s.Name == "process run.started"
			}
			if !found {
				t.Errorf("span not exported over %s", tt.protocol)
			}
			if !col.Metrics("setup-" + tt.protocol)[telemetry.MetricRunsStarted] {
				t.Errorf("metric not exported over %s", tt.protocol)
			}
		})
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("run_id", "r1")
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), testSpan), "with span")
	log.InfoContext(context.Background(), "without span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, have %q", buf.String())
	}
	var with, without map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &with)
	_ = json.Unmarshal([]byte(lines[1]), &without)
	if with["trace_id"] != testSpan.TraceID().String() || with["span_id"] != testSpan.SpanID().String() || with["run_id"] != "r1" {
		t.Errorf("with a span: %s", lines[0])
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("without a span: %s", lines[1])
	}
}

// benchHop is what one event costs the coordinator and a worker in
// telemetry: handle it, append a decision, run a node on it.
func benchHop(b *testing.B) {
	ctx := context.Background()
	e := newEvent(b)
	evs := []*events.Event{e}
	b.ReportAllocs()
	for b.Loop() {
		pctx, span := telemetry.StartProcess(ctx, e, eventlog.StartedSubject("run1"), "coordinator")
		_, send := telemetry.StartDecisions(pctx, "run1", evs, nil)
		send.End()
		nctx, node := telemetry.StartNode(pctx, e, eventlog.ReadySubject("run1", "default"), telemetry.Node{RunID: "run1", NodeID: "a"})
		telemetry.Inject(nctx, e)
		node.End()
		span.End()
		e.TraceParent, e.TraceState = "", ""
	}
}

func BenchmarkHopOff(b *testing.B) { benchHop(b) }

func BenchmarkHopOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider() // spans recorded, exported nowhere
	otel.SetTracerProvider(tp)
	b.Cleanup(func() { otel.SetTracerProvider(origTracerProvider) })
	benchHop(b)
}
