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

// applyChildRunFinished ends the wait of the activation that started the
// child run; the outcome of any other child is stale.
func (s *State) applyChildRunFinished(d *events.ChildRunFinishedData, at time.Time) error {
	n := s.Nodes[d.Node]
	switch {
	case n == nil || n.Iteration != d.Iteration:
		return stale("%s: not the node's current activation", d.Key())
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
