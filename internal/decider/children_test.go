package decider

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

func TestChildRunIDIsAlwaysAToken(t *testing.T) {
	short := ChildRunID("run1", "", events.NodeRef{Node: "sub", Iteration: 2})
	if short != "run1-sub-2" {
		t.Errorf("child id of a parent without a nonce = %q, want run1-sub-2 (the ids recorded histories hold)", short)
	}
	for _, nonce := range []string{"", "nonce1"} {
		long := strings.Repeat("r", eventlog.MaxTokenLen)
		seen := map[string]bool{}
		parent := long
		for depth := range 4 { // grandchildren and deeper grow the id each time
			for it := 1; it <= 3; it++ {
				id := ChildRunID(parent, nonce, events.NodeRef{Node: "n" + strings.Repeat("x", 61), Iteration: it})
				if !eventlog.ValidToken(id) {
					t.Fatalf("nonce %q depth %d iteration %d: child id %q (%d characters) is not a subject token", nonce, depth, it, id, len(id))
				}
				if seen[id] {
					t.Fatalf("nonce %q depth %d iteration %d: child id %q repeats", nonce, depth, it, id)
				}
				seen[id] = true
				if again := ChildRunID(parent, nonce, events.NodeRef{Node: "n" + strings.Repeat("x", 61), Iteration: it}); again != id {
					t.Fatalf("child id not deterministic: %q then %q", id, again)
				}
			}
			parent = ChildRunID(parent, nonce, events.NodeRef{Node: "sub", Iteration: 1})
		}
	}
}

// TestChildRunIDNeedsTheNonce: with a nonce, the child id has a part that
// the parent's id and the node do not give: two parents' nonces give two
// ids, and the id without the nonce is not it.
func TestChildRunIDNeedsTheNonce(t *testing.T) {
	ref := events.NodeRef{Node: "child", Iteration: 1}
	a, b := ChildRunID("victim1", "nonce-a", ref), ChildRunID("victim1", "nonce-b", ref)
	if a == b {
		t.Fatalf("two nonces, one child id %q", a)
	}
	guess := ChildRunID("victim1", "", ref)
	if !strings.HasPrefix(a, guess+"-") || a == guess || len(a) != len(guess)+17 {
		t.Fatalf("child id %q: want %q, a dash and 16 characters derived from the nonce", a, guess)
	}
	if ChildRunID("victim1", "nonce-a", events.NodeRef{Node: "child", Iteration: 2}) == a {
		t.Fatal("two activations, one child id")
	}
}

const parentGraph = `
name: parent
graphs:
  approve:
    name: approve
    nodes: [{id: gate, type: human}]
    edges: [{from: START, to: gate}, {from: gate, to: END}]
nodes:
  - {id: child, type: subgraph, outputAs: approval, config: {graph: approve}}
  - {id: pay, type: transform, config: {set: {paid: "true"}}}
edges:
  - {from: START, to: child}
  - {from: child, to: pay, when: "output.approved == true"}
  - {from: pay, to: END}
  - {from: child, to: END, when: "output.approved != true"}
`

