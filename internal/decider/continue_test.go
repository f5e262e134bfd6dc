package decider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// runWith is sim.run with options; it returns the continuation's start
// the run's end decided, if any.
func (sm *sim) runWith(o decider.Options) *events.Event {
	var cont *events.Event
	for step := 0; step < 10000 && !sm.s.Status.Ended(); step++ {
		d := decider.DecideWith(sm.g, sm.s.Clone(), sm.clock, o)
		if d.Continue != nil {
			cont = d.Continue
		}
		for _, e := range d.Events {
			sm.append(e)
		}
		progressed := len(d.Events) > 0
		for _, e := range d.Events {
			if e.Type != events.NodeReady {
				continue
			}
			r := mustPayload(sm.t, e).(*events.NodeReadyData)
			sm.append(sm.event("inv-"+e.ID, &events.NodeInvokingData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Worker: "w"}))
			sm.append(sm.event("out-"+e.ID, sm.exec(r)))
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return cont
}

// count adds 1 to state.i.
func count(r *events.NodeReadyData) events.Payload {
	return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Updates: map[string]json.RawMessage{"i": json.RawMessage(`1`)}}
}

const entityLoop = `
name: entity
state: {reducers: {i: sum}}
nodes:
  - {id: step, type: echo}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.i % 3 != 0"}
  - {from: step, to: CONTINUE, when: "state.i % 3 == 0 && state.i < 9"}
  - {from: step, to: END, when: "state.i >= 9"}
`

// An edge to CONTINUE ends the run at rest: it completes naming its
// continuation, whose start carries the state, the chain and the run it
// continues, under an id derived from the ending run; deciding the end
// again gives the same start.
func TestContinueAsNewDecided(t *testing.T) {
	sm := newSim(t, entityLoop, `{"i":0}`, `{"tenant":"t1"}`, count)
	start := sm.runWith(decider.Options{})
	s := sm.s
	want := decider.ContinuationRunID("run1", "", "run1", 2)
	if s.Status != projection.RunCompleted || s.ContinuedAs != want || start == nil || start.RunID != want || start.ID != want {
		t.Fatalf("status %s continued as %q, start %v; log: %s", s.Status, s.ContinuedAs, start, sm.types())
	}
	if !start.IsDecision() {
		t.Fatal("a continuation's start is a decision")
	}
	p := mustPayload(t, start).(*events.RunStartedData)
	if string(p.Input) != `{"i":3}` || string(p.Invocation) != `{"tenant":"t1"}` || p.Chain == nil || *p.Chain != (events.ChainRef{ID: "run1", Link: 2, Previous: "run1"}) || p.GraphDigest != s.GraphDigest {
		t.Fatalf("continuation start: %+v chain %+v", p, p.Chain)
	}
	if s.ContinueFrom == nil || s.ContinueFrom.Node != "step" || s.ContinueFrom.Edge != 2 {
		t.Fatalf("continue from %+v", s.ContinueFrom)
	}
	// The end decided again, from the state before it: the same start.
	before := projection.FoldTo(sm.log, sm.log[len(sm.log)-1].Seq-1)
	again := decider.Decide(sm.g, before, sm.clock.Add(1e9))
	if again.Continue == nil || again.Continue.ID != start.ID || string(again.Continue.Data) != string(start.Data) {
		t.Fatalf("decided again: %v, want the same start %s", again.Continue, start.Data)
	}
	// Links with a nonce get ids no one can guess; every link keeps the
	// chain's id and counts on.
	if id := decider.ContinuationRunID("run7", "nonce", "run1", 8); !strings.HasPrefix(id, "run1-8-") || id == decider.ContinuationRunID("run7", "other", "run1", 8) {
		t.Fatalf("continuation id %q", id)
	}
}

