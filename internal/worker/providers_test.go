package worker_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// The providers given with WithTracerProvider and WithMeterProvider get
// the node's span and metrics, and the global ones (left as OpenTelemetry
// starts them) nothing.
func TestWithProviders(t *testing.T) {
	if otel.GetTracerProvider() == nil {
		t.Fatal("no global tracer provider")
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})

	st := testStore(t)
	startWorker(t, st, map[string]worker.Node{
		"echo": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			return &worker.Result{}, nil
		}),
	}, worker.WithTracerProvider(tp), worker.WithMeterProvider(mp))
	run := publishReady(t, st, "echo")
	evs := waitOutcome(t, st, run, events.NodeInvoked)

	// The span ends once the outcome is appended.
	var node sdktrace.ReadOnlySpan
	waitUntil(t, "the node span on the given TracerProvider", func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == telemetry.SpanNode+" n1" {
				node = s
			}
		}
		return node != nil
	})
	var invoked *events.Event
	for _, e := range evs {
		if e.Type == events.NodeInvoked {
			invoked = e
		}
	}
	if got := telemetry.SpanContextOf(invoked); got.SpanID() != node.SpanContext().SpanID() {
		t.Errorf("node-invoked carries span %s, want the node span %s", got.SpanID(), node.SpanContext().SpanID())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
		}
	}
	for _, name := range []string{telemetry.MetricNodeDuration, telemetry.MetricQueueWait} {
		if !found[name] {
			t.Errorf("metric %s not recorded on the given MeterProvider (got %v)", name, found)
		}
	}
	if telemetry.Enabled() || telemetry.MetricsEnabled() {
		t.Error("a global provider was installed; the options must not install one")
	}
}
