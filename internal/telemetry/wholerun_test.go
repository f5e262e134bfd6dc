package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestWholeRunOneTrace runs a graph with a retried node, a child run, a
// human node that is signalled and one at which the run is cancelled, all
// in this process exporting over OTLP/HTTP to the test's receiver, and
// checks that every span of the run arrived in one trace, each with its
// parent: the signal and the cancel join the run's trace, the run's
// lifetime and its queue waits are spans, and decisions say what they
// decided.
func TestWholeRunOneTrace(t *testing.T) {
	col := startCollector(t)
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	shutdown, err := telemetry.Setup(context.Background(), "whole-run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(origTracerProvider) })

	_, store := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runEngine(t, ctx, store)

	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	cl := client.New(store)
	cctx, caller := otel.Tracer("test").Start(tctx, "caller")
	run, err := cl.Start(cctx, loadGraph(t, "testdata/whole-run.yaml"))
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	// The signal and the cancel are sent outside the caller's span, as a
	// later 'weft signal' and 'weft cancel' would.
	waitWaiting(t, tctx, cl, run, "approve")
	if err := cl.Signal(tctx, run, "approve", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, tctx, cl, run, "hold")
	if err := cl.Cancel(tctx, run, "enough"); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Wait(tctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCancelled {
		t.Fatalf("run ended %s, want cancelled", st.Status)
	}
	cancel()
	done()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("flushing: %v", err)
	}

	spans := col.Spans()
	byID := map[trace.SpanID]span{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	for _, s := range spans {
		if s.Trace != caller.SpanContext().TraceID() {
			t.Errorf("span %s is in trace %s, not the run's %s", s, s.Trace, caller.SpanContext().TraceID())
		}
		if s.Parent.IsValid() {
			if _, ok := byID[s.Parent]; !ok {
				t.Errorf("span %s: its parent never arrived", s)
			}
		}
	}
	find := func(match func(span) bool) []span {
		var out []span
		for _, s := range spans {
			if match(s) {
				out = append(out, s)
			}
		}
		return out
	}
	named := func(name string) []span { return find(func(s span) bool { return s.Name == name }) }
	one := func(name string) span {
		t.Helper()
		ss := named(name)
		if len(ss) != 1 {
			t.Fatalf("want one span %q, have %d of %d spans", name, len(ss), len(spans))
		}
		return ss[0]
	}
	root := one("run whole-run")
	if root.Parent != caller.SpanContext().SpanID() {
		t.Errorf("run span %s: want the caller's child", root)
	}
	// The signal and the cancel: children of the run's root, each handled
	// by the coordinator under its span.
	for name, handled := range map[string]string{"signal approve": "process signal.received", "cancel": "process run.cancel_requested"} {
		s := one(name)
		if s.Parent != root.ID || s.Kind != trace.SpanKindProducer {
			t.Errorf("%s: want a Producer child of the run span %s", s, root.ID)
		}
		if len(find(func(p span) bool { return p.Name == handled && p.Parent == s.ID })) == 0 {
			t.Errorf("%s: no %q under it", s, handled)
		}
	}
	// The retry and the child run.
	if n := len(find(func(s span) bool { return s.Name == "node flaky" })); n != 2 {
		t.Errorf("want two attempts of node flaky, have %d", n)
	}
	if len(named("process timer.fired")) == 0 {
		t.Error("no process timer.fired span: the retry's timer is not in the trace")
	}
	if n := len(named("process run.started")); n != 2 {
		t.Errorf("want the run's and the child's run.started handled, have %d", n)
	}
	if len(named("node twice")) != 1 {
		t.Error("the child run's node is not in the trace")
	}
	// The run's whole life, and the child's, under the run's root.
	life := find(func(s span) bool { return strings.HasPrefix(s.Name, telemetry.SpanLifetime+" ") })
	statuses := map[string]string{}
	for _, s := range life {
		statuses[s.Name] = s.Attrs["weft.run.status"]
	}
	if statuses["run lifetime whole-run"] != "cancelled" || statuses["run lifetime double"] != "completed" {
		t.Errorf("lifetime spans: want whole-run cancelled and double completed, have %v", statuses)
	}
	// Queue waits, under the decision that made the work: one per work
	// item on a worker queue (flaky's two attempts). prep and twice are
	// local nodes, run by the coordinator with no queue, each under a node
	// span of its own.
	waits := named(telemetry.SpanWait + " " + "default")
	if len(waits) < 2 {
		t.Errorf("want a wait span per work item on a queue (at least 2), have %d", len(waits))
	}
	for _, n := range []string{"node prep", "node twice"} {
		if len(named(n)) == 0 {
			t.Errorf("local node: no %q span", n)
		}
	}
	for _, w := range waits {
		if byID[w.Parent].Name != telemetry.SpanDecisions {
			t.Errorf("%s: want a child of send decisions, have %s", w, byID[w.Parent])
		}
	}
	// Decisions say what they decided.
	sawReady := false
	for _, d := range named(telemetry.SpanDecisions) {
		if d.Attrs["weft.decision.types"] == "" {
			t.Errorf("%s: no weft.decision.types", d)
		}
		sawReady = sawReady || strings.Contains(d.Attrs["weft.decision.types"], "node.ready") && strings.Contains(d.Attrs["weft.decision.nodes"], "flaky")
	}
	if !sawReady {
		t.Error("no send decisions span says it made flaky ready")
	}
	if t.Failed() || testing.Verbose() {
		for _, s := range spans {
			t.Logf("%s ← %s %v", s, byID[s.Parent].Name, s.Attrs)
		}
	}
}

// waitWaiting waits until node of run waits for a signal.
func waitWaiting(t *testing.T, ctx context.Context, cl *client.Client, run, node string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := cl.Get(ctx, run)
		if err == nil {
			if n := st.Nodes[node]; n != nil && n.Status == projection.NodeWaiting {
				return
			}
			if st.Status.Ended() {
				t.Fatalf("run %s ended %s before node %s waited", run, st.Status, node)
			}
		} else if !strings.Contains(err.Error(), events.ErrRunNotFound.Error()) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s of run %s did not wait in time", node, run)
		case <-tick.C:
		}
	}
}
