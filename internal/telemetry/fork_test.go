package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestForkLinksToItsParentsTrace: a forked run is a run of its own, in a
// trace of its own, and its run span links to the parent run's trace, so
// a tracing UI leads from one to the other.
func TestForkLinksToItsParentsTrace(t *testing.T) {
	rec := installTracing(t)
	_, store := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runEngine(t, ctx, store)
	defer func() { cancel(); done() }()
	c := client.New(store)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	pctx, caller := otel.Tracer("test").Start(wctx, "caller")
	run, err := c.Start(pctx, loadGraph(t, "../../examples/hello.yaml"), client.WithInput(map[string]any{"name": "Ada"}))
	caller.End()
	parent := caller.SpanContext()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(wctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("parent: %v %+v", err, st)
	}
	fork, err := c.Fork(wctx, run, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(wctx, fork); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("fork: %v %+v", err, st)
	}
	linked := false
	for _, s := range rec.Ended() {
		if s.Name() != telemetry.SpanRun+" hello" || s.SpanContext().TraceID() == parent.TraceID() {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == parent.TraceID() {
				linked = true
			}
		}
	}
	if !linked {
		t.Error("no run span of the fork links to the parent run's trace")
	}
}
