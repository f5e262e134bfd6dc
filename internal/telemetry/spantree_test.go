package telemetry_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// The providers the process started with, put back after each test that
// installs its own.
var (
	origTracerProvider = otel.GetTracerProvider()
	origMeterProvider  = otel.GetMeterProvider()
)

// span is a finished span, from an in-process recorder or an OTLP export,
// reduced to what the checks look at.
type span struct {
	Name    string
	Kind    trace.SpanKind
	Trace   trace.TraceID
	ID      trace.SpanID
	Parent  trace.SpanID
	Links   []trace.SpanContext
	Attrs   map[string]string
	Error   bool
	Service string
}

func (s span) String() string {
	return fmt.Sprintf("%s %q (%s) id=%s parent=%s", s.Service, s.Name, s.Kind, s.ID, s.Parent)
}

func fromReadOnly(ro sdktrace.ReadOnlySpan, service string) span {
	s := span{
		Name: ro.Name(), Kind: ro.SpanKind(), Trace: ro.SpanContext().TraceID(), ID: ro.SpanContext().SpanID(),
		Parent: ro.Parent().SpanID(), Attrs: map[string]string{}, Error: ro.Status().Code == 1, Service: service,
	}
	for _, l := range ro.Links() {
		s.Links = append(s.Links, l.SpanContext)
	}
	for _, kv := range ro.Attributes() {
		s.Attrs[string(kv.Key)] = kv.Value.Emit()
	}
	return s
}

