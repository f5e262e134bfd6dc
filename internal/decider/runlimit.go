package decider

import (
	"encoding/json"
	"fmt"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// A graph's run limit (graph.RunConcurrency): before START is routed, the
// run takes its own slot, under START (attempt 1), through Options.Admit.
// Granted, START is routed and the run holds the slot until it ends
// (the coordinator gives it back). Not granted: with the queue strategy
// the run waits, a node.waiting of START for "slot" that routing START
// ends (the fold), woken as a node's waiting attempt is; with
// cancel-newest it is cancelled at once, the reason naming the limit and
// key; with cancel-oldest it waits while the oldest run holding the key
// is cancelled (the coordinator's Admit asks for it). A continuation
// (continue-as-new) queues whatever the strategy: its start is appended
// before its predecessor's completion, so it waits for the slot that run
// gives back, neither refused nor evicting another run.

// runAdmission is what the run's own slot lets the decider do.
type runAdmission int

const (
	runGo    runAdmission = iota // route START
	runWaits                     // wait for the slot: nothing to route
	runEnded                     // the run failed or was cancelled
)

// RunSlot is a run's own slot in graph g, from its input and invocation
// (which do not change, so the slot is the same whenever it is asked
// for); nil when g has no run limit.
func RunSlot(g *graph.Graph, ev graphrt.Evaluator, input json.RawMessage, invocation map[string]any) (*events.SlotRef, error) {
	def := g.Definition()
	c := def.Concurrency
	if c == nil {
		return nil, nil
	}
	key, err := ev.ConcurrencyKey(graph.Start, graphrt.Env{State: inputMap(input), Invocation: invocation})
	if err == nil && len(key) > MaxKeyLen {
		err = fmt.Errorf("concurrency.key gave %d bytes, the limit is %d", len(key), MaxKeyLen)
	}
	if err != nil {
		return nil, fmt.Errorf("the run limit's key: %w", err)
	}
	return &events.SlotRef{Limit: graph.RunLimitName(def), Key: key, Max: c.Max}, nil
}

// admitRun asks for the run's own slot, when its graph has a run limit.
func (d *decider) admitRun() runAdmission {
	if d.admitFn == nil || d.g.Definition().Concurrency == nil {
		return runGo
	}
	slot, err := RunSlot(d.g, d.ev, d.s.Input, d.s.InvocationMap())
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureFlowLimit, Message: err.Error()}, "")
		return runEnded
	}
	ref := events.NodeRef{Node: graph.Start, Iteration: 1}
	strategy := graph.RunStrategy(d.g.Definition())
	if d.s.Chain != nil {
		// A continuation is the same piece of work as the run it
		// continues: it waits for the slot that run gives back, neither
		// refused nor evicting another run.
		strategy = graph.RunQueue
	}
	a := d.admitFn(AdmitRequest{Priority: priorityOf(d.s.Priority), Fairness: d.s.FairnessKey, Run: d.s.RunID, Ref: ref, Attempt: 1, Slot: *slot, Strategy: strategy})
	switch {
	case a.Failure != nil:
		d.failRun(*a.Failure, "")
		return runEnded
	case a.Granted:
		return runGo
	case a.Full:
		d.emit(&events.RunCancelledData{By: "flow", Reason: fmt.Sprintf("concurrency limit %q is full for key %q (max %d runs; strategy %s)", slot.Limit, slot.Key, slot.Max, strategy)},
			eventlog.DecisionID(d.s.RunID, events.RunCancelled))
		return runEnded
	}
	if d.s.Nodes[graph.Start] == nil {
		d.waitForSlot(ref, 1, slot, nil, nil, nil)
	}
	return runWaits
}

// inputMap is a run's input as the state a key sees (nil when it is not
// an object).
func inputMap(input json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(input, &m)
	return m
}
