package projection_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// An attempt that ends awaiting (a step with Await) makes its activation
// wait, and only what answers that attempt moves it on: a late outcome of
// the attempt, a second await, an answer before the wait is decided, an
// answer for another call, and a child's end for another attempt (or
// naming no attempt, as a subgraph node's) change nothing. The answer
// makes the next attempt due with what came.
func TestAwaitFence(t *testing.T) {
	r := newRun(t)
	a := ref("a", 1)
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "default"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "w1"})
	r.ok(&events.NodeStepData{NodeRef: a, Attempt: 1, Step: 2, Kind: "await", Await: &events.StepAwait{For: events.AwaitApproval, Tool: "mail", Call: "c1"}})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeWaiting || n.WaitingFor != projection.WaitingForAwait || n.Awaits != 1 {
		t.Fatalf("after the await: %s (%s), awaits %d", n.Status, n.WaitingFor, n.Awaits)
	}
	r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1})
	r.stale(&events.NodeStepData{NodeRef: a, Attempt: 1, Step: 3, Kind: "await", Await: &events.StepAwait{For: events.AwaitApproval, Tool: "mail", Call: "c2"}})
	r.refused(&events.SignalReceivedData{Node: "a", Iteration: 1, Data: json.RawMessage(`{"approved":true}`)}, `not waiting for a signal yet`)
	r.ok(&events.NodeWaitingData{NodeRef: a, For: "signal", Attempt: 1})
	r.refused(&events.SignalReceivedData{Node: "a", Iteration: 1, Data: json.RawMessage(`{"ok":true}`)}, `send {"approved": true}`)
	r.refused(&events.SignalReceivedData{Node: "a", Iteration: 1, Data: json.RawMessage(`{"approved":true,"call":"c9"}`)}, `awaits the approval of call c1 (tool "mail"), not of call c9`)
	r.ok(&events.SignalReceivedData{Node: "a", Iteration: 1, Data: json.RawMessage(`{"approved":true,"call":"c1"}`)})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeRetryDue || string(n.Resume) != `{"approved":true,"call":"c1"}` {
		t.Fatalf("after the answer: %s, resume %s", n.Status, n.Resume)
	}
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 2, Queue: "default", Resume: r.s.Nodes["a"].Resume})
	if n := r.s.Nodes["a"]; n.Await != nil || n.Resume != nil {
		t.Fatalf("the next attempt still awaits: %+v, %s", n.Await, n.Resume)
	}

	// A tool's child run.
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 2, Delivery: 1, Worker: "w2"})
	r.ok(&events.NodeStepData{NodeRef: a, Attempt: 2, Step: 4, Kind: "await", Await: &events.StepAwait{For: events.AwaitTool, Tool: "lookup", Call: "c2", Args: json.RawMessage(`{"q":1}`)}})
	r.ok(&events.NodeWaitingData{NodeRef: a, For: "child", Attempt: 2})
	r.ok(&events.ChildRunStartedData{NodeRef: a, ChildRunID: "kid2", Graph: "tool:a.lookup", Attempt: 2})
	r.stale(&events.ChildRunFinishedData{NodeRef: a, Attempt: 1, ChildRunID: "kid2", Status: "completed"})
	r.stale(&events.ChildRunFinishedData{NodeRef: a, ChildRunID: "kid2", Status: "completed", Output: json.RawMessage(`{"forged":true}`)})
	r.stale(&events.ChildRunFinishedData{NodeRef: a, Attempt: 2, ChildRunID: "other", Status: "completed"})
	r.ok(&events.ChildRunFinishedData{NodeRef: a, Attempt: 2, ChildRunID: "kid2", Status: "completed", Output: json.RawMessage(`{"got":1}`)})
	n := r.s.Nodes["a"]
	var out projection.ToolOutcome
	_ = json.Unmarshal(n.Resume, &out)
	if n.Status != projection.NodeRetryDue || out.ChildRunID != "kid2" || out.Status != "completed" || string(out.Output) != `{"got":1}` || n.Awaits != 2 {
		t.Fatalf("after the child's end: %s, resume %s, awaits %d", n.Status, n.Resume, n.Awaits)
	}

	// A quick child's end may be in the log before the parent's decision
	// to wait for it (the child's start is appended first): it counts, and
	// the decisions that follow it change nothing.
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 3, Queue: "default", Resume: n.Resume})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 3, Delivery: 1, Worker: "w2"})
	r.ok(&events.NodeStepData{NodeRef: a, Attempt: 3, Step: 6, Kind: "await", Await: &events.StepAwait{For: events.AwaitTool, Tool: "lookup", Call: "c3"}})
	r.ok(&events.ChildRunFinishedData{NodeRef: a, Attempt: 3, ChildRunID: "kid3", Status: "completed", Output: json.RawMessage(`{"got":3}`)})
	r.stale(&events.NodeWaitingData{NodeRef: a, For: "child", Attempt: 3})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeRetryDue || !strings.Contains(string(n.Resume), `"kid3"`) {
		t.Fatalf("after an early end: %s, resume %s", n.Status, n.Resume)
	}
}
