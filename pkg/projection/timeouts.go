package projection

import (
	"strconv"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// Durable timeouts of an attempt, enforced through the log whatever the
// worker is doing. A work item carries its node's limits (TimeoutMs,
// HeartbeatMs); the fold turns them into pending timers that the
// coordinator arms like any other (see Timers):
//
//   - start-to-close: from each invoking of the live attempt, the node's
//     timeout plus TimeoutGrace (the worker's own timer normally fires
//     first and reports the timeout itself);
//   - heartbeat: from each Heartbeat event of the live attempt (a node
//     that reports progress through the worker SDK), HeartbeatMisses
//     times the node's heartbeat interval.
//
// A timeout timer that fires before its time (it was moved by a later
// heartbeat or invoking, and the old schedule fired before it was
// replaced) changes nothing; one that fires in time marks the attempt
// TimedOut, and the coordinator fails the attempt as timed out (retryable,
// as the node's retry policy says). Outcomes of the attempt arriving after
// that are stale.

// Timer purposes of timeouts.
const (
	PurposeTimeout   = "timeout"
	PurposeHeartbeat = "heartbeat"
)

// TimeoutGrace is added to a node's timeout for the coordinator's
// start-to-close timer: the worker enforces the timeout itself first.
const TimeoutGrace = time.Second

// HeartbeatMisses is how many heartbeat intervals may pass without a
// Heartbeat event before the attempt is failed.
const HeartbeatMisses = 3

// timeoutID names a timeout timer of an attempt; it is a subject token.
func timeoutID(purpose string, ref events.NodeRef, attempt int) string {
	id := purpose + "-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
	if ref.Item != nil {
		id += "-" + strconv.Itoa(*ref.Item)
	}
	return id + "-" + strconv.Itoa(attempt)
}

// armTimeouts (re)starts the timeouts of an attempt a worker took.
func (s *State) armTimeouts(n *NodeState, ref events.NodeRef, attempt int, at time.Time) {
	if n.TimeoutMs > 0 {
		d := time.Duration(n.TimeoutMs)*time.Millisecond + TimeoutGrace
		s.addTimer(timeoutID(PurposeTimeout, ref, attempt), Timer{Purpose: PurposeTimeout, Ref: ref, Attempt: attempt, At: at.Add(d)})
	}
	if _, ok := s.Timers[timeoutID(PurposeHeartbeat, ref, attempt)]; ok {
		s.armHeartbeat(n, ref, attempt, at) // a new delivery has its own interval
	}
}

// armHeartbeat moves an attempt's heartbeat timeout on from at.
func (s *State) armHeartbeat(n *NodeState, ref events.NodeRef, attempt int, at time.Time) {
	if n.HeartbeatMs > 0 {
		d := HeartbeatMisses * time.Duration(n.HeartbeatMs) * time.Millisecond
		s.addTimer(timeoutID(PurposeHeartbeat, ref, attempt), Timer{Purpose: PurposeHeartbeat, Ref: ref, Attempt: attempt, At: at.Add(d)})
	}
}

// timeoutFired marks the live attempt timed out when t is its timer and it
// is due; an early firing leaves the timer pending.
func (s *State) timeoutFired(id string, t Timer, a attempt, at time.Time) {
	if at.Before(t.At) {
		s.Timers[id] = t // moved on since this schedule was armed
		return
	}
	if a.attempt != t.Attempt || (*a.status != NodeReady && *a.status != NodeRunning) {
		return
	}
	*a.timedOut = t.Purpose
}

// dropAttemptTimers removes the timeouts of an attempt that ended.
func (s *State) dropAttemptTimers(ref events.NodeRef, attempt int) {
	delete(s.Timers, timeoutID(PurposeTimeout, ref, attempt))
	delete(s.Timers, timeoutID(PurposeHeartbeat, ref, attempt))
}
