package projection

import (
	"encoding/json"
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
