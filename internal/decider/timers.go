package decider

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// TimerEvent builds the event a pending timer of the state fires: the same
// event, with the same id, as the decision that asked for the timer
// scheduled, so that a coordinator re-arming the timers of a run it folded
// from the log arms exactly what was decided.
func TimerEvent(run, id string, t projection.Timer) (*events.Event, error) {
	return events.New(run, eventlog.DecisionID(run, events.TimerFired, id), t.At, &events.TimerFiredData{
		TimerID: id, Purpose: t.Purpose, Ref: t.Ref, Attempt: t.Attempt,
	})
}

// timedOut fails the live attempt of a node (or of one of its map items)
// whose durable timeout fired (see projection's timeouts): the attempt is
// recorded as failed with a retryable Timeout, whatever its worker is
// doing, and the node's retry policy takes it from there.
func (d *decider) timedOut(n *graph.Node, ns *projection.NodeState) bool {
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	if ns.TimedOut != "" && (ns.Status == projection.NodeReady || ns.Status == projection.NodeRunning) {
		d.failTimedOut(ref, ns.Attempt, ns.TimedOut, ns)
		return true
	}
	for i, it := range ns.Items {
		if it.TimedOut != "" && (it.Status == projection.NodeReady || it.Status == projection.NodeRunning) {
			ref.Item = &i
			d.failTimedOut(ref, it.Attempt, it.TimedOut, ns)
			return true
		}
	}
	return false
}

func (d *decider) failTimedOut(ref events.NodeRef, attempt int, purpose string, ns *projection.NodeState) {
	msg := fmt.Sprintf("attempt %d ran longer than its timeout of %s", attempt, time.Duration(ns.TimeoutMs)*time.Millisecond)
	if purpose == projection.PurposeHeartbeat {
		msg = fmt.Sprintf("attempt %d sent no heartbeat for %s", attempt, projection.HeartbeatMisses*time.Duration(ns.HeartbeatMs)*time.Millisecond)
	}
	d.emit(&events.NodeFailedData{NodeRef: ref, Attempt: attempt, Worker: "coordinator",
		Error: events.Failure{Type: events.FailureTimeout, Message: msg, Retryable: true}},
		eventlog.DecisionID(d.s.RunID, events.NodeFailed, ref.Key(), strconv.Itoa(attempt), purpose))
}
