package decider

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// policy is a node's retry policy with graph.DefaultRetryPolicy filling
// the fields it leaves zero.
func policy(n *graph.Node) graph.RetryPolicy {
	p := graph.DefaultRetryPolicy
	if r := n.Retry; r != nil {
		if r.MaxAttempts > 0 {
			p.MaxAttempts = r.MaxAttempts
		}
		if r.InitialInterval > 0 {
			p.InitialInterval = r.InitialInterval
		}
		if r.BackoffCoefficient >= 1 {
			p.BackoffCoefficient = r.BackoffCoefficient
		}
		if r.MaxInterval > 0 {
			p.MaxInterval = r.MaxInterval
		}
		if r.Jitter != nil {
			p.Jitter = r.Jitter
		}
		p.NonRetryableErrors = r.NonRetryableErrors
	}
	if n.Type == graph.TypeHuman || n.Effect == graph.EffectHuman {
		p.MaxAttempts = 1 // a person is never asked twice
	}
	if n.Type == graph.TypeSubgraph || n.Type == graph.TypeRouter || n.Type == graph.TypeWait {
		p.MaxAttempts = 1 // run by the coordinator: a retry would go to a worker
	}
	return p
}

// Backoff is the wait before attempt+1 after attempt failed: the initial
// interval times the coefficient to the power attempt-1, capped, less up to
// the jitter fraction. The jitter is drawn from key, so deciding again gives
// the same wait.
func Backoff(p graph.RetryPolicy, attempt int, key string) time.Duration {
	d := float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(attempt-1))
	if max := float64(p.MaxInterval); max > 0 && d > max {
		d = max
	}
	if p.Jitter != nil && *p.Jitter > 0 {
		h := sha256.Sum256([]byte(key))
		u := float64(binary.BigEndian.Uint64(h[:8])>>11) / float64(1<<53)
		d -= d * *p.Jitter * u
	}
	return time.Duration(d)
}

func retryable(f *events.Failure, p graph.RetryPolicy) bool {
	return f.Retryable && !slices.Contains(p.NonRetryableErrors, f.Type)
}

// onFailure decides what follows a failed attempt of a node, or of one item
// of a map node: a retry, the fallback, a timeout edge, or the run's failure.
func (d *decider) onFailure(n *graph.Node, ns *projection.NodeState, item *int) bool {
	f, attempt := ns.Error, ns.Attempt
	if item != nil {
		it := ns.Items[*item]
		f, attempt = it.Error, it.Attempt
	}
	if f == nil {
		f = &events.Failure{Type: "Error", Message: "unknown failure"}
	}
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration, Item: item}
	if p := policy(n); retryable(f, p) && attempt < d.maxAttempts(n, ref) {
		d.scheduleRetry(n, p, ref, attempt, f)
		return true
	}
	if item == nil && len(n.Fallback) > 0 {
		d.emit(&events.NodeInvokedData{NodeRef: ref, Attempt: attempt, Output: n.Fallback, Fallback: true, Worker: "coordinator"},
			eventlog.DecisionID(d.s.RunID, events.NodeInvoked, ref.Key(), strconv.Itoa(attempt), "fallback"))
		return true
	}
	if item == nil && f.Type == events.FailureTimeout && ns.WaitingFor == "signal" && d.hasTimeoutEdge(n.ID) {
		d.route(n, ns)
		return true
	}
	d.failNode(n, item, attempt, f)
	return true
}

// scheduleRetry schedules the attempt after a failed one, after its
// back-off: a retry-scheduled decision and the durable timer that fires
// it.
func (d *decider) scheduleRetry(n *graph.Node, p graph.RetryPolicy, ref events.NodeRef, attempt int, f *events.Failure) {
	next := attempt + 1
	at := d.now.Add(Backoff(p, attempt, eventlog.IdempotencyKey(d.s.RunID, ref, attempt)))
	id := projection.RetryTimerID(ref, next)
	d.emit(&events.RetryScheduledData{NodeRef: ref, Attempt: next, At: at, TimerID: id, LastFailure: *f},
		eventlog.DecisionID(d.s.RunID, events.RetryScheduled, ref.Key(), strconv.Itoa(next)))
	d.timer(id, at, &events.TimerFiredData{TimerID: id, Purpose: "retry", Ref: ref, Attempt: next})
}

// failNode fails the run for a node (or map item) whose failure nothing
// recovers from. The node's own failure is the cause; the run's message
// does not repeat it.
func (d *decider) failNode(n *graph.Node, item *int, attempt int, f *events.Failure) {
	cause := *f
	msg := fmt.Sprintf("node %q failed after %d attempt(s)", n.ID, attempt)
	if item != nil {
		msg = fmt.Sprintf("node %q item %d failed after %d attempt(s)", n.ID, *item, attempt)
	}
	d.failRun(events.Failure{Type: f.Type, Message: msg, Cause: &cause}, n.ID)
}

func (d *decider) hasTimeoutEdge(node string) bool {
	for _, i := range d.ev.Outgoing(node) {
		if d.g.Edge(i).Timeout {
			return true
		}
	}
	return false
}
