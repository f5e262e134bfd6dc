package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/replay"
	"github.com/weft-dev/weft/pkg/worker"
)

// localGraph: transforms and a router, all run by the coordinator.
const localGraph = `
name: local
nodes:
  - {id: a, type: transform, config: {set: {count: 'state.i + 1'}}}
  - id: r
    type: router
    config: {routes: [{when: 'state.count > 1', action: big}], default: small}
  - {id: big, type: transform, config: {set: {size: '"big"'}}}
  - {id: small, type: transform, config: {set: {size: '"small"', tenfold: 'state.count * 10'}}}
edges:
  - {from: START, to: a}
  - {from: a, to: r}
  - {from: r, to: big, action: big}
  - {from: r, to: small, action: small}
  - {from: big, to: END}
  - {from: small, to: END}
`

// localEvents returns the run's events that are local nodes' work items
// and outcomes, as "type node attempt".
func localEvents(evs []*events.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Queue != events.LocalQueue {
			continue
		}
		p, _ := e.Payload()
		att := 0
		switch d := p.(type) {
		case *events.NodeReadyData:
			att = d.Attempt
		case *events.NodeInvokedData:
			att = d.Attempt
		case *events.NodeFailedData:
			att = d.Attempt
		}
		out = append(out, fmt.Sprintf("%s %s %d", strings.TrimSuffix(strings.TrimPrefix(string(e.Type), "dev.weft."), ".v1"), e.NodeID, att))
	}
	return out
}

func checkNoDuplicates(t *testing.T, st events.Store, runs []string) {
	t.Helper()
	for _, run := range runs {
		evs := readRun(t, st, run)
		if d := testkit.DuplicateDecisions(evs); len(d) > 0 {
			t.Fatalf("run %s: decisions written twice: %v", run, d)
		}
		if d := testkit.DuplicateFacts(evs); len(d) > 0 {
			t.Fatalf("run %s: facts written twice: %v", run, d)
		}
	}
}

func TestLocalNodesRunWithoutWorkers(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	// No worker at all: the transforms and the router are the coordinator's.
	runs := start(t, st, mustGraph(t, localGraph), 4)
	states := waitEnded(t, st, runs, 30*time.Second)
	checkExactlyOnce(t, st, runs, 2) // a, and big or small
	checkNoDuplicates(t, st, runs)
	for i, run := range runs {
		s := states[run]
		vars := s.VarsMap()
		wantSize := "small"
		if i+1 > 1 {
			wantSize = "big"
		}
		if vars["count"] != float64(i+1) || vars["size"] != wantSize {
			t.Fatalf("run %d: vars %v", i, vars)
		}
		evs := readRun(t, st, run)
		next := "small"
		if wantSize == "big" {
			next = "big"
		}
		want := fmt.Sprintf("[node.ready a 1 node.invoked a 1 node.ready %[1]s 1 node.invoked %[1]s 1]", next)
		if got := fmt.Sprint(localEvents(evs)); got != want {
			t.Fatalf("run %d: local events %s, want %s", i, got, want)
		}
		for _, e := range evs {
			if e.Type == events.NodeInvoked && e.NodeID == "r" && !e.IsDecision() {
				t.Fatalf("the router's outcome is not the coordinator's: %s", e.Subject())
			}
			if e.Type == events.NodeInvoking {
				t.Fatalf("a local node was taken by a worker: %s", e.Subject())
			}
		}
		if n := s.Nodes["a"]; n.Worker != "coordinator" || n.Status != projection.NodeSucceeded {
			t.Fatalf("node a: %+v", n)
		}
	}
	if st := c.Stats(); st.LocalRuns != 8 || st.Errors != 0 || st.Malformed != 0 {
		t.Fatalf("stats %+v", st)
	}
	// No task queue consumer was made for local work.
	stream, err := eventlog.JetStream(st).Stream(ctx, st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	for name := range stream.ConsumerNames(ctx).Name() {
		if strings.Contains(name, events.LocalQueue) || strings.Contains(name, "default") {
			t.Fatalf("consumer %q made for local nodes", name)
		}
	}
}

// flaky fails with a retryable error until its attempt reaches okAt.
type flaky struct {
	okAt  int
	calls atomic.Int64
}

func (f *flaky) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	f.calls.Add(1)
	if in.Attempt < f.okAt {
		return nil, worker.Retryable("Flaky", fmt.Sprintf("attempt %d", in.Attempt))
	}
	return &worker.Result{Updates: map[string]any{"ok": in.Attempt}}, nil
}

