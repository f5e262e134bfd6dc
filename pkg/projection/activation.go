package projection

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The appliers of the coordinator's activation decisions: ready, waiting,
// skipped, and the routings they carry.

func (s *State) applyNodeReady(d *events.NodeReadyData, at time.Time) error {
	if err := s.readyStale(d); err != nil {
		return err
	}
	s.routedAll(d.Routed)
	n := s.activate(d.NodeRef, d.Consumed, d.Owed, d.Local)
	if d.Item != nil {
		it := item(n, *d.Item)
		it.Status, it.Attempt, it.Delivery, it.HeartbeatAt, it.TimedOut = NodeReady, d.Attempt, 0, nil, ""
		it.Slot, it.Rate = d.Slot, d.Rate
		it.LocalAttempt = d.Queue == events.LocalQueue
		n.TimeoutMs, n.HeartbeatMs = d.TimeoutMs, d.HeartbeatMs
		return nil
	}
	n.Status, n.Attempt, n.ReadyAt = NodeReady, d.Attempt, &at
	n.Delivery, n.HeartbeatAt, n.TimedOut = 0, nil, ""
	n.Await, n.Resume = nil, nil                      // an await's wait ends with the next attempt's ready
	n.WaitingFor, n.Slot, n.Rate = "", d.Slot, d.Rate // a slot's or rate's wait ends with its ready
	n.LocalAttempt = d.Queue == events.LocalQueue
	n.TimeoutMs, n.HeartbeatMs = d.TimeoutMs, d.HeartbeatMs
	return nil
}

// readyStale says why a node-ready does not count, or nil when it does:
// it starts a new activation, or the next attempt of the current one (or
// of one of its map items), which has not ended.
func (s *State) readyStale(d *events.NodeReadyData) error {
	n := s.Nodes[d.Node]
	if d.Item == nil && (n == nil || d.Iteration > n.Iteration) {
		return nil
	}
	if n == nil || d.Iteration != n.Iteration {
		return stale("%s: not the node's current activation", d.Key())
	}
	if n.Status.ended() {
		return stale("%s already %s", d.Key(), n.Status)
	}
	attempt := n.Attempt
	if d.Item != nil {
		it := item(n, *d.Item)
		if it == nil {
			return stale("%s: no such item", d.Key())
		}
		if it.Status.ended() {
			return stale("%s already %s", d.Key(), it.Status)
		}
		attempt = it.Attempt
	}
	if d.Attempt <= attempt {
		return stale("attempt %d of %s: attempt %d was readied before", d.Attempt, d.Key(), attempt)
	}
	return nil
}

func (s *State) applyNodeWaiting(d *events.NodeWaitingData, at time.Time) error {
	if ok, err := s.waitWithin(d); ok {
		if err == nil {
			// The routings written with it are the decision's, whatever
			// wait carries them (the decider puts them on its first
			// activation, a retry's wait for a slot included).
			s.routedAll(d.Routed)
		}
		return err
	}
	if err := s.newActivation(d.NodeRef); err != nil {
		return err
	}
	s.routedAll(d.Routed)
	n := s.activate(d.NodeRef, d.Consumed, d.Owed, d.Local)
	n.Status, n.WaitingFor, n.Deadline, n.StartedAt = NodeWaiting, d.For, d.Deadline, &at
	switch d.For {
	case "map":
		s.waitForItems(d, n, at)
	case "slot":
		n.Slot = d.Slot
	case "rate":
		s.waitForRate(d, n)
	case "signal":
		s.waitForSignal(d, n, at)
	case WaitingForTimer:
		s.waitForTimer(d, n, at)
	case "child":
		s.takeEarlyChildEnd(d, at) // children.go
	}
	return nil
}

// waitWithin applies a node-waiting that is a wait within the current
// activation, not a new one: a retry's wait for a slot or a rate limit's
// turn, an awaiting attempt's wait (await.go). ok is false for any other.
func (s *State) waitWithin(d *events.NodeWaitingData) (ok bool, err error) {
	n := s.Nodes[d.Node]
	if n == nil || n.Iteration != d.Iteration || d.Item != nil {
		return false, nil
	}
	switch {
	case d.For == "slot" || d.For == "rate":
		return true, s.retryWaitsForSlot(d, n)
	case (d.For == "signal" || d.For == "child") && d.Attempt > 0:
		return true, s.awaitWait(d, n)
	}
	return false, nil
}