// parent is a run of parentGraph up to its subgraph node's wait, folded as
// the log would have it; its decisions so far, and the child's start.
func parent(t *testing.T, src string) (*graph.Graph, *projection.State, *events.Event) {
	t.Helper()
	g, err := graph.Parse([]byte(src), "parent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start, err := events.New("victim1", "victim1", at, &events.RunStartedData{GraphName: "parent", GraphDigest: g.Digest(), Graph: g.Canonical(), Nonce: "n0nce"})
	if err != nil {
		t.Fatal(err)
	}
	start.Seq = 1
	s := &projection.State{}
	if err := s.Apply(start); err != nil {
		t.Fatal(err)
	}
	d := Decide(g, s, at)
	if len(d.Children) != 1 {
		t.Fatalf("%d children started, want 1: %+v", len(d.Children), d)
	}
	return g, s, d.Children[0]
}

// TestChildStartIsADecision: the child's run-started is a decision of the
// child run, on its decision subject, naming the parent and carrying a
// nonce derived from the parent's.
func TestChildStartIsADecision(t *testing.T) {
	_, s, start := parent(t, parentGraph)
	ref := events.NodeRef{Node: "child", Iteration: 1}
	id := ChildRunID("victim1", "n0nce", ref)
	if start.RunID != id || s.Nodes["child"].Child != id || s.Nodes["child"].Status != projection.NodeWaiting {
		t.Fatalf("child %s, node %+v; want child %s waited for", start.RunID, s.Nodes["child"], id)
	}
	if !start.IsDecision() || start.Subject() != eventlog.ChildStartedSubject(id) {
		t.Fatalf("child start: decision %v on %s, want a decision on %s", start.IsDecision(), start.Subject(), eventlog.ChildStartedSubject(id))
	}
	p, _ := start.Payload()
	d := p.(*events.RunStartedData)
	if d.Parent == nil || d.Parent.RunID != "victim1" || d.Parent.Ref.Key() != ref.Key() {
		t.Fatalf("child start names parent %+v", d.Parent)
	}
	if d.Nonce == "" || d.Nonce == "n0nce" || d.Nonce != childNonce("n0nce", id) {
		t.Fatalf("child nonce %q: want one derived from the parent's", d.Nonce)
	}
	if !IsChildStart(withSeq(start, 7), "victim1", ref, id) {
		t.Fatal("the coordinator's own child start is not taken for the child")
	}
	if w := WaitingChildren(s); len(w) != 1 || w[0].RunID != id || w[0].Ref.Key() != ref.Key() {
		t.Fatalf("waiting children %+v", w)
	}
}

func withSeq(e *events.Event, seq uint64) *events.Event {
	c := *e
	c.Seq = seq
	return &c
}

// TestIsChildStartRefusesOthers: a start is the parent's child only when
// it is a decision naming that parent and activation.
func TestIsChildStartRefusesOthers(t *testing.T) {
	_, _, start := parent(t, parentGraph)
	ref := events.NodeRef{Node: "child", Iteration: 1}
	id := start.RunID
	p, _ := start.Payload()
	forge := func(parent string, r events.NodeRef, decision bool) *events.Event {
		d := *p.(*events.RunStartedData)
		d.Parent = &events.ParentRef{RunID: parent, Ref: r}
		d.Graph = json.RawMessage(`{"name":"forged","nodes":[],"edges":[]}`)
		e, err := events.New(id, id, time.Time{}, &d)
		if err != nil {
			t.Fatal(err)
		}
		if decision {
			// As read back from a decision subject.
			return withSeq(e, 3)
		}
		m, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back events.Event // the JSON form, without the decision mark
		if err := json.Unmarshal(m, &back); err != nil {
			t.Fatal(err)
		}
		return &back
	}
	refused := withSeq(start, 3)
	refused.Refused = events.ErrMisplaced
	for name, e := range map[string]*events.Event{
		"a client's start naming the parent": forge("victim1", ref, false),
		"another parent":                     withSeq(start, 3),
		"another activation":                 forge("victim1", events.NodeRef{Node: "child", Iteration: 2}, true),
		"refused":                            refused,
		"none":                               nil,
	} {
		parentID := "victim1"
		if name == "another parent" {
			parentID = "victim2"
		}
		if IsChildStart(e, parentID, ref, id) {
			t.Errorf("%s: taken for the child", name)
		}
	}
}

// TestPreemptedNoticeFailsTheNode: the notice of a pre-empted child ends
// the node's wait as a failure that says why, and the run fails: the
// approval branch is never taken.
func TestPreemptedNoticeFailsTheNode(t *testing.T) {
	g, s, start := parent(t, parentGraph)
	notice := PreemptedNotice("victim1", events.NodeRef{Node: "child", Iteration: 1}, start.RunID, false, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	if again := PreemptedNotice("victim1", events.NodeRef{Node: "child", Iteration: 1}, start.RunID, false, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)); again.ID != notice.ID || string(again.Data) != string(notice.Data) {
		t.Fatal("two coordinators finding the same pre-emption write two notices")
	}
	if claimed := PreemptedNotice("victim1", events.NodeRef{Node: "child", Iteration: 1}, start.RunID, true, time.Time{}); claimed.ID == notice.ID {
		t.Fatal("a claim's notice, which may come before the node waits, shares the id of the one that comes once it waits")
	}
	notice.Seq = s.LastSeq + 1
	if err := s.Apply(notice); err != nil {
		t.Fatalf("the parent's fold refuses the notice: %v", err)
	}
	n := s.Nodes["child"]
	if n.Status != projection.NodeFailed || n.Error == nil || n.Error.Type != events.FailureChildRunPreempted || n.Error.Retryable {
		t.Fatalf("node after the notice: %+v %+v", n, n.Error)
	}
	d := Decide(g, s, time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC))
	if s.Status != projection.RunFailed || s.Error.Cause == nil || s.Error.Cause.Type != events.FailureChildRunPreempted || !strings.Contains(s.Error.Cause.Message, start.RunID) {
		t.Fatalf("run %s, error %+v; want failed for the pre-empted child", s.Status, s.Error)
	}
	if s.Nodes["pay"] != nil || s.Vars["paid"] != nil || s.Artifacts["approval"] != nil {
		t.Fatalf("the pay branch ran: %+v %s %s", s.Nodes["pay"], s.Vars["paid"], s.Artifacts["approval"])
	}
	for _, e := range d.Events {
		if e.Type == events.NodeReady {
			t.Fatalf("decided %s for %s after a pre-empted child", e.Type, e.NodeID)
		}
	}
}