func TestLocalNodeRetriesByPolicy(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &flaky{okAt: 3}
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithLocalNode("flaky", f))
	g := anyTypeGraph(t, `
name: retries
nodes:
  - id: f
    type: flaky
    retry: {maxAttempts: 3, initialInterval: 10ms, maxInterval: 20ms}
edges:
  - {from: START, to: f}
  - {from: f, to: END}
`)
	runs := start(t, st, g, 1)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.Status != projection.RunCompleted || s.VarsMap()["ok"] != float64(3) {
		t.Fatalf("run %s, vars %v (%v)", s.Status, s.VarsMap(), s.Error)
	}
	evs := readRun(t, st, runs[0])
	want := "[node.ready f 1 node.failed f 1 node.ready f 2 node.failed f 2 node.ready f 3 node.invoked f 3]"
	if got := fmt.Sprint(localEvents(evs)); got != want {
		t.Fatalf("local events %s, want %s", got, want)
	}
	if n := len(payloadsOf[*events.RetryScheduledData](evs)); n != 2 {
		t.Fatalf("%d retries scheduled, want 2", n)
	}
	checkNoDuplicates(t, st, runs)

	// Out of attempts: the run fails, naming the node, after maxAttempts.
	g2 := anyTypeGraph(t, `
name: exhausted
nodes:
  - id: never
    type: flaky
    retry: {maxAttempts: 2, initialInterval: 10ms}
edges:
  - {from: START, to: never}
  - {from: never, to: END}
`)
	f.okAt = 99 // read by the coordinator only after the next run starts
	runs = start(t, st, g2, 1)
	s = waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.Status != projection.RunFailed || s.Error == nil || !strings.Contains(s.Error.Message, `node "never" failed after 2 attempt(s)`) {
		t.Fatalf("run %s: %+v", s.Status, s.Error)
	}
}

func TestForcedToQueueTransformsRunOnWorkers(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1", "default", "other")
	g := mustGraph(t, `
name: forced
nodes:
  - {id: a, type: transform, local: false, config: {set: {x: '1'}}}
  - {id: b, type: transform, queue: other, config: {set: {x2: '2'}}}
  - {id: c, type: transform, config: {set: {x3: '3'}}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`)
	runs := start(t, st, g, 2)
	waitEnded(t, st, runs, 30*time.Second)
	checkExactlyOnce(t, st, runs, 3)
	for _, run := range runs {
		queues := map[string]string{}
		for _, e := range readRun(t, st, run) {
			if e.Type == events.NodeInvoked {
				p, _ := e.Payload()
				queues[e.NodeID] = e.Queue + "/" + p.(*events.NodeInvokedData).Worker
			}
		}
		want := map[string]string{"a": "default/w1", "b": "other/w1", "c": events.LocalQueue + "/coordinator"}
		if fmt.Sprint(queues) != fmt.Sprint(want) {
			t.Fatalf("outcomes by queue/worker %v, want %v", queues, want)
		}
	}
}

// blocker blocks its first execution until its context ends; later ones
// succeed at once.
type blocker struct {
	started chan struct{}
	once    sync.Once
	calls   atomic.Int64
}

