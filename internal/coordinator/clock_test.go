package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// clockAt is the time the tests' coordinators are given as their clock.
var clockAt = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// runOnClock runs one run of src to its end on a coordinator whose clock
// stands at clockAt, beside a worker, and returns the run's events.
func runOnClock(t *testing.T, src string) []*events.Event {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithClock(func() time.Time { return clockAt }), coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	run := start(t, st, mustGraph(t, src), 1)[0]
	if s := waitEnded(t, st, []string{run}, 30*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	return readRun(t, st, run)
}

// The clock given with WithClock is the one the coordinator decides by:
// every decision of a run it decides is stamped with it, not with the
// time of day.
func TestDecisionsTakeTheGivenClock(t *testing.T) {
	decisions := 0
	for _, e := range runOnClock(t, chain) {
		if !e.IsDecision() {
			continue
		}
		decisions++
		if !e.Time.Equal(clockAt) {
			t.Errorf("%s (seq %d) at %s, want the given clock's %s", e.Type, e.Seq, e.Time, clockAt)
		}
	}
	if decisions == 0 {
		t.Fatal("the run has no decisions")
	}
}

// A local node's outcome is written by the coordinator, so its clock
// stamps it too.
func TestLocalOutcomesTakeTheGivenClock(t *testing.T) {
	outcomes := 0
	for _, e := range runOnClock(t, `
name: local
nodes:
  - {id: set, type: transform, config: {set: {x: "1"}}}
edges:
  - {from: START, to: set}
  - {from: set, to: END}
`) {
		if e.Type != events.NodeInvoked {
			continue
		}
		outcomes++
		if !e.Time.Equal(clockAt) {
			t.Errorf("local %s (seq %d) at %s, want the given clock's %s", e.Type, e.Seq, e.Time, clockAt)
		}
	}
	if outcomes != 1 {
		t.Fatalf("%d node-invoked events, want the local node's one", outcomes)
	}
}
