package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// TestRunTraceInProcess runs the test graph with a coordinator and a
// worker in this process, recording spans and metrics in memory.
func TestRunTraceInProcess(t *testing.T) {
	rec := installTracing(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(origMeterProvider)
		_ = mp.Shutdown(context.Background())
	})

	_, store := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runEngine(t, ctx, store)

	caller := startAndWait(t, store, loadGraph(t, "testdata/branch-retry-join.yaml"))

	// Collect metrics while the coordinator still runs (the lag gauge
	// asks its consumer).
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	cancel()
	done()

	var spans []span
	for _, ro := range rec.Ended() {
		spans = append(spans, fromReadOnly(ro, "in-process"))
	}
	checkRunTrace(t, spans, caller)

	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	for _, name := range []string{
		telemetry.MetricNodeDuration, telemetry.MetricQueueWait, telemetry.MetricNodeFailures, telemetry.MetricRetries,
		telemetry.MetricRunsStarted, telemetry.MetricRunsCompleted, telemetry.MetricRunsInFlight, telemetry.MetricCoordinatorLag,
	} {
		if !seen[name] {
			t.Errorf("metric %s was not recorded; have %v", name, seen)
		}
	}
}

// TestChildRunInRunTrace checks that a child run stays in its parent's
// trace: its run-started is handled under the parent's decision.
func TestChildRunInRunTrace(t *testing.T) {
	rec := installTracing(t)
	_, store := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runEngine(t, ctx, store)
	caller := startAndWait(t, store, loadGraph(t, "../../examples/subgraph.yaml"))
	cancel()
	done()

	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var starts []sdktrace.ReadOnlySpan
	twice := false
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != caller.TraceID() {
			t.Errorf("span %q is in trace %s, not the run's %s", s.Name(), s.SpanContext().TraceID(), caller.TraceID())
		}
		switch s.Name() {
		case "process run.started":
			starts = append(starts, s)
		case "node twice":
			twice = true
		}
	}
	if len(starts) != 2 || !twice {
		t.Fatalf("want the parent's and the child's run.started handled and node twice run, have %d run.started, twice %v", len(starts), twice)
	}
	// The child's run.started hangs under the parent's handling of an
	// event (prep, a local node, runs within it): process run.started ←
	// process ….
	var child sdktrace.ReadOnlySpan
	for _, s := range starts {
		if p := byID[s.Parent().SpanID()]; p != nil && strings.HasPrefix(p.Name(), "process ") {
			child = s
		}
	}
	if child == nil {
		for _, s := range starts {
			t.Logf("run.started %v parent %v", s.SpanContext().SpanID(), s.Parent().SpanID())
		}
		t.Fatal("the child's run.started is not handled under the parent's decision")
	}
}

// runEngine runs a coordinator and a worker with the built-in executors
// until ctx ends; the returned function waits for them.
func runEngine(t *testing.T, ctx context.Context, store events.Store) (wait func()) {
	t.Helper()
	done := make(chan error, 2)
	go func() { done <- coordinator.New(store).Run(ctx) }()
	w, err := worker.New(store, worker.WithDrainTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	go func() { done <- w.Run(ctx) }()
	return func() {
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	}
}
