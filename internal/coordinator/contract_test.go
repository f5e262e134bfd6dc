package coordinator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// runCustomWorker runs an in-process worker with the built-in executors and
// the given nodes and options.
func runCustomWorker(t testing.TB, ctx context.Context, st events.Store, nodes map[string]worker.Node, opts ...worker.Option) {
	t.Helper()
	opts = append([]worker.Option{worker.WithName("custom"), worker.WithAnnounceInterval(-1), worker.WithLogger(quiet())}, opts...)
	w, err := worker.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	for typ, n := range nodes {
		w.Handle(typ, n)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func readRun(t testing.TB, st events.Store, run string) []*events.Event {
	t.Helper()
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func payloadsOf[P events.Payload](evs []*events.Event) []P {
	var out []P
	for _, e := range evs {
		if p, err := e.Payload(); err == nil {
			if v, ok := p.(P); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// The node contract end to end: a worker fallback lets the run go on, a
// filter-cancelled node is routed like a skipped one, outputAs promotes the
// output into the artifacts, and the schemas reach the worker.
func TestNodeContractInRuns(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runCustomWorker(t, ctx, st, map[string]worker.Node{
		"flaky": fallbackNode{},
	}, worker.WithInvokingFilter("gate", worker.InvokingFilterFunc(func(ctx context.Context, in *worker.Input) (worker.FilterDecision, error) {
		if in.NodeID == "gated" {
			return worker.Cancel("gated by policy"), nil
		}
		return worker.Pass(), nil
	})))

	g := anyTypeGraph(t, `
name: contract
nodes:
  - {id: flaky, type: flaky, retry: {maxAttempts: 2, initialInterval: 100ms}, outputAs: answer}
  - {id: gated, type: echo, join: any}
  - {id: after, type: echo, join: any}
edges:
  - {from: START, to: flaky}
  - {from: flaky, to: gated}
  - {from: flaky, to: after}
  - {from: gated, to: END}
  - {from: after, to: END}
`)
	run := start(t, st, g, 1)[0]
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	evs := readRun(t, st, run)
	// flaky: attempt 1 fails, attempt 2 (the last) falls back.
	var invoked *events.NodeInvokedData
	for _, d := range payloadsOf[*events.NodeInvokedData](evs) {
		if d.Node == "flaky" {
			invoked = d
		}
	}
	if invoked == nil || !invoked.Fallback || invoked.Attempt != 2 || string(invoked.Output) != `{"fallback":true}` {
		t.Fatalf("flaky invoked = %+v", invoked)
	}
	for _, r := range payloadsOf[*events.NodeReadyData](evs) {
		if r.Node == "flaky" && r.MaxAttempts != 2 {
			t.Errorf("ready carries max attempts %d, want 2", r.MaxAttempts)
		}
	}
	if got := string(s.Artifacts["answer"]); got != `{"fallback":true}` {
		t.Errorf("artifact answer = %s", got)
	}
	// gated: cancelled by the filter; its edge to END is not taken, the
	// run still completes through after.
	if ns := s.Nodes["gated"]; ns == nil || ns.Status != projection.NodeCancelled {
		t.Fatalf("gated = %+v", s.Nodes["gated"])
	}
	for _, r := range payloadsOf[*events.NodeRoutedData](evs) {
		if r.Node == "gated" {
			for _, sig := range r.Signals {
				if sig.Taken {
					t.Errorf("a cancelled node took edge %+v", sig)
				}
			}
		}
	}
	c := payloadsOf[*events.NodeCancelledData](evs)
	if len(c) != 1 || c[0].By != "filter:gate" {
		t.Errorf("cancelled = %+v", c)
	}
}

// fallbackNode fails retryably and falls back on its last attempt.
type fallbackNode struct{}

func (fallbackNode) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	return nil, worker.Retryable("Upstream", "upstream is down")
}

func (fallbackNode) Fallback(ctx context.Context, in *worker.Input, err error) (*worker.Result, error) {
	return &worker.Result{Output: map[string]any{"fallback": true}}, nil
}

// An input schema violation fails the run with a ValidationError naming the
// field, and is not retried.
func TestSchemaViolationFailsRun(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runCustomWorker(t, ctx, st, nil)
	g := mustGraph(t, `
name: typed
nodes:
  - {id: typed, type: echo, inputSchema: {type: object, properties: {i: {type: string}}}}
edges:
  - {from: START, to: typed}
  - {from: typed, to: END}
`)
	run := start(t, st, g, 1)[0] // input {"i": 0}
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailureValidation || !strings.Contains(s.Error.Error(), "/i: got number, want string") {
		t.Fatalf("run = %s %+v", s.Status, s.Error)
	}
	if n := len(payloadsOf[*events.NodeReadyData](readRun(t, st, run))); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// Work of a type no live worker serves waits as "ready" and runs once a
// worker for it comes.
func TestUnservedTypeWaits(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	g := anyTypeGraph(t, `
name: rare
nodes:
  - {id: r, type: rare}
edges:
  - {from: START, to: r}
  - {from: r, to: END}
`)
	run := start(t, st, g, 1)[0]
	waitFor(t, st, run, events.NodeReady)
	live, err := worker.LiveWorkers(ctx, eventlog.JetStream(st))
	if err != nil || len(live) != 0 {
		t.Fatalf("live workers = %v, %v", live, err)
	}
	// Waits for an absence: nothing is to happen, so it is watched for a
	// while, there being no event to wait for.
	time.Sleep(300 * time.Millisecond)
	if s := projection.Fold(readRun(t, st, run)); s.Status != projection.RunRunning || s.Nodes["r"].Status != projection.NodeReady {
		t.Fatalf("unserved work: run %s, node %s", s.Status, s.Nodes["r"].Status)
	}
	runCustomWorker(t, ctx, st, map[string]worker.Node{"rare": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		return &worker.Result{Output: "finally"}, nil
	})})
	if s := waitEnded(t, st, []string{run}, 30*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s", s.Status)
	}
}

// A checkpointed node leaves a snapshot of its run; snapshot plus tail is
// the full fold.
func TestCheckpointSnapshots(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runCustomWorker(t, ctx, st, nil)
	plain := mustGraph(t, chain)
	if runs := start(t, st, plain, 1); waitEnded(t, st, runs, 30*time.Second)[runs[0]].Status != projection.RunCompleted {
		t.Fatal("plain run failed")
	}
	if sn, err := coordinator.LoadSnapshot(ctx, eventlog.JetStream(st), "nope"); err != nil || sn != nil {
		t.Fatalf("snapshot without checkpoints: %v %v", sn, err)
	}
	g := mustGraph(t, `
name: checkpointed
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo, checkpoint: after}
  - {id: c, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`)
	run := start(t, st, g, 1)[0]
	waitEnded(t, st, []string{run}, 30*time.Second)
	sn := waitSnapshot(t, st, run)
	evs := readRun(t, st, run)
	s, err := sn.Restore()
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot is taken after b's outcome, just before the decision
	// that routes it (which records its digest): b succeeded, not yet
	// routed.
	if s.Nodes["b"] == nil || s.Nodes["b"].Status != projection.NodeSucceeded || s.Nodes["b"].Routed != 0 || s.Status != projection.RunRunning || sn.Seq >= evs[len(evs)-1].Seq {
		t.Errorf("snapshot at %d: b %+v, run %s", sn.Seq, s.Nodes["b"], s.Status)
	}
	tail, err := st.Read(ctx, run, sn.Seq+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := projection.Resume(s, tail).Marshal(), projection.Fold(evs).Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("snapshot plus tail:\n%s\nfull fold:\n%s", got, want)
	}
}

// A retry survives the restart of every process during its wait: the retry
// is a durable JetStream message schedule.
func TestRetrySurvivesRestartOfEverything(t *testing.T) {
	dir := t.TempDir()
	port := testkit.FreePort(t)
	type world struct {
		stop func()
		st   events.Store
	}
	up := func() world {
		srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		st, err := events.Open(context.Background(), js)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		c := coordinator.New(st, coordinator.WithLogger(quiet()))
		wg.Go(func() { _ = c.Run(ctx) })
		w, err := worker.New(st, worker.WithName(fmt.Sprintf("w-%d", time.Now().UnixNano())), worker.WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		builtin.Register(w)
		wg.Go(func() { _ = w.Run(ctx) })
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				wg.Wait()
				nc.Close()
				embedded.Stop(srv)
			})
		}
		t.Cleanup(stop)
		return world{stop: stop, st: st}
	}

	w1 := up()
	g := mustGraph(t, `
name: durable-retry
nodes:
  - {id: flaky, type: fail, config: {failAttempts: 1}, retry: {maxAttempts: 3, initialInterval: 3s, jitter: 0.01}}
edges:
  - {from: START, to: flaky}
  - {from: flaky, to: END}
`)
	run := start(t, w1.st, g, 1)[0]
	waitFor(t, w1.st, run, events.RetryScheduled)
	w1.stop() // coordinator, worker and NATS server, during the wait

	w2 := up()
	s := waitEnded(t, w2.st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	evs := readRun(t, w2.st, run)
	var attempts []string
	for _, e := range evs {
		p, _ := e.Payload()
		switch d := p.(type) {
		case *events.NodeReadyData:
			attempts = append(attempts, fmt.Sprintf("ready %d", d.Attempt))
		case *events.NodeInvokingData:
			attempts = append(attempts, fmt.Sprintf("invoking %d", d.Attempt))
		case *events.NodeFailedData:
			attempts = append(attempts, fmt.Sprintf("failed %d", d.Attempt))
		case *events.RetryScheduledData:
			attempts = append(attempts, fmt.Sprintf("retry %d", d.Attempt))
		case *events.TimerFiredData:
			attempts = append(attempts, fmt.Sprintf("timer %d", d.Attempt))
		case *events.NodeInvokedData:
			attempts = append(attempts, fmt.Sprintf("invoked %d", d.Attempt))
		}
	}
	want := "[ready 1 invoking 1 failed 1 retry 2 timer 2 ready 2 invoking 2 invoked 2]"
	if got := fmt.Sprint(attempts); got != want {
		t.Fatalf("attempts = %s, want %s", got, want)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func anyTypeGraph(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	return g
}