// installTracing installs an SDK TracerProvider recording every span for
// the test, and puts the original back after it.
func installTracing(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(origTracerProvider)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

func loadGraph(t *testing.T, path string) *graph.Graph {
	t.Helper()
	g, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// startAndWait starts a run of g inside a span of the caller's and waits
// for the run to complete. It returns the caller's span context.
func startAndWait(t *testing.T, store events.Store, g *graph.Graph) trace.SpanContext {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(store)
	ctx, caller := otel.Tracer("test").Start(ctx, "caller")
	runID, err := c.Start(ctx, g)
	caller.End()
	if err != nil {
		t.Fatalf("starting the run: %v", err)
	}
	st, err := c.Wait(ctx, runID)
	if err != nil {
		t.Fatalf("waiting for run %s: %v", runID, err)
	}
	if st.Status != projection.RunCompleted {
		t.Fatalf("run %s ended %s: %+v", runID, st.Status, st.Error)
	}
	return caller.SpanContext()
}

// checkRunTrace checks the span tree of one run of the test graph started
// under the span caller:
//
//	caller → run (Producer) → process run.started → send decisions → node fork
//	node fork → process node.invoked → send decisions → node flaky, node steady
//	node flaky#1 (error) → process node.failed → (timer) process timer.fired
//	  → send decisions → node flaky#2
//	node merge ← send decisions, linked to node flaky#2 and node steady
func checkRunTrace(t *testing.T, spans []span, caller trace.SpanContext) {
	t.Helper()
	byID := map[trace.SpanID]span{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	dump := func() string {
		var b strings.Builder
		ss := append([]span(nil), spans...)
		sort.Slice(ss, func(i, j int) bool { return ss[i].Name < ss[j].Name })
		for _, s := range ss {
			fmt.Fprintf(&b, "\n  %s", s)
			if p, ok := byID[s.Parent]; ok {
				fmt.Fprintf(&b, " ← %q", p.Name)
			}
		}
		return b.String()
	}
	for _, s := range spans {
		if s.Trace != caller.TraceID() {
			t.Errorf("span %s is in trace %s, not the run's %s", s, s.Trace, caller.TraceID())
		}
		if s.ID != caller.SpanID() && s.Parent != caller.SpanID() {
			if _, ok := byID[s.Parent]; !ok {
				t.Errorf("span %s has a parent that is not in the trace", s)
			}
		}
	}
	find := func(name string, match func(span) bool) []span {
		var out []span
		for _, s := range spans {
			if s.Name == name && (match == nil || match(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string, match func(span) bool) span {
		t.Helper()
		ss := find(name, match)
		if len(ss) != 1 {
			t.Fatalf("want one span %q, have %d:%s", name, len(ss), dump())
		}
		return ss[0]
	}
	parentOf := func(s span) span { return byID[s.Parent] }
	attempt := func(n string) func(span) bool {
		return func(s span) bool { return s.Attrs["weft.node.attempt"] == n }
	}

	run := one("run branch-retry-join", nil)
	if run.Parent != caller.SpanID() || run.Kind != trace.SpanKindProducer {
		t.Errorf("run span %s: want a Producer child of the caller's span %s", run, caller.SpanID())
	}
	started := one("process run.started", nil)
	if started.Parent != run.ID || started.Kind != trace.SpanKindConsumer {
		t.Errorf("process run.started %s: want a Consumer child of the run span", started)
	}
	if started.Attrs["messaging.system"] != "nats" || started.Attrs["messaging.operation.type"] != "process" ||
		!strings.HasSuffix(started.Attrs["messaging.destination.name"], ".started") {
		t.Errorf("process run.started: messaging attributes %v", started.Attrs)
	}

	// Every node span hangs under the decision that made its work.
	for _, s := range find("", func(s span) bool { return strings.HasPrefix(s.Name, "node ") }) {
		if s.Kind != trace.SpanKindConsumer {
			t.Errorf("%s: want kind Consumer", s)
		}
		p := parentOf(s)
		if p.Name != "send decisions" || p.Kind != trace.SpanKindProducer {
			t.Errorf("%s: want a child of a send decisions Producer span, have %s", s, p)
		}
		for _, k := range []string{"weft.run.id", "weft.node.id", "weft.node.iteration", "weft.node.attempt", "weft.node.delivery", "weft.node.type"} {
			if s.Attrs[k] == "" {
				t.Errorf("%s: no attribute %s", s, k)
			}
		}
	}
	// Every outcome the coordinator handles hangs under the node's span.
	for _, s := range find("", func(s span) bool {
		return s.Name == "process node.invoked" || s.Name == "process node.failed" || s.Name == "process node.invoking"
	}) {
		if p := parentOf(s); !strings.HasPrefix(p.Name, "node ") {
			t.Errorf("%s: want a child of a node span, have %s", s, p)
		}
	}

	fork := one("node fork", nil)
	if d := parentOf(fork); parentOf(d).ID != started.ID {
		t.Errorf("node fork: want it decided while handling run.started, have %s ← %s", d, parentOf(d))
	}
	flaky1 := one("node flaky", attempt("1"))
	if !flaky1.Error {
		t.Errorf("node flaky attempt 1: want an error status")
	}
	flaky2 := one("node flaky", attempt("2"))
	if flaky2.Error {
		t.Errorf("node flaky attempt 2: want no error status")
	}
	// The retry: attempt 2 was decided when the timer fired, the timer was
	// set while handling attempt 1's failure.
	fired := parentOf(parentOf(flaky2))
	if fired.Name != "process timer.fired" {
		t.Fatalf("node flaky attempt 2: want it decided while handling timer.fired, have %s:%s", fired, dump())
	}
	// The retry was decided while the coordinator handled an event of
	// attempt 1: its failure, or its invoking when the run was folded
	// afresh and the failure was in the log already.
	failed := parentOf(fired)
	if (failed.Name != "process node.failed" && failed.Name != "process node.invoking") || failed.Parent != flaky1.ID {
		t.Errorf("timer.fired: want a child of a process span of node flaky attempt 1, have %s ← %s", failed, parentOf(failed))
	}
	steady := one("node steady", nil)
	if parentOf(steady).ID != parentOf(flaky1).ID {
		t.Errorf("the branches: want flaky and steady decided together, have %s and %s", parentOf(steady), parentOf(flaky1))
	}

	// The join: its decision is linked to both branches' node spans.
	merge := one("node merge", nil)
	join := parentOf(merge)
	linked := map[trace.SpanID]bool{}
	for _, l := range join.Links {
		if l.TraceID() != caller.TraceID() {
			t.Errorf("join decision link to trace %s", l.TraceID())
		}
		linked[l.SpanID()] = true
	}
	if !linked[flaky2.ID] || !linked[steady.ID] {
		t.Errorf("join decision %s: want links to node flaky attempt 2 (%s) and node steady (%s), have %v:%s", join, flaky2.ID, steady.ID, join.Links, dump())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("spans:%s", dump())
	}
}
