package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// A run flooded with signals for a node that does not wait: the fold
// refuses them, the client refuses to send them, and a
// writer that sends them anyway (straight to the stream, as the client
// role may) takes the run over its history budget, which fails the run
// with a run-failed that says why, instead of growing its history until
// it cannot be loaded.
func TestSignalFloodFailsRunOverBudget(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const budget = 300
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithHistoryBudget(budget, 0))
	runCustomWorker(t, ctx, st, nil)
	g := mustGraph(t, `
name: flooded
nodes:
  - {id: gate, type: human}
  - {id: later, type: human}
edges:
  - {from: START, to: gate}
  - {from: gate, to: later}
  - {from: later, to: END}
`)
	run := start(t, st, g, 1)[0]
	waitState(t, st, run, func(s *projection.State) bool {
		return s.Nodes["gate"] != nil && s.Nodes["gate"].Status == projection.NodeWaiting
	})

	// The client refuses a signal for a node that does not wait, visibly.
	cl := client.New(st, client.WithIdentity("flood"))
	err := cl.Signal(ctx, run, "later", map[string]int{"n": -1}, client.WithSignalID("not-yet"))
	if !errors.Is(err, client.ErrSignalRefused) || !strings.Contains(err.Error(), `node "later" is not waiting for a signal (the run has not reached it)`) {
		t.Fatalf("signal to a node not reached: %v", err)
	}

	// A writer that does not ask: the fold refuses each, and the history
	// grows to its budget.
	for i := range budget {
		id := fmt.Sprintf("%s:flood:%d", run, i)
		e, err := events.New(run, id, time.Time{}, &events.SignalReceivedData{Node: "later", Iteration: 1, Data: json.RawMessage(`{"flood":true}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, run, events.AnySeq, e); err != nil {
			t.Fatal(err)
		}
	}
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != coordinator.FailureHistoryBudget ||
		!strings.Contains(s.Error.Message, "over its budget of 300") {
		t.Fatalf("run %s: %+v", s.Status, s.Error)
	}
	// Those folded before the run-failed are refused (the node does not wait),
	// those after it stale (the run has ended).
	if s.Stats.Refused < budget/2 || s.Stats.Refused+s.Stats.Stale < budget {
		t.Errorf("refused %d, stale %d of %d flooded signals", s.Stats.Refused, s.Stats.Stale, budget)
	}
	if n := c.Stats().OverBudget; n != 1 {
		t.Errorf("runs failed over budget: %d", n)
	}
	// Exactly one run-failed, and nothing decided after it.
	evs := readRun(t, st, run)
	failed := 0
	for _, e := range evs {
		if e.Type == events.RunFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d run-failed events", failed)
	}
}

// waitState waits until the fold of the run's log satisfies ok: it
// follows the run (client.Follow), so it checks again at each event
// appended, without polling.
func waitState(t *testing.T, st events.Store, run string, ok func(*projection.State) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reached := false
	err := client.New(st).Follow(ctx, run, func(_ client.RunEvent, s *projection.State) bool {
		reached = ok(s)
		return !reached
	})
	if !reached {
		t.Fatalf("run %s: condition not reached (%v)", run, err)
	}
}