// TestPreemptedNoticeForAnotherChildIsStale: a notice about a child id
// the node does not wait for changes nothing.
func TestPreemptedNoticeForAnotherChildIsStale(t *testing.T) {
	_, s, start := parent(t, parentGraph)
	notice := PreemptedNotice("victim1", events.NodeRef{Node: "child", Iteration: 1}, start.RunID+"x", true, time.Time{})
	notice.Seq = s.LastSeq + 1
	if err := s.Apply(notice); err == nil {
		t.Fatal("a notice about another child run was applied")
	}
	if s.Nodes["child"].Status != projection.NodeWaiting {
		t.Fatalf("node %+v", s.Nodes["child"])
	}
}

// TestPreemptedChildTakesTheFallback: a node with a fallback goes on with
// it, as after any failure of its last attempt.
func TestPreemptedChildTakesTheFallback(t *testing.T) {
	src := strings.Replace(parentGraph, "outputAs: approval, config: {graph: approve}}", "outputAs: approval, config: {graph: approve}, fallback: {approved: false}}", 1)
	g, s, start := parent(t, src)
	notice := PreemptedNotice("victim1", events.NodeRef{Node: "child", Iteration: 1}, start.RunID, false, time.Time{})
	notice.Seq = s.LastSeq + 1
	if err := s.Apply(notice); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		Decide(g, s, time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC))
	}
	if s.Status != projection.RunCompleted || s.Vars["paid"] != nil || !s.Nodes["child"].Fallback {
		t.Fatalf("run %s %+v, vars %v", s.Status, s.Error, s.Vars)
	}
}

// TestRefusedForkFailsTheRun: a fork whose start state the fold refused
// ends at its first decision with the problems, and nothing else.
func TestRefusedForkFailsTheRun(t *testing.T) {
	g, err := graph.Parse([]byte(parentGraph), "parent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	forged := json.RawMessage(`{"nodes":{"pay":{"status":"running","iteration":1,"attempt":1}},"timers":{"t1":{"purpose":"retry","ref":{"node":"ghost","iteration":1},"at":"2026-01-01T00:00:00Z"}}}`)
	start, err := events.New("fork1", "fork1", time.Time{}, &events.RunStartedData{GraphName: "parent", GraphDigest: g.Digest(), Graph: g.Canonical(),
		Fork: &events.ForkRef{RunID: "victim1", Position: 3}, State: forged})
	if err != nil {
		t.Fatal(err)
	}
	start.Seq = 1
	s := &projection.State{}
	if err := s.Apply(start); err != nil {
		t.Fatal(err)
	}
	if s.ForkRefused == nil || len(s.Nodes) != 0 || len(s.Timers) != 0 {
		t.Fatalf("the fold took a forged fork state: refused %+v, nodes %v, timers %v", s.ForkRefused, s.Nodes, s.Timers)
	}
	d := Decide(g, s, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if len(d.Events) != 1 || d.Events[0].Type != events.RunFailed || len(d.Children) != 0 || len(d.CancelChildren) != 0 {
		t.Fatalf("decided %d events (%v), children %v, cancels %v; want only the run's failure", len(d.Events), d.Events, d.Children, d.CancelChildren)
	}
	if s.Error == nil || s.Error.Type != events.FailureInvalidForkState || !strings.Contains(s.Error.Message, `node "pay": status: running`) || !strings.Contains(s.Error.Message, "ghost") {
		t.Fatalf("run error %+v", s.Error)
	}
}
