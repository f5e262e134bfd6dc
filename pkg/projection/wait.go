package projection

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// A wait node (graph.TypeWait) waits on a durable timer and nothing else.
// The coordinator's node-waiting decision (For WaitingForTimer) carries
// the time the wait ends as its Deadline; the fold records the timer
// under WaitTimerID, and the timer's firing ends the node, succeeded,
// with the output {"until": DEADLINE}. A deadline that is not after the
// decision's own time (an until in the past, a duration of 0) ends the
// node at once, in the same event, with {"until": DEADLINE, "past":
// true} when it was before: no timer is armed, and the log says the wait
// was over before it began.

// WaitingForTimer is NodeState.WaitingFor of a wait node.
const WaitingForTimer = "timer"

// PurposeWait is the purpose of the timer that ends a wait node's wait.
const PurposeWait = "wait"

// WaitTimerID is the id of the durable timer that ends a wait node
// activation's wait (a subject token, like every timer id).
func WaitTimerID(ref events.NodeRef) string {
	return "wait-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
}

// waitForTimer applies a wait node's node-waiting: the timer, or, for a
// deadline already reached, the node's end.
func (s *State) waitForTimer(d *events.NodeWaitingData, n *NodeState, at time.Time) {
	if d.Deadline == nil { // not the engine's: a wait must say until when
		s.finish(d.Node, n, nil, NodeFailed, nil, &events.Failure{Type: events.FailureInvalidWait, Message: "the wait has no deadline"}, at)
		return
	}
	until := d.Deadline.UTC()
	if !until.After(at) {
		s.finish(d.Node, n, nil, NodeSucceeded, waitOutput(until, until.Before(at)), nil, at)
		return
	}
	s.addTimer(WaitTimerID(d.NodeRef), Timer{Purpose: PurposeWait, Ref: d.NodeRef, At: until})
}

// waitOutput is a wait node's output: when its wait ended, and whether
// that was already past when it began.
func waitOutput(until time.Time, past bool) json.RawMessage {
	out := struct {
		Until time.Time `json:"until"`
		Past  bool      `json:"past,omitempty"`
	}{until.UTC(), past}
	return mustJSON(out)
}

// RunWaiting is the status the read model of runs (and 'weft list',
// 'weft status', the UI) shows for a running run that does nothing but
// wait (State.Waiting): on a person (a human node's signal), on a time
// (a wait node), or for a slot of its graph's run limit. The fold never sets it: a waiting run's State.Status is
// RunRunning, so that folds and recorded histories are what they were.
const RunWaiting RunStatus = "waiting"

// Wait is a node activation that waits on a person or a time, or the
// run's wait for its own slot (Node START, For "slot").
type Wait struct {
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	// For is "signal" (a human node: the signal's data is its output),
	// WaitingForTimer (a wait node) or "slot" (the run waits for a slot
	// of its graph's run limit, Node START).
	For string `json:"for"`
	// Deadline is when the wait ends: a wait node's time, a human node's
	// deadline (its timeout), or nil for a human node without one.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Await is set for an agent node whose tool call awaits a person's
	// approval (the signal {"approved": true|false, "reason": "..."}).
	Await *events.StepAwait `json:"await,omitempty"`
	// Slot is, for "slot", the run limit and key the run waits for.
	Slot *events.SlotRef `json:"slot,omitempty"`
}

// Waits lists the node activations of a running run that wait on a
// person or a time, by node id. It is derived from the state, not kept in
// it.
func (s *State) Waits() []Wait {
	if s.Status != RunRunning && s.Status != RunCancelling {
		return nil
	}
	// The waiting nodes, in id order: found first, then sorted, as this
	// runs on every event a coordinator handles (readmodel.IndexKey) and
	// few of a run's nodes wait.
	var ids []string
	for id, n := range s.Nodes {
		if n.Status == NodeWaiting && (n.WaitingFor == "signal" || n.WaitingFor == WaitingForTimer || runSlotWait(id, n)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Wait
	for _, id := range ids {
		n := s.Nodes[id]
		w := Wait{Node: id, Iteration: n.Iteration, For: n.WaitingFor, Await: n.Await}
		if runSlotWait(id, n) {
			w.Slot = n.Slot
		}
		if n.Deadline != nil {
			d := n.Deadline.UTC()
			w.Deadline = &d
		}
		out = append(out, w)
	}
	return out
}

// Waiting reports whether a running run does nothing but wait: at least
// one node waits on a person or a time (Waits), and no other node is
// active (ready, running, backing off before a retry, waiting for a
// child run, its map items or a slot), or the run waits for a slot of
// its graph's run limit before its first node. Such a run is shown as
// RunWaiting.
func (s *State) Waiting() bool {
	if s.Status != RunRunning {
		return false
	}
	waits := false
	for id, n := range s.Nodes {
		switch {
		case n.Status == NodeWaiting && (n.WaitingFor == "signal" || n.WaitingFor == WaitingForTimer):
			waits = true
		case runSlotWait(id, n):
			return true // nothing else has started
		case n.Status.Active():
			return false
		}
	}
	return waits
}

// runSlotWait reports whether node id's state n is the run's wait for
// its own slot (a graph's run limit): START waiting for "slot", before
// any node started.
func runSlotWait(id string, n *NodeState) bool {
	return id == "START" && n.Status == NodeWaiting && n.WaitingFor == "slot"
}