// waitForItems applies a map node's wait for its items: one item state
// each, and a map over no items succeeds at once with an empty list.
func (s *State) waitForItems(d *events.NodeWaitingData, n *NodeState, at time.Time) {
	var items []json.RawMessage
	_ = json.Unmarshal(d.Items, &items)
	n.Items = make([]*ItemState, len(items))
	for i := range n.Items {
		n.Items[i] = &ItemState{Data: items[i]}
	}
	if len(items) == 0 {
		s.finish(d.Node, n, nil, NodeSucceeded, json.RawMessage("[]"), nil, at)
	}
}

// waitForSignal applies a node's wait for a signal: its deadline timer,
// if it has one, and a signal that came before the wait ends it at once.
func (s *State) waitForSignal(d *events.NodeWaitingData, n *NodeState, at time.Time) {
	if d.Deadline != nil {
		s.addTimer(DeadlineTimerID(d.NodeRef), Timer{Purpose: "deadline", Ref: d.NodeRef, At: d.Deadline.UTC()})
	}
	if data, ok := s.takeSignal(d.Node); ok {
		s.dropTimers(d.Node)
		s.finish(d.Node, n, nil, NodeSucceeded, data, nil, at)
	}
}

// retryWaitsForSlot applies a retry's wait for a concurrency slot: the
// attempt that came due waits, in the activation that began already.
func (s *State) retryWaitsForSlot(d *events.NodeWaitingData, n *NodeState) error {
	if n.Status != NodeRetryDue || d.Attempt != n.Attempt+1 {
		return stale("%s: attempt %d waits for a slot, but the node is %s at attempt %d", d.Key(), d.Attempt, orIdle(n.Status), n.Attempt)
	}
	n.Status, n.WaitingFor = NodeWaiting, d.For
	if d.For == "slot" {
		n.Slot = d.Slot
	} else {
		s.waitForRate(d, n)
	}
	return nil
}

// waitForRate records an attempt waiting for its turn of a rate limit,
// until the timer the wait asks for fires.
func (s *State) waitForRate(d *events.NodeWaitingData, n *NodeState) {
	n.Rate, n.Deadline = d.Rate, d.Deadline
	if d.Deadline != nil {
		ref := events.NodeRef{Node: d.Node, Iteration: d.Iteration}
		s.addTimer(RateTimerID(ref, d.Attempt), Timer{Purpose: PurposeRate, Ref: ref, Attempt: d.Attempt, At: d.Deadline.UTC()})
	}
}

// PurposeRate is the purpose of the timer that ends a wait for a rate
// limit's turn.
const PurposeRate = "rate"

// RateTimerID is the id of the timer that ends attempt's wait for its
// turn of a rate limit.
func RateTimerID(ref events.NodeRef, attempt int) string {
	return "rate-" + ref.Node + "-" + strconv.Itoa(ref.Iteration) + "-" + strconv.Itoa(attempt)
}

func (s *State) applyNodeSkipped(d *events.NodeSkippedData, at time.Time) error {
	if err := s.newActivation(d.NodeRef); err != nil {
		return err
	}
	s.routedAll(d.Routed)
	n := s.activate(d.NodeRef, d.Consumed, d.Owed, nil)
	n.Status, n.EndedAt = NodeSkipped, &at
	return nil
}

// newActivation says why a waiting or skipped decision is stale: the
// activation it names began already (the same iteration or an earlier
// one), so the decision would overwrite it. Nil when it is new.
func (s *State) newActivation(ref events.NodeRef) error {
	n := s.Nodes[ref.Node]
	if n == nil || ref.Iteration > n.Iteration {
		return nil
	}
	if ref.Iteration == n.Iteration {
		return stale("%s began already (%s)", ref.Key(), orIdle(n.Status))
	}
	return stale("%s: the node is at iteration %d", ref.Key(), n.Iteration)
}

