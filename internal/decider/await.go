package decider

import (
	"encoding/json"
	"strconv"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// An attempt that ended awaiting something (a node step with Await: an
// agent's tool call that needs a person's approval) leaves its activation
// waiting (projection.WaitingForAwait). The coordinator decides the wait:
// a signal, as a human node's, up to the deadline the tool's
// approvalTimeout gives (none without one), which the node's config in the
// graph says, not the worker. The signal that answers makes the next
// attempt due (the fold: NodeRetryDue with Resume), readied here with the
// signal's data (afterOutcome); a deadline that passes fails the
// activation with FailureTimeout, not retryable, and its timeout edges
// are taken as a human node's are (onFailure).

// awaitWait decides the wait of an activation whose attempt awaits.
func (d *decider) awaitWait(n *graph.Node, ns *projection.NodeState) bool {
	if ns.Await == nil {
		return false
	}
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	p := &events.NodeWaitingData{NodeRef: ref, For: "signal", Attempt: ns.Attempt}
	if t := approvalTimeout(n, ns.Await.Tool); t > 0 {
		at := d.now.Add(t.D())
		p.Deadline = &at
	}
	d.emit(p, eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key(), strconv.Itoa(ns.Attempt), "await"))
	if p.Deadline != nil {
		id := projection.AwaitDeadlineTimerID(ref, ns.Attempt)
		d.timer(id, *p.Deadline, &events.TimerFiredData{TimerID: id, Purpose: "deadline", Ref: ref, Attempt: ns.Attempt})
	}
	return true
}

// approvalTimeout is the approvalTimeout of the tool named tool in agent
// node n's config (0: none, or no such tool).
func approvalTimeout(n *graph.Node, tool string) graph.Duration {
	var cfg struct {
		Tools []struct {
			Name            string         `json:"name"`
			ApprovalTimeout graph.Duration `json:"approvalTimeout"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(n.Config, &cfg) // checked when the graph was loaded
	for _, t := range cfg.Tools {
		if t.Name == tool {
			return t.ApprovalTimeout
		}
	}
	return 0
}
