package client_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// TestWithTracerProvider: the TracerProvider given with WithTracerProvider
// gets the client's spans (starting, signalling and cancelling a run), the
// run-started event carries the run span's context, and a global provider
// installed at the same time gets none of them. A coordinator runs (a
// signal needs its node to wait); its own spans go to the global provider.
func TestWithTracerProvider(t *testing.T) {
	global := tracetest.NewSpanRecorder()
	globalTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(global))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(globalTP)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
		_ = globalTP.Shutdown(context.Background())
	})

	_, store := engine(t) // a coordinator, so that the human node waits
	c := client.New(store, client.WithTracerProvider(tp), client.WithLogger(quiet(t)))
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "ask", 1)
	if err := c.Signal(ctx, run, "ask", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	// The signalled run may end at any moment, so the cancel goes to a
	// second run, still waiting on its human node.
	waiting, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, waiting, "ask", 1)
	if err := c.Cancel(ctx, waiting, "test"); err != nil {
		t.Fatal(err)
	}

	// The spans end before Start, Signal and Cancel return.
	ended := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		if ended[s.Name()] == nil { // the first run's span, ended first
			ended[s.Name()] = s
		}
	}
	for _, name := range []string{telemetry.SpanRun + " approve", telemetry.SpanSignal + " ask", telemetry.SpanCancel} {
		if ended[name] == nil {
			t.Errorf("no %q span on the given TracerProvider (got %v)", name, spanNames(spans.Ended()))
		}
	}
	// The coordinator (there for the human node to wait) traces on the
	// global provider; the client's spans must not be there.
	for _, s := range global.Ended() {
		if ended[s.Name()] != nil {
			t.Errorf("the global TracerProvider got the client's span %q (all: %v)", s.Name(), spanNames(global.Ended()))
		}
	}

	hist, err := c.History(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].Type != events.RunStarted {
		t.Fatalf("first event %s, want run-started", hist[0].Type)
	}
	runSpan := ended[telemetry.SpanRun+" approve"]
	if runSpan != nil && telemetry.SpanContextOf(hist[0]).SpanID() != runSpan.SpanContext().SpanID() {
		t.Errorf("run-started carries span %s, want the run span %s", telemetry.SpanContextOf(hist[0]).SpanID(), runSpan.SpanContext().SpanID())
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}
