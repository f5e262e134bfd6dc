package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weft-dev/weft/pkg/events"
)

// ErrForkChild is wrapped by ForkState's error when a node waits for a
// child run at the fork point: the child belongs to the parent run and
// would report to it, not to the fork.
var ErrForkChild = errors.New("a node waits for a child run")

// ForkState returns the state a run forked from a run in state parent
// starts with (see events.RunStartedData.State): the parent's shared
// state, nodes, pending edge signals, buffered signals and timers, with
//
//   - every node (and map item) that was ready or running made due to run
//     again: its work item goes out anew, as the same attempt number, under
//     the fork's run id;
//   - the timeouts of those attempts dropped (they are armed again when a
//     worker takes the new work item); retry, deadline and wait timers kept, to
//     be armed for the fork;
//   - nodes that completed, failed, were skipped or wait for a signal left
//     as they are: a completed node does not run again;
//   - the run's own fields (id, graph, status, end, cancellation, counts,
//     times) cleared: the fork's run-started sets them; so is the run's
//     wait for its slot of its graph's run limit (START), which a fork
//     from before the run's entry asks for again. A fork from after it
//     does not take a run slot (the run limit counts runs from their
//     start).
//
// A node waiting for a child run makes ForkState fail with ErrForkChild.
//
// In a run that was being cancelled, the activations the cancellation
// ended (cancelled and not routed on) are taken up again: a node that
// waited for a signal waits again (its deadline re-armed), a wait node
// waits again until the same time (its timer re-armed), a map node
// waits for its items again, and a worker node runs again (a node that was
// backing off before a retry runs its next attempt).
func ForkState(parent *State) (*State, error) {
	s := parent.Clone()
	// The ends of the parent's children that came before their nodes'
	// waits are the parent's.
	s.EarlyChildEnds = nil
	// The run's wait for, or hold of, its own slot (a graph's run limit,
	// recorded under START) is the parent's: a fork from before its
	// entry asks for a slot of its own.
	delete(s.Nodes, "START")
	for _, id := range slices.Sorted(maps.Keys(s.Nodes)) {
		n := s.Nodes[id]
		if parent.Cancel != nil {
			s.resume(id, n)
		}
		if n.Status == NodeWaiting && n.WaitingFor == "child" {
			return nil, fmt.Errorf("%w: node %q waits for child run %s; fork from before the node was activated", ErrForkChild, id, n.Child)
		}
		if n.Status == NodeReady || n.Status == NodeRunning {
			redo(&n.Status, &n.Attempt, &n.Delivery, &n.TimedOut)
			n.Worker, n.StartedAt, n.HeartbeatAt = "", nil, nil
		}
		for _, it := range n.Items {
			if it.Status == NodeReady || it.Status == NodeRunning {
				redo(&it.Status, &it.Attempt, &it.Delivery, &it.TimedOut)
				it.HeartbeatAt = nil
			}
		}
	}
	for id, t := range s.Timers {
		if t.Purpose == PurposeTimeout || t.Purpose == PurposeHeartbeat {
			delete(s.Timers, id)
		}
	}
	if len(s.Timers) == 0 {
		s.Timers = nil
	}
	s.clearRun()
	return s, nil
}

// clearRun clears the run's own fields, which a run-started sets.
func (s *State) clearRun() {
	s.RunID, s.GraphName, s.GraphDigest, s.Graph = "", "", "", nil
	s.Parent, s.Fork, s.Input, s.Invocation, s.Nonce, s.ForkRefused, s.StartSeq = nil, nil, nil, nil, "", nil, 0
	s.Status, s.Output, s.Error, s.Cancel = RunPending, nil, nil, nil
	s.Stats, s.Config = Stats{}, runConfig{}
	s.StartedAt, s.UpdatedAt, s.EndedAt, s.LastSeq = nil, nil, nil, 0
}

// resume takes up an activation a cancellation ended (see ForkState).
func (s *State) resume(id string, n *NodeState) {
	for _, it := range n.Items {
		if it.Status == NodeCancelled {
			it.Status, it.Error = NodeRunning, nil // redone below
		}
	}
	if n.Status != NodeCancelled || n.Routed >= n.Iteration {
		return
	}
	ref := events.NodeRef{Node: id, Iteration: n.Iteration}
	n.EndedAt = nil
	switch n.WaitingFor {
	case "signal", "map", "child", WaitingForTimer:
		n.Status, n.Error = NodeWaiting, nil
		if n.WaitingFor == "signal" && n.Deadline != nil {
			s.addTimer(DeadlineTimerID(ref), Timer{Purpose: "deadline", Ref: ref, At: n.Deadline.UTC()})
		}
		if n.WaitingFor == WaitingForTimer && n.Deadline != nil {
			s.addTimer(WaitTimerID(ref), Timer{Purpose: PurposeWait, Ref: ref, At: n.Deadline.UTC()})
		}
	default:
		if n.Error != nil && n.Error.Type != events.FailureCancelled {
			// It was backing off after a failed attempt: the next one runs.
			n.Status, n.Error, n.Delivery, n.TimedOut = NodeRetryDue, nil, 0, ""
			return
		}
		n.Status, n.Error = NodeRunning, nil // redone by ForkState
	}
}

// redo makes an attempt that was ready or running due again: the engine
// readies attempt+1 of a retry-due attempt, so the attempt is counted
// back by one and the same attempt number runs again.
func redo(status *NodeStatus, attempt, delivery *int, timedOut *string) {
	*status, *delivery, *timedOut = NodeRetryDue, 0, ""
	if *attempt > 0 {
		*attempt--
	}
}

// applyForkState takes a forked run's start state from its run-started,
// if it fits the run's graph (CheckForkState): a client wrote it, so it is
// believed only once checked, as the engine's own decisions are. A state
// that does not decode or does not fit is not taken at all: the run
// starts with nothing but the fork's reference and ForkRefused, the
// failure the engine ends it with.
func (s *State) applyForkState(raw json.RawMessage, fork *events.ForkRef, graph json.RawMessage) {
	last := s.LastSeq
	var st State
	err := json.Unmarshal(raw, &st)
	if err != nil {
		err = &ForkStateError{Problems: []ForkProblem{{Field: "state", Message: "not a run state: " + err.Error()}}}
	} else {
		// The run's own fields come from the run-started, whatever the
		// state says of them; a state a writer broke holds no nil nodes
		// or items.
		st.clearRun()
		for id, n := range st.Nodes {
			if n == nil {
				delete(st.Nodes, id)
				continue
			}
			for i, it := range n.Items {
				if it == nil {
					n.Items[i] = &ItemState{}
				}
			}
		}
		err = CheckForkState(graph, &st)
	}
	if err != nil {
		st = State{ForkRefused: forkFailure(err)}
	}
	*s = st
	s.LastSeq, s.Fork = last, fork
}

// forkFailure is the run's failure for a fork state that was refused.
func forkFailure(err error) *events.Failure {
	f := &events.Failure{Type: events.FailureInvalidForkState, Message: "the fork's start state was refused: " + err.Error()}
	var fe *ForkStateError
	if errors.As(err, &fe) {
		f.Details = mustJSON(map[string]any{"problems": fe.Problems})
	}
	return f
}