// A continuation whose state is over the graph's limit fails the run,
// naming the node and edge that asked for it and the sizes.
func TestContinueAsNewStateTooLarge(t *testing.T) {
	src := strings.Replace(entityLoop, "name: entity\n", "name: entity\ncontinueAsNew: {maxStateBytes: 5}\n", 1)
	sm := newSim(t, src, `{"i":0}`, "", count)
	if start := sm.runWith(decider.Options{}); start != nil {
		t.Fatalf("a continuation over the limit was started: %s", start.Data)
	}
	s := sm.s
	if s.Status != projection.RunFailed || s.Error.Type != events.FailureContinueAsNew ||
		!strings.Contains(s.Error.Message, `node "step", edge 3 (to CONTINUE)`) || !strings.Contains(s.Error.Message, "7 bytes, over the limit of 5") {
		t.Fatalf("status %s error %+v", s.Status, s.Error)
	}
}

// A graph that continues as new on its history budget drains from 90% of
// it (starts nothing new) and continues at rest, instead of failing.
func TestContinueAsNewOnHistoryBudget(t *testing.T) {
	sm := newSim(t, `
name: forever
continueAsNew: {onHistoryBudget: true}
state: {reducers: {i: sum}}
maxIterations: 1000
nodes:
  - {id: step, type: echo}
edges:
  - {from: START, to: step}
  - {from: step, to: step}
  - {from: step, to: END, when: "false"}
`, "", "", count)
	start := sm.runWith(decider.Options{HistoryBudget: decider.HistoryBudget{Events: 40}})
	s := sm.s
	if s.Status != projection.RunCompleted || start == nil || s.ContinuedAs != start.RunID {
		t.Fatalf("status %s continued as %q; log: %s", s.Status, s.ContinuedAs, sm.types())
	}
	if n := s.Stats.Events; n < 36 || n > 40 {
		t.Fatalf("the run continued after %d events, want from 90%% of the budget of 40 on", n)
	}
	// Without the budget the same graph would run to its iteration cap.
	if p := mustPayload(t, start).(*events.RunStartedData); p.Chain.Link != 2 || !strings.Contains(string(p.Input), `"i":`) {
		t.Fatalf("continuation %+v", p)
	}
}

// A graph may continue as a newer one of its graphs: the continuation's
// start carries that graph, and the chain goes on.
func TestContinueAsNewerGraph(t *testing.T) {
	src := strings.Replace(entityLoop, "name: entity\n", `name: entity
continueAsNew: {graph: entity-v2}
graphs:
  entity-v2:
    name: entity-v2
    version: "2"
    nodes: [{id: step, type: echo}]
    edges: [{from: START, to: step}, {from: step, to: END}]
`, 1)
	sm := newSim(t, src, `{"i":0}`, "", count)
	start := sm.runWith(decider.Options{})
	next, _ := sm.g.Subgraph("entity-v2")
	if start == nil {
		t.Fatalf("no continuation; log: %s", sm.types())
	}
	p := mustPayload(t, start).(*events.RunStartedData)
	if p.GraphName != "entity-v2" || p.GraphDigest != next.Digest() || string(p.Graph) != string(next.Canonical()) {
		t.Fatalf("continuation runs %s %s, want entity-v2 %s", p.GraphName, p.GraphDigest, next.Digest())
	}
}

// Only a top-level run continues as new: a child run that asks to fails,
// saying so (its parent waits for it to end, not for a chain).
func TestChildRunDoesNotContinue(t *testing.T) {
	g := `
name: entity
nodes: [{id: step, type: echo}]
edges: [{from: START, to: step}, {from: step, to: CONTINUE}]
`
	sm := newSim(t, g, "", "", echo)
	sm.s.Parent = &events.ParentRef{RunID: "parent", Ref: events.NodeRef{Node: "sub", Iteration: 1}}
	if start := sm.runWith(decider.Options{}); start != nil {
		t.Fatal("a child run continued as new")
	}
	if s := sm.s; s.Status != projection.RunFailed || s.Error.Type != events.FailureContinueAsNew || !strings.Contains(s.Error.Message, "only a top-level run continues as new") {
		t.Fatalf("status %s error %+v", s.Status, s.Error)
	}
}