func (s *State) applyNodeRouted(d *events.NodeRoutedData) error {
	if err := s.routedStale(d); err != nil {
		return err
	}
	s.routed(d)
	return nil
}

// routedStale says why a routing is stale: the activation was routed
// before, so its signals are queued already.
func (s *State) routedStale(d *events.NodeRoutedData) error {
	if d.Node == "START" {
		if s.EntryRouted {
			return stale("START was routed before")
		}
		return nil
	}
	if n := s.Nodes[d.Node]; n != nil && n.Routed >= d.Iteration {
		return stale("%s was routed before", d.Key())
	}
	return nil
}

// routed queues the edge signals of a routing for their targets.
func (s *State) routed(d *events.NodeRoutedData) {
	if d.Node == "START" {
		s.EntryRouted = true
		s.entered()
	} else if n := s.Nodes[d.Node]; n != nil && n.Iteration == d.Iteration {
		n.Routed = d.Iteration
	}
	for _, sig := range d.Signals {
		if sig.To == "END" {
			s.EndReached = s.EndReached || sig.Taken
			continue
		}
		if sig.To == "CONTINUE" {
			if sig.Taken && s.ContinueFrom == nil {
				s.ContinueFrom = &ContinueFrom{Node: d.Node, Edge: sig.Edge}
			}
			continue
		}
		if sig.Back && !sig.Taken {
			continue
		}
		if t := s.Nodes[sig.To]; t != nil && absorb(t, sig.Edge) {
			continue
		}
		if s.Pending == nil {
			s.Pending = map[string][]events.Signal{}
		}
		s.Pending[sig.To] = append(s.Pending[sig.To], sig)
	}
}

// routedAll applies the routings an activation event carries, before it,
// passing over any routed before.
func (s *State) routedAll(rs []events.NodeRoutedData) {
	for i := range rs {
		if s.routedStale(&rs[i]) == nil {
			s.routed(&rs[i])
		}
	}
}

// activate starts a node's activation (or continues it when the iteration
// is the current one), consuming the incoming signals it used up.
func (s *State) activate(ref events.NodeRef, consumed, owed []int, local json.RawMessage) *NodeState {
	n := s.node(ref.Node)
	if ref.Iteration > n.Iteration {
		n.Iteration = ref.Iteration
		n.Attempt, n.Delivery, n.Output, n.Error, n.Worker, n.Actions = 0, 0, nil, nil, "", nil
		n.Owed = append(n.Owed, owed...)
		n.Items, n.WaitingFor, n.Deadline, n.Child, n.Fallback = nil, "", nil, "", false
		n.Await, n.Awaits, n.Resume = nil, 0, nil
		n.StartedAt, n.EndedAt, n.ReadyAt, n.HeartbeatAt = nil, nil, nil, nil
		n.Local = local
		s.consume(ref.Node, consumed)
	}
	return n
}

// consume removes, for each edge index, the oldest pending signal on that
// edge to node.
func (s *State) consume(node string, edges []int) {
	q := s.Pending[node]
	for _, edge := range edges {
		for i, sig := range q {
			if sig.Edge == edge {
				q = append(q[:i:i], q[i+1:]...)
				break
			}
		}
	}
	if len(q) == 0 {
		delete(s.Pending, node)
	} else {
		s.Pending[node] = q
	}
}

// absorb drops a signal on edge that an earlier any or n-of activation of n
// owes; it reports whether it did.
func absorb(n *NodeState, edge int) bool {
	for i, e := range n.Owed {
		if e == edge {
			n.Owed = append(n.Owed[:i:i], n.Owed[i+1:]...)
			if len(n.Owed) == 0 {
				n.Owed = nil
			}
			return true
		}
	}
	return false
}

// entered ends the run's wait for its own slot (a graph's run limit: a
// node.waiting of START for "slot") once START is routed: the run holds
// its slot and its first nodes start. START keeps its slot, which the run
// holds until it ends.
func (s *State) entered() {
	if n := s.Nodes["START"]; n != nil && n.Status == NodeWaiting {
		n.Status, n.WaitingFor = NodeSucceeded, ""
	}
}
