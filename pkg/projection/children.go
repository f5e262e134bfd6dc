package projection

import (
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The appliers of child runs (subgraph nodes).

func (s *State) applyChildRunStarted(d *events.ChildRunStartedData) error {
	n := s.Nodes[d.Node]
	if n == nil || n.Iteration != d.Iteration {
		return stale("%s: not the node's current activation", d.Key())
	}
	n.Child = d.ChildRunID
	return nil
}

// takeEarlyChildEnd ends the wait for a child run whose node-waiting d
// was just applied, if the child's end came before (earlyChildEnd): the
// end is taken as one that comes while the node waits and no
// child-run-started names its child yet.
func (s *State) takeEarlyChildEnd(d *events.NodeWaitingData, at time.Time) {
	early := s.EarlyChildEnds[d.Node]
	if early == nil {
		return
	}
	delete(s.EarlyChildEnds, d.Node)
	if len(s.EarlyChildEnds) == 0 {
		s.EarlyChildEnds = nil
	}
	if early.Iteration == d.Iteration && d.Attempt == 0 && d.Item == nil {
		_ = s.applyChildRunFinished(early, at)
	}
}

// earlyChildEnd keeps the end of a subgraph node's child run that comes
// before the activation that starts it is in the log: the coordinator
// appends the child's start before the parent's decisions (the node's
// wait and its child-run-started), so a quick child may end, and its end
// reach the parent's log, first. It is kept only for the node's next
// activation, and ends that activation's wait as soon as its
// node-waiting is applied (takeEarlyChildEnd), as an end that came then
// would: before the child-run-started (which a chain of decisions that
// failed part-way may lack), any end of the activation's counts, as it
// always did.
//
// A tool's child's end (Attempt set) is toolFinished's; the notice that a
// claimed child is not the node's (FailureChildRunPreempted) changes
// nothing before the node waits.
func (s *State) earlyChildEnd(d *events.ChildRunFinishedData, n *NodeState) error {
	next := 1
	if n != nil {
		next = n.Iteration + 1
	}
	switch {
	case d.Iteration != next || d.Item != nil || d.Attempt > 0 || s.Status.Ended():
		return stale("%s: not the node's current activation", d.Key())
	case d.Error != nil && d.Error.Type == events.FailureChildRunPreempted:
		return stale("%s: child run %s is not the node's, and the node does not wait for it yet", d.Key(), d.ChildRunID)
	case s.EarlyChildEnds[d.Node] != nil:
		return stale("%s: an end of child run %s came before the node waits already", d.Key(), s.EarlyChildEnds[d.Node].ChildRunID)
	}
	if s.EarlyChildEnds == nil {
		s.EarlyChildEnds = map[string]*events.ChildRunFinishedData{}
	}
	s.EarlyChildEnds[d.Node] = d
	return nil
}

// applyChildRunFinished ends the wait of the activation that started the
// child run; the outcome of any other child is stale.
func (s *State) applyChildRunFinished(d *events.ChildRunFinishedData, at time.Time) error {
	n := s.Nodes[d.Node]
	switch {
	case n == nil || n.Iteration != d.Iteration:
		return s.earlyChildEnd(d, n)
	case n.Await != nil || d.Attempt > 0:
		if n.Await == nil {
			return stale("%s: child run %s is a tool's, and the node awaits none", d.Key(), d.ChildRunID)
		}
		return s.toolFinished(d, n)
	case n.Status != NodeWaiting:
		return stale("%s is %s, not waiting for its child run", d.Key(), orIdle(n.Status))
	case n.Child != "" && n.Child != d.ChildRunID:
		return stale("child run %s: %s waits for %s", d.ChildRunID, d.Key(), n.Child)
	}
	if d.Status == string(RunCompleted) {
		s.finish(d.Node, n, nil, NodeSucceeded, d.Output, nil, at)
		return nil
	}
	f := d.Error
	if f == nil {
		f = &events.Failure{Type: "ChildRun" + d.Status, Message: "child run " + d.ChildRunID + " " + d.Status}
	}
	s.finish(d.Node, n, nil, NodeFailed, nil, f, at)
	return nil
}
