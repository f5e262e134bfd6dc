package projection

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The appliers of durable timers: a retry's schedule, and any timer's
// firing. A timer is pending from the event that asks for it (a retry's
// RetryScheduled, a human node's deadline from its NodeWaiting) until it
// fires, its node moves on, or the run ends.

func (s *State) applyRetryScheduled(d *events.RetryScheduledData) error {
	// It follows a failed attempt: of the node, or of one item of a map
	// node (which waits on meanwhile).
	n, a, err := s.attemptOf(d.NodeRef)
	if err != nil {
		return err
	}
	if *a.status != NodeFailed {
		return stale("retry of %s: the attempt is %s, not failed", d.Key(), orIdle(*a.status))
	}
	if d.Attempt <= a.attempt {
		return stale("retry of %s as attempt %d: attempt %d ran", d.Key(), d.Attempt, a.attempt)
	}
	s.addTimer(d.TimerID, Timer{Purpose: "retry", Ref: d.NodeRef, Attempt: d.Attempt, At: d.At.UTC()})
	s.Stats.Retries++
	*a.status = NodeRetrying
	if d.Item != nil {
		// A map node waits on while one of its items backs off.
		n.Status, n.Error, n.EndedAt = NodeWaiting, nil, nil
	}
	return nil
}

// applyTimerFired passes over a timer that is not pending (fired before,
// dropped with its node or run, or not asked for yet): it changes nothing.
func (s *State) applyTimerFired(d *events.TimerFiredData, at time.Time) error {
	t, ok := s.Timers[d.TimerID]
	if !ok {
		return nil
	}
	delete(s.Timers, d.TimerID)
	n, a, err := s.attemptOf(t.Ref)
	if err != nil {
		return nil // the node moved on
	}
	switch t.Purpose {
	case "retry":
		if *a.status == NodeRetrying {
			*a.status = NodeRetryDue
		}
	case "deadline":
		if n.Status == NodeWaiting && n.WaitingFor == "signal" {
			f := &events.Failure{Type: events.FailureTimeout, Message: "no signal before the deadline"}
			if n.Await != nil {
				f.Message = fmt.Sprintf("no approval of tool %q (call %s) before the deadline", n.Await.Tool, n.Await.Call)
			}
			s.finish(t.Ref.Node, n, nil, NodeFailed, nil, f, at)
		}
	case PurposeTimeout, PurposeHeartbeat:
		s.timeoutFired(d.TimerID, t, a, at)
	case PurposeWait:
		if n.Status == NodeWaiting && n.WaitingFor == WaitingForTimer && t.Ref.Iteration == n.Iteration {
			s.finish(t.Ref.Node, n, nil, NodeSucceeded, waitOutput(t.At, false), nil, at)
		}
	}
	return nil
}

// DeadlineTimerID is the id of the durable timer that ends a human node
// activation's wait. The node-waiting event that sets the deadline records
// the timer under this id, so a state folded afresh (after a restart) knows
// it as well as the state the deadline was decided in.
func DeadlineTimerID(ref events.NodeRef) string {
	return "deadline-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
}

func (s *State) addTimer(id string, t Timer) {
	if s.Timers == nil {
		s.Timers = map[string]Timer{}
	}
	s.Timers[id] = t
}

// dropTimers removes the pending timers of a node.
func (s *State) dropTimers(node string) {
	for id, t := range s.Timers {
		if t.Ref.Node == node {
			delete(s.Timers, id)
		}
	}
}