func (b *blocker) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	if b.calls.Add(1) == 1 {
		b.once.Do(func() { close(b.started) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &worker.Result{Updates: map[string]any{"done": true}}, nil
}

func TestLocalNodeRunsAgainAfterCoordinatorStops(t *testing.T) {
	_, st := testkit.Store(t)
	b := &blocker{started: make(chan struct{})}
	opts := []coordinator.Option{coordinator.WithLogger(quiet()), coordinator.WithLocalNode("block", b), coordinator.WithLeaseTTL(time.Second)}
	g := anyTypeGraph(t, `
name: block
nodes:
  - {id: pre, type: transform, config: {set: {a: '1'}}}
  - {id: b, type: block, timeout: 1m}
  - {id: post, type: transform, config: {set: {c: 'state.a + 1'}}}
edges:
  - {from: START, to: pre}
  - {from: pre, to: b}
  - {from: b, to: post}
  - {from: post, to: END}
`)
	ctx1, stop1 := context.WithCancel(context.Background())
	c1 := coordinator.New(st, opts...)
	done1 := make(chan struct{})
	go func() { defer close(done1); _ = c1.Run(ctx1) }()
	t.Cleanup(func() { stop1(); <-done1 })
	runs := start(t, st, g, 1)
	select {
	case <-b.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the local node did not start")
	}
	// The node is ready in the log, running detached; its outcome is not
	// in. The coordinator goes away.
	stop1()
	<-done1
	evs := readRun(t, st, runs[0])
	if s := projection.Fold(evs); s.Nodes["b"] == nil || s.Nodes["b"].Status != projection.NodeReady {
		t.Fatalf("node b before the restart: %+v", s.Nodes["b"])
	}
	ctx2, stop2 := context.WithCancel(context.Background())
	t.Cleanup(stop2)
	c2 := runCoordinator(t, ctx2, st, opts...)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.Status != projection.RunCompleted || s.VarsMap()["c"] != float64(2) {
		t.Fatalf("run %s vars %v (%v)", s.Status, s.VarsMap(), s.Error)
	}
	checkExactlyOnce(t, st, runs, 3)
	checkNoDuplicates(t, st, runs)
	if n := b.calls.Load(); n != 2 {
		t.Fatalf("the local node ran %d times, want 2 (once given up, once to its outcome)", n)
	}
	if got := c2.Stats().LocalRuns; got < 1 {
		t.Fatalf("the new coordinator ran %d local nodes", got)
	}
}

func TestLocalOutcomeLostAppendRunsAgain(t *testing.T) {
	_, inner := testkit.Store(t)
	st := testkit.NewFaultStore(inner)
	var failed atomic.Int64
	st.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(run string, evs []*events.Event) error {
			// The first outcome of node b is not written, nor the
			// decision made after it (one step: eventlog.Engine.AppendStep):
			// as if the coordinator died between ready and outcome.
			if len(evs) > 0 && evs[0].Queue == events.LocalQueue && evs[0].NodeID == "b" && failed.Add(1) == 1 {
				return errors.New("injected: append lost")
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(t, `
name: lost
nodes:
  - {id: a, type: transform, config: {set: {x: '1'}}}
  - {id: b, type: transform, config: {set: {x2: 'state.x + 1'}}}
  - {id: c, type: transform, config: {set: {x3: 'state.x2 + 1'}}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`)
	runs := start(t, st, g, 1)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.VarsMap()["x3"] != float64(3) {
		t.Fatalf("vars %v", s.VarsMap())
	}
	if failed.Load() < 2 {
		t.Fatalf("node b's outcome was appended %d times, want a failed one then one more", failed.Load())
	}
	checkExactlyOnce(t, st, runs, 3)
	checkNoDuplicates(t, st, runs)
}

// A local step (node b's outcome and node c's ready, one write) lands
// but its acknowledgement is lost: the coordinator reads the run again,
// finds both, and goes on, with no node run twice to a second outcome.
func TestLocalStepLostAckGoesOn(t *testing.T) {
	_, inner := testkit.Store(t)
	st := testkit.NewFaultStore(inner)
	var lost atomic.Int64
	var stepped atomic.Bool
	st.Set(func(f *testkit.FaultStore) {
		f.AfterAppend = func(run string, evs []*events.Event) error {
			if len(evs) > 1 && evs[0].Queue == events.LocalQueue && evs[0].NodeID == "b" && evs[1].IsDecision() {
				stepped.Store(true)
				if lost.Add(1) == 1 {
					return errors.New("injected: acknowledgement lost")
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(t, `
name: lostack
nodes:
  - {id: a, type: transform, config: {set: {x: '1'}}}
  - {id: b, type: transform, config: {set: {x2: 'state.x + 1'}}}
  - {id: c, type: transform, config: {set: {x3: 'state.x2 + 1'}}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`)
	runs := start(t, st, g, 1)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.VarsMap()["x3"] != float64(3) {
		t.Fatalf("vars %v", s.VarsMap())
	}
	if !stepped.Load() || lost.Load() != 1 {
		t.Fatalf("node b's outcome went in with the next decision %d times (lost ack injected: %v), want once", lost.Load(), stepped.Load())
	}
	checkExactlyOnce(t, st, runs, 3)
	checkNoDuplicates(t, st, runs)
}

// A run of local steps (a chain, then two branches in one round, joined)
// replays clean on its graph: the outcome and the decisions after it,
// written as one step, are the events the engine decides from them, in
// that order.
func TestLocalStepsReplayClean(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(t, `
name: steps
nodes:
  - {id: a, type: transform, config: {set: {one: '1'}}}
  - {id: b, type: transform, config: {set: {two: 'state.one + 1'}}}
  - {id: c, type: transform, config: {set: {three: 'state.one + 2'}}}
  - {id: d, type: transform, config: {set: {sum: 'state.two + state.three'}}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: a, to: c}
  - {from: b, to: d}
  - {from: c, to: d}
  - {from: d, to: END}
`)
	runs := start(t, st, g, 3)
	states := waitEnded(t, st, runs, 30*time.Second)
	for _, run := range runs {
		if got := states[run].VarsMap()["sum"]; got != float64(5) {
			t.Fatalf("run %s: sum = %v, want 5 (status %s, vars %v)", run, got, states[run].Status, states[run].VarsMap())
		}
		evs := readRun(t, st, run)
		r := replay.Check(t, g, evs)
		if r.Decisions == 0 || r.Events != len(evs) {
			t.Fatalf("run %s: replayed %d of %d events, %d decisions", run, r.Events, len(evs), r.Decisions)
		}
	}
	checkExactlyOnce(t, st, runs, 4)
	checkNoDuplicates(t, st, runs)
}

// A worker's outcome for a local attempt, on its own queue, does not count.
func TestWorkerCannotAnswerForLocalNode(t *testing.T) {
	s := &projection.State{}
	run := "r1"
	apply := func(e *events.Event, seq uint64) error {
		e.Seq = seq
		return s.Apply(e)
	}
	mk := func(p events.Payload, id string, queue string, decision bool) *events.Event {
		e, err := events.New(run, id, time.Unix(1, 0), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Queue = queue
		if decision {
			eventlog.MarkDecision(e)
		}
		return e
	}
	g := mustGraph(t, `
name: one
nodes: [{id: a, type: transform, config: {set: {x: '1'}}}]
edges: [{from: START, to: a}, {from: a, to: END}]
`)
	if err := apply(mk(&events.RunStartedData{GraphName: "one", Graph: g.Canonical(), GraphDigest: g.Digest()}, run, "", false), 1); err != nil {
		t.Fatal(err)
	}
	ref := events.NodeRef{Node: "a", Iteration: 1}
	if err := apply(mk(&events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: "transform", Queue: events.LocalQueue}, "ready", "", true), 2); err != nil {
		t.Fatal(err)
	}
	forged := mk(&events.NodeInvokedData{NodeRef: ref, Attempt: 1, Delivery: 1, Output: json.RawMessage(`"forged"`)}, "forged", "default", false)
	if err := apply(forged, 3); !errors.Is(err, projection.ErrStale) {
		t.Fatalf("a worker's outcome for a local attempt: %v, want stale", err)
	}
	real := mk(&events.NodeInvokedData{NodeRef: ref, Attempt: 1, Output: json.RawMessage(`"real"`)}, "real", events.LocalQueue, false)
	if err := apply(real, 4); err != nil {
		t.Fatal(err)
	}
	if got := string(s.Nodes["a"].Output); got != `"real"` {
		t.Fatalf("output %s", got)
	}
}

// gate blocks every execution until released (or its context ends).
type gate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gate) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	g.once.Do(func() { close(g.started) })
	select {
	case <-g.release:
		return &worker.Result{Updates: map[string]any{"gated": true}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A slow local node is detached from its shard: another run on the same
// (only) shard completes while it runs, and it completes once it returns.
func TestSlowLocalNodeDoesNotStallOtherRuns(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gt := &gate{started: make(chan struct{}), release: make(chan struct{})}
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithShards(1), coordinator.WithLocalNode("gate", gt))
	slow := start(t, st, anyTypeGraph(t, `
name: slow
nodes: [{id: g, type: gate, timeout: 1m}]
edges: [{from: START, to: g}, {from: g, to: END}]
`), 1)
	select {
	case <-gt.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow node did not start")
	}
	fast := start(t, st, mustGraph(t, localGraph), 3)
	waitEnded(t, st, fast, 30*time.Second)
	if s := projection.Fold(readRun(t, st, slow[0])); s.Status.Ended() || s.Nodes["g"].Status != projection.NodeReady {
		t.Fatalf("the slow run moved on before its node returned: %s %+v", s.Status, s.Nodes["g"])
	}
	close(gt.release)
	s := waitEnded(t, st, slow, 30*time.Second)[slow[0]]
	if s.Status != projection.RunCompleted || s.VarsMap()["gated"] != true {
		t.Fatalf("slow run %s %v", s.Status, s.VarsMap())
	}
	if got := c.Stats().LocalDetached; got < 1 {
		t.Fatalf("%d local nodes detached, want the slow one", got)
	}
	checkNoDuplicates(t, st, append(fast, slow...))
}

// A local node's timeout bounds each attempt; a timed-out attempt is
// retried by the policy like any node's.
func TestLocalNodeTimeout(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gt := &gate{started: make(chan struct{}), release: make(chan struct{})}
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithLocalNode("gate", gt))
	runs := start(t, st, anyTypeGraph(t, `
name: timeout
nodes: [{id: g, type: gate, timeout: 100ms, retry: {maxAttempts: 2, initialInterval: 10ms}}]
edges: [{from: START, to: g}, {from: g, to: END}]
`), 1)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailureTimeout || !strings.Contains(s.Error.Message, "after 2 attempt(s)") {
		t.Fatalf("run %s: %+v", s.Status, s.Error)
	}
	want := "[node.ready g 1 node.failed g 1 node.ready g 2 node.failed g 2]"
	if got := fmt.Sprint(localEvents(readRun(t, st, runs[0]))); got != want {
		t.Fatalf("local events %s, want %s", got, want)
	}
}

// The items of a mapped local node run in the coordinator, each recorded
// as its own attempt.
func TestLocalMapItems(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runs := start(t, st, mustGraph(t, `
name: mapped
nodes:
  - id: sq
    type: transform
    map: {over: '[1, 2, 3, 4]', concurrency: 2}
    config: {output: 'local.item * local.item'}
edges: [{from: START, to: sq}, {from: sq, to: END}]
`), 1)
	s := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if s.Status != projection.RunCompleted || string(s.Nodes["sq"].Output) != "[1,4,9,16]" {
		t.Fatalf("run %s, output %s (%v)", s.Status, s.Nodes["sq"].Output, s.Error)
	}
	if n := len(localEvents(readRun(t, st, runs[0]))); n != 8 {
		t.Fatalf("%d local events, want 4 ready and 4 invoked", n)
	}
	checkNoDuplicates(t, st, runs)
}

// Many chains of local nodes at once, more runs than shards can hold
// apart: each node runs once to its outcome, each decision is written
// once, and every run completes.
func TestConcurrentLocalChains(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithShards(4))
	const nodes, n = 60, 12
	var b strings.Builder
	b.WriteString("name: c\nnodes:\n")
	for i := range nodes {
		fmt.Fprintf(&b, "  - {id: n%d, type: transform, config: {set: {x: 'state.i + %d'}}}\n", i, i)
	}
	b.WriteString("edges:\n  - {from: START, to: n0}\n")
	for i := range nodes - 1 {
		fmt.Fprintf(&b, "  - {from: n%d, to: n%d}\n", i, i+1)
	}
	fmt.Fprintf(&b, "  - {from: n%d, to: END}\n", nodes-1)
	runs := start(t, st, mustGraph(t, b.String()), n)
	states := waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, nodes)
	checkNoDuplicates(t, st, runs)
	for i, run := range runs {
		if got := states[run].VarsMap()["x"]; got != float64(i+nodes-1) {
			t.Fatalf("run %d: x = %v", i, got)
		}
	}
	if s := c.Stats(); s.LocalRuns != nodes*n || s.Errors != 0 {
		t.Fatalf("stats %+v, want %d local runs", s, nodes*n)
	}
}
