package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// loopGraph is one local transform that loops on itself n times.
func loopGraph(n int) string {
	return fmt.Sprintf(`
name: long
version: "1"
maxIterations: %[1]d
nodes:
  - id: step
    type: transform
    maxIterations: %[1]d
    config:
      set:
        count: "state.?count.orValue(0) + 1"
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.count < %[1]d"}
  - {from: step, to: END, when: "state.count >= %[1]d"}
`, n)
}

// The inline budget can be spent before the first local node of a handled
// event starts (the handler was descheduled for longer than the budget on
// a loaded machine). The node whose node-ready's echo is being handled
// must run all the same: its echo is what would start it, and once
// acknowledged nothing starts it again. With the budget spent before
// every node, several long local loops all end, each step once.
func TestLocalNodeRunsWhenBudgetSpentBeforeItStarts(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithShards(2), coordinator.WithLocalInlineBudget(time.Nanosecond))
	const steps, n = 60, 4
	runs := start(t, st, mustGraph(t, loopGraph(steps)), n)
	checkLoopsEnded(t, st, c, runs, steps)
}

// checkLoopsEnded waits for the runs of loopGraph(steps) to end, and
// checks that each completed, ran every step once and wrote nothing twice.
func checkLoopsEnded(t *testing.T, st events.Store, c *coordinator.Coordinator, runs []string, steps int) {
	t.Helper()
	states := waitEnded(t, st, runs, 60*time.Second)
	for _, run := range runs {
		if s := states[run]; s.Status != projection.RunCompleted || s.VarsMap()["count"] != float64(steps) {
			t.Fatalf("run %s: %s, count %v (%v)", run, s.Status, s.VarsMap()["count"], s.Error)
		}
	}
	checkNoDuplicates(t, st, runs)
	if s := c.Stats(); s.LocalRuns != int64(steps*len(runs)) {
		t.Fatalf("%d local runs, want %d", s.LocalRuns, steps*len(runs))
	}
}

// stopper stops the coordinator that runs it, the first time, and gives
// up with it; later executions succeed.
type stopper struct {
	stop  func()
	calls atomic.Int64
}

func (s *stopper) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	if s.calls.Add(1) == 1 {
		s.stop()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &worker.Result{Updates: map[string]any{"stopped": true}}, nil
}

// A coordinator stops while a local node is ready and not run: its node
// started from its own node-ready's echo and was given up as the
// coordinator stopped. The echo goes back unacknowledged, and the next
// coordinator runs the node and ends the run.
func TestLocalNodeReadyAtStopRunsOnNextCoordinator(t *testing.T) {
	_, st := testkit.Store(t)
	ctx1, stop1 := context.WithCancel(context.Background())
	s := &stopper{stop: stop1}
	// A budget no node outruns: a, b and c run in the three inline rounds
	// of the run-started event, and s when its node-ready's echo comes.
	opts := []coordinator.Option{coordinator.WithLogger(quiet()), coordinator.WithLeaseTTL(time.Second),
		coordinator.WithLocalNode("stop", s), coordinator.WithLocalInlineBudget(time.Minute)}
	g := anyTypeGraph(t, `
name: stop
nodes:
  - {id: a, type: transform, config: {set: {a: '1'}}}
  - {id: b, type: transform, config: {set: {b: 'state.a + 1'}}}
  - {id: c, type: transform, config: {set: {c: 'state.b + 1'}}}
  - {id: s, type: stop}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: s}
  - {from: s, to: END}
`)
	c1 := coordinator.New(st, opts...)
	var wg sync.WaitGroup
	wg.Go(func() { _ = c1.Run(ctx1) })
	t.Cleanup(func() { stop1(); wg.Wait() })
	runs := start(t, st, g, 1)
	wg.Wait() // s stopped the coordinator
	if s := projection.Fold(readRun(t, st, runs[0])); s.Nodes["s"] == nil || s.Nodes["s"].Status != projection.NodeReady {
		t.Fatalf("node s when the coordinator stopped: %+v", s.Nodes["s"])
	}
	ctx2, stop2 := context.WithCancel(context.Background())
	t.Cleanup(stop2)
	c2 := runCoordinator(t, ctx2, st, opts...)
	end := waitEnded(t, st, runs, 30*time.Second)[runs[0]]
	if end.Status != projection.RunCompleted || end.VarsMap()["stopped"] != true {
		t.Fatalf("run %s vars %v (%v)", end.Status, end.VarsMap(), end.Error)
	}
	checkExactlyOnce(t, st, runs, 4)
	checkNoDuplicates(t, st, runs)
	if n := s.calls.Load(); n != 2 {
		t.Fatalf("node s ran %d times, want 2 (given up, then to its outcome)", n)
	}
	if got := c2.Stats().LocalRuns; got != 1 {
		t.Fatalf("the next coordinator ran %d local nodes, want 1 (s)", got)
	}
}

// Several long local loops at once on a coordinator that holds only a few
// events: most echoes of their work items are taken by the dispatcher of
// a full shard (ownEchoWhenFull), with local nodes run inline, detached
// (the budget spent before they start) or left for their echoes. Each
// echo is acknowledged only once its node's outcome is in: every run
// ends, each step recorded once.
func TestLongLocalLoopsOnFullShard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration
	}{
		{"inline", time.Minute},
		{"budget spent", time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := testkit.Store(t)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithShards(2),
				coordinator.WithMaxHeld(3), coordinator.WithLocalInlineBudget(tc.budget))
			const steps, n = 80, 6
			runs := start(t, st, mustGraph(t, loopGraph(steps)), n)
			checkLoopsEnded(t, st, c, runs, steps)
			if s := c.Stats(); s.HandedBack == 0 {
				t.Fatalf("no event handed back: the shard was never full (stats %+v)", s)
			}
		})
	}
}
