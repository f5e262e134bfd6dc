package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// entityGraph counts state.i up by a local transform, 10 steps a link,
// and ends at 60: six links.
const entityGraph = `
name: entity
maxIterations: 20
nodes:
  - {id: step, type: transform, config: {set: {i: "state.i + 1"}}}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.i % 10 != 0"}
  - {from: step, to: CONTINUE, when: "state.i % 10 == 0 && state.i < 60"}
  - {from: step, to: END, when: "state.i >= 60"}
`

// followChain waits for the chain that starts at first to end, and
// returns its links' states in order.
func followChain(t *testing.T, st events.Store, first string, timeout time.Duration) []*projection.State {
	t.Helper()
	var links []*projection.State
	run := first
	deadline := time.Now().Add(timeout)
	for run != "" {
		s := testkit.WaitEnded(t, st, []string{run}, time.Until(deadline))[run]
		links = append(links, s)
		run = s.ContinuedAs
	}
	return links
}

// checkChain checks a chain's links: each completed, the last by END,
// every link in the chain of the first with its place and predecessor,
// each continuation started once (one run-started, a decision), and the
// state carried across.
func checkChain(t *testing.T, st events.Store, links []*projection.State, want int) {
	t.Helper()
	if len(links) != want {
		t.Fatalf("%d links, want %d", len(links), want)
	}
	first := links[0].RunID
	for i, s := range links {
		if s.Status != projection.RunCompleted {
			t.Fatalf("link %d (%s): %s %+v", i+1, s.RunID, s.Status, s.Error)
		}
		if s.ChainID() != first || s.ChainLink() != i+1 {
			t.Fatalf("link %d (%s): chain %s link %d", i+1, s.RunID, s.ChainID(), s.ChainLink())
		}
		if i > 0 && s.Chain.Previous != links[i-1].RunID {
			t.Fatalf("link %d continues %s, want %s", i+1, s.Chain.Previous, links[i-1].RunID)
		}
		starts := 0
		for _, e := range readRun(t, st, s.RunID) {
			if e.Type == events.RunStarted {
				starts++
			}
		}
		if starts != 1 {
			t.Fatalf("link %d (%s) has %d run-started events", i+1, s.RunID, starts)
		}
		if n := s.Stats.Events; n > 60 {
			t.Fatalf("link %d holds %d events: a link's history is bounded by its steps", i+1, n)
		}
	}
	if last := links[len(links)-1]; last.ContinuedAs != "" || string(last.Vars["i"]) != "60" {
		t.Fatalf("last link: continued as %q, i = %s", last.ContinuedAs, last.Vars["i"])
	}
}

// A chain of continuations runs exactly once per link whatever happens
// between a continuation's start and its predecessor's completion: the
// completion's append fails once per link (as when the coordinator dies
// right after starting the continuation), a second coordinator decides the
// same runs at once, and the first coordinator is stopped mid-chain and
// another started. Every continuation is started once, under the id its
// predecessor derives; a decision made again writes nothing new.
func TestContinueAsNewExactlyOnce(t *testing.T) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	var mu sync.Mutex
	failed := map[string]bool{}
	st.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(run string, evs []*events.Event) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range evs {
				if e.Type != events.RunCompleted || failed[run] {
					continue
				}
				if p, _ := e.Payload(); p.(*events.RunCompletedData).ContinuedAs != "" {
					failed[run] = true
					return errors.New("injected: the coordinator died after starting the continuation")
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	first, stopFirst := context.WithCancel(ctx)
	// Each sees every event (separate consumers): both decide every step.
	runCoordinator(t, first, st, coordinator.WithLogger(quiet()), coordinator.WithDurable("coord-a"))
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithDurable("coord-b"))
	g := mustGraph(t, entityGraph)
	run, err := client.New(base).Start(ctx, g, client.WithInput(map[string]any{"i": 0}))
	if err != nil {
		t.Fatal(err)
	}
	// Stop the first coordinator once the chain is at its third link; a
	// new one takes its place.
	third := testkit.WaitEnded(t, base, []string{run}, 30*time.Second)[run]
	third = testkit.WaitEnded(t, base, []string{third.ContinuedAs}, 30*time.Second)[third.ContinuedAs]
	stopFirst()
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithDurable("coord-a"))

	links := followChain(t, base, run, 60*time.Second)
	checkChain(t, base, links, 6)
	mu.Lock()
	injected := len(failed)
	mu.Unlock()
	if injected != 5 {
		t.Fatalf("%d completions failed, want one per continuing link (5)", injected)
	}
	// A duplicated decision: the end of link 2 decided again, from its
	// state before the end, and its continuation's start appended again:
	// the same run, nothing new.
	evs := readRun(t, base, links[1].RunID)
	before := projection.FoldTo(evs, evs[len(evs)-1].Seq-1)
	d := decider.Decide(g, before, time.Now())
	if d.Continue == nil || d.Continue.RunID != links[2].RunID {
		t.Fatalf("the end decided again continues as %v, want %s", d.Continue, links[2].RunID)
	}
	if _, err := eventlog.Must(base).AppendDecisions(ctx, d.Continue.RunID, 0, d.Continue); err != nil && !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("appending the continuation's start again: %v", err)
	}
	checkChain(t, base, followChain(t, base, run, 10*time.Second), 6)
}

