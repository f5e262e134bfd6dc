package projection

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weft-dev/weft/pkg/events"
)

// A node attempt may end awaiting something instead of with an outcome:
// an agent whose model called a tool marked `approval: required` records
// a node step with Await (events.StepAwait) and stops. The fold makes the
// activation wait (WaitingForAwait, Await set); the coordinator decides
// the wait (a person's signal for an approval, up to the tool's deadline:
// a node-waiting "signal" decision of the same activation and attempt);
// the signal that answers it makes the next attempt due (NodeRetryDue,
// Resume holding the signal's data), and the coordinator readies it with
// that data (events.NodeReadyData.Resume). The node goes on from its last
// step. The deadline passing fails the activation, as a human node's
// does (FailureTimeout, not retryable: its timeout edges are taken).

// WaitingForAwait is NodeState.WaitingFor of an activation whose attempt
// ended awaiting something, before the coordinator decided the wait.
const WaitingForAwait = "await"

// AwaitDeadlineTimerID is the id of the durable timer that ends the wait
// for an approval that attempt of activation ref awaits.
func AwaitDeadlineTimerID(ref events.NodeRef, attempt int) string {
	return DeadlineTimerID(ref) + "-" + strconv.Itoa(attempt)
}

// awaitStep applies the live attempt's step that awaits: the attempt has
// ended, and the activation waits.
func (s *State) awaitStep(d *events.NodeStepData, n *NodeState) error {
	if d.Item != nil {
		return stale("%s: a map item does not await", d.Key())
	}
	if d.Await.For != events.AwaitApproval && d.Await.For != events.AwaitTool {
		return stale("%s: step %d awaits %q, which is nothing a node can await", d.Key(), d.Step, d.Await.For)
	}
	s.dropAttemptTimers(d.NodeRef, d.Attempt) // its timeout and heartbeat: the attempt is over
	a := *d.Await
	n.Status, n.WaitingFor, n.Await, n.Resume, n.Child = NodeWaiting, WaitingForAwait, &a, nil, ""
	n.Awaits++
	return nil
}

// awaitWait applies the coordinator's decision of how an awaiting
// activation waits: for a signal (an approval), up to its deadline, or
// for a child run (a tool's).
func (s *State) awaitWait(d *events.NodeWaitingData, n *NodeState) error {
	if n.Status != NodeWaiting || n.WaitingFor != WaitingForAwait || n.Await == nil || d.Attempt != n.Attempt {
		return stale("%s: attempt %d waits for a %s, but the node is %s (%s) at attempt %d", d.Key(), d.Attempt, d.For, orIdle(n.Status), n.WaitingFor, n.Attempt)
	}
	n.WaitingFor, n.Deadline = d.For, d.Deadline
	if d.For == "signal" && d.Deadline != nil {
		s.addTimer(AwaitDeadlineTimerID(d.NodeRef, d.Attempt), Timer{Purpose: "deadline", Ref: d.NodeRef, Attempt: d.Attempt, At: d.Deadline.UTC()})
	}
	return nil
}

// resumeAwait ends an awaiting activation's wait with what came: the next
// attempt is due, with it.
func (s *State) resumeAwait(n *NodeState, data json.RawMessage) {
	n.Status, n.WaitingFor, n.Deadline = NodeRetryDue, "", nil
	n.Resume = data
	if n.Resume == nil {
		n.Resume = json.RawMessage("null")
	}
}

// ToolOutcome is what a tool's child run gives the attempt that awaited
// it (NodeState.Resume): the child's end.
type ToolOutcome struct {
	ChildRunID string          `json:"childRunId"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *events.Failure `json:"error,omitempty"`
}

// toolFinished applies the end of the child run an awaiting activation's
// tool call waits for.
func (s *State) toolFinished(d *events.ChildRunFinishedData, n *NodeState) error {
	switch {
	case d.Attempt != n.Attempt:
		return stale("%s: child run %s ended for attempt %d; the node awaits at attempt %d", d.Key(), d.ChildRunID, d.Attempt, n.Attempt)
	case n.Status != NodeWaiting || n.Await.For != events.AwaitTool || n.WaitingFor != "child" && n.WaitingFor != WaitingForAwait:
		// Awaiting, before the wait is decided, counts: the child's start
		// is appended before its parent's decisions, and a quick child
		// may end before they are in the parent's log.
		return stale("%s is %s (%s), not waiting for its tool's child run", d.Key(), orIdle(n.Status), n.WaitingFor)
	case n.Child != "" && n.Child != d.ChildRunID:
		return stale("child run %s: %s waits for %s", d.ChildRunID, d.Key(), n.Child)
	}
	s.resumeAwait(n, mustJSON(ToolOutcome{ChildRunID: d.ChildRunID, Status: d.Status, Output: d.Output, Error: d.Error}))
	return nil
}

// Approval is the data of the signal that answers a tool's approval.
type Approval struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	// Call, when given, must be the id of the call that awaits: an
	// answer meant for one call never answers another.
	Call string `json:"call,omitempty"`
}

// acceptsApproval says why a signal for an agent node that awaits a tool
// call's approval would be refused, or nil: it must answer the activation
// that waits (when it names one) with {"approved": true|false, "reason":
// "...", "call": "..."} (call, when given, the call that awaits). An awaiting node buffers no signal: one that comes before the
// wait is decided is refused.
func (s *State) acceptsApproval(node string, n *NodeState, iteration int, data json.RawMessage) error {
	switch {
	case n.Status != NodeWaiting || n.WaitingFor != "signal":
		return fmt.Errorf("%w: node %q is not waiting for a signal yet (its tool %q awaits approval; try again in a moment)", ErrRefused, node, n.Await.Tool)
	case iteration > 0 && iteration != n.Iteration:
		return fmt.Errorf("%w: node %q is not waiting for a signal (%s)", ErrRefused, node, s.signalNotWaiting(node, iteration))
	}
	var a Approval
	if err := json.Unmarshal(data, &a); err != nil || a.Approved == nil {
		return fmt.Errorf(`%w: node %q awaits the approval of tool %q (call %s): send {"approved": true} or {"approved": false, "reason": "..."}`, ErrRefused, node, n.Await.Tool, n.Await.Call)
	}
	if a.Call != "" && a.Call != n.Await.Call {
		return fmt.Errorf("%w: node %q awaits the approval of call %s (tool %q), not of call %s", ErrRefused, node, n.Await.Call, n.Await.Tool, a.Call)
	}
	return nil
}
