package projection_test

import (
	"encoding/json"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestChildEndBeforeWait: the coordinator appends a subgraph node's child
// run's start before the parent's decisions (the node's wait and its
// child-run-started), so a quick child's end may be in the parent's log
// before them. That end still ends the wait when the node-waiting comes,
// as an end right after it would (before the child-run-started, which a
// chain of decisions that failed part-way may lack); an early end for
// another activation, or the notice that a claimed child is not the
// node's, changes nothing, and the end after the wait is stale.
func TestChildEndBeforeWait(t *testing.T) {
	r := newRun(t)
	a1, a2 := ref("a", 1), ref("a", 2)
	// Not the next activation, or a claimed child's notice: stale.
	r.stale(&events.ChildRunFinishedData{NodeRef: a2, ChildRunID: "kid2", Status: "completed"})
	r.stale(&events.ChildRunFinishedData{NodeRef: a1, ChildRunID: "kid1", Status: "failed",
		Error: &events.Failure{Type: events.FailureChildRunPreempted, Message: "claimed"}})

	// The bad order: the child's end, then the node's wait.
	r.ok(&events.ChildRunFinishedData{NodeRef: a1, ChildRunID: "kid1", Status: "completed", Output: json.RawMessage(`{"got":1}`)})
	r.stale(&events.ChildRunFinishedData{NodeRef: a1, ChildRunID: "kid1", Status: "completed", Output: json.RawMessage(`{"forged":1}`)})
	r.ok(&events.NodeWaitingData{NodeRef: a1, For: "child"})
	r.ok(&events.ChildRunStartedData{NodeRef: a1, ChildRunID: "kid1", Graph: "sub"})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeSucceeded || string(n.Output) != `{"got":1}` || n.Child != "kid1" || r.s.EarlyChildEnds != nil {
		t.Fatalf("after an early end: %s, output %s, child %s, kept %v", n.Status, n.Output, n.Child, r.s.EarlyChildEnds)
	}
	r.stale(&events.ChildRunFinishedData{NodeRef: a1, ChildRunID: "kid1", Status: "completed"})

	// A chain of decisions that failed part-way: the node's wait and no
	// child-run-started. The early end still ends the wait, as one after
	// the wait would.
	r.stale(&events.ChildRunFinishedData{NodeRef: ref("a", 3), ChildRunID: "kid3", Status: "completed"})
	r.ok(&events.ChildRunFinishedData{NodeRef: a2, ChildRunID: "kid2", Status: "failed", Error: &events.Failure{Type: "Boom", Message: "x"}})
	r.ok(&events.NodeWaitingData{NodeRef: a2, For: "child"})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeFailed || n.Error == nil || n.Error.Type != "Boom" || r.s.EarlyChildEnds != nil {
		t.Fatalf("after an early failed end: %s, error %+v, kept %v", n.Status, n.Error, r.s.EarlyChildEnds)
	}

	// The state with an early end kept survives a snapshot.
	r.ok(&events.ChildRunFinishedData{NodeRef: ref("a", 3), ChildRunID: "kid3", Status: "completed"})
	if c := r.s.Clone(); c.EarlyChildEnds["a"] == nil || c.EarlyChildEnds["a"].ChildRunID != "kid3" {
		t.Fatalf("snapshot lost the early end: %v", c.EarlyChildEnds)
	}
}