// A client's start that names a chain (passing a run off as another's
// continuation) is refused: only the engine continues a run.
func TestClientStartNamingAChainRefused(t *testing.T) {
	_, st := testkit.Store(t)
	g := mustGraph(t, entityGraph)
	e, err := events.New("forged", "forged", time.Time{}, &events.RunStartedData{GraphName: "entity", GraphDigest: g.Digest(), Graph: g.Canonical(),
		Chain: &events.ChainRef{ID: "victim", Link: 2, Previous: "victim"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), "forged", 0, e); !errors.Is(err, events.ErrMisplaced) {
		t.Fatalf("a client's start naming a chain: %v, want ErrMisplaced", err)
	}
}

// A graph that continues as new on its history budget is not failed at
// the budget's end: each link drains and continues, and the chain runs
// to its end with every link's history under the budget.
func TestHistoryBudgetContinuesAsNew(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithHistoryBudget(80, 0))
	g := mustGraph(t, `
name: forever
maxIterations: 1000
continueAsNew: {onHistoryBudget: true}
nodes:
  - {id: step, type: transform, config: {set: {i: "state.i + 1"}}}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.i < 100"}
  - {from: step, to: END, when: "state.i >= 100"}
`)
	run, err := client.New(st).Start(ctx, g, client.WithInput(map[string]any{"i": 0}))
	if err != nil {
		t.Fatal(err)
	}
	links := followChain(t, st, run, 60*time.Second)
	if len(links) < 3 {
		t.Fatalf("%d links: the budget of 80 events should have continued the run at least twice", len(links))
	}
	for i, s := range links {
		if s.Status != projection.RunCompleted || s.Stats.Events+s.Stats.Refused > 80 {
			t.Fatalf("link %d: %s %+v, %d events (budget 80)", i+1, s.Status, s.Error, s.Stats.Events)
		}
	}
	if last := links[len(links)-1]; string(last.Vars["i"]) != "100" {
		t.Fatalf("last link: i = %s", last.Vars["i"])
	}
	if s := c.Stats(); s.OverBudget != 0 || s.Continued != int64(len(links)-1) {
		t.Fatalf("stats: %d over budget, %d continued; want 0 and %d", s.OverBudget, s.Continued, len(links)-1)
	}
}

// A link that continued as new leaves the coordinator's cache once its
// end is decided (its decisions do not come back to it: lanes.go), so
// the links of a long chain do not fill the cache; the last link, which
// ended without continuing, may stay.
func TestContinuedLinksLeaveTheCache(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	// On a worker: a local node's work item comes back to its coordinator,
	// which keeps the link until it has.
	g := mustGraph(t, strings.Replace(entityGraph, "type: transform,", "type: transform, local: false,", 1))
	run, err := client.New(st).Start(ctx, g, client.WithInput(map[string]any{"i": 0}))
	if err != nil {
		t.Fatal(err)
	}
	links := followChain(t, st, run, 30*time.Second)
	checkChain(t, st, links, 6)
	for _, l := range links[:len(links)-1] {
		if c.Cached(l.RunID) {
			t.Errorf("link %s continued as %s and is still cached", l.RunID, l.ContinuedAs)
		}
	}
}
