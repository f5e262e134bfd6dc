package projection

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// Fold folds events into a new state: Fold(evs) == Apply each in order to
// an empty state. Events that cannot be applied are counted in
// Stats.Rejected and passed over.
func Fold(evs []*events.Event) *State {
	s := &State{}
	for _, e := range evs {
		_ = s.Apply(e)
	}
	return s
}

// FoldTo folds the events with sequence ≤ seq: the state at that point.
func FoldTo(evs []*events.Event, seq uint64) *State {
	s := &State{}
	for _, e := range evs {
		if e.Seq > seq {
			break
		}
		_ = s.Apply(e)
	}
	return s
}

// Apply applies one event to the state. It is deterministic and does no I/O:
// everything it records comes from the event, including times. An event at
// or below LastSeq (already applied) is ignored, which makes applying a
// redelivered event harmless. An event that cannot be applied returns an
// error; it is still counted, so the fold moves past it.
func (s *State) Apply(e *events.Event) (err error) {
	if e.Seq != 0 && e.Seq <= s.LastSeq {
		return nil
	}
	defer func() {
		if e.Seq > s.LastSeq {
			s.LastSeq = e.Seq
		}
		s.Stats.Events++
		t := e.Time.UTC()
		s.UpdatedAt = &t
		if err != nil {
			s.Stats.Rejected++
		}
	}()
	if s.RunID != "" && e.RunID != s.RunID {
		return fmt.Errorf("event %s of run %q applied to run %q", e.ID, e.RunID, s.RunID)
	}
	p, err := e.Payload()
	if err != nil {
		return err
	}
	if s.Status == RunPending && e.Type != events.RunStarted {
		return fmt.Errorf("%s before run-started", e.Type)
	}
	if s.Status.Ended() {
		return nil // history after the end changes nothing
	}
	at := e.Time.UTC()
	switch d := p.(type) {
	case *events.RunStartedData:
		return s.started(e, d, at)
	case *events.RunCompletedData:
		s.Status, s.Output, s.EndedAt = RunCompleted, d.Output, &at
	case *events.RunFailedData:
		f := d.Error
		s.Status, s.Error, s.EndedAt = RunFailed, &f, &at
	case *events.RunCancelRequestedData:
		if s.Cancel == nil {
			s.Cancel = &CancelRequest{By: d.By, Reason: d.Reason, At: at}
			s.Status = RunCancelling
		}
	case *events.RunCancelledData:
		s.Status, s.EndedAt = RunCancelled, &at
		if s.Cancel == nil {
			s.Cancel = &CancelRequest{By: d.By, Reason: d.Reason, At: at}
		}
		for _, n := range s.Nodes {
			if n.Status.Active() {
				n.Status = NodeCancelled
			}
		}
	case *events.NodeReadyData:
		s.ready(d, at)
	case *events.NodeInvokingData:
		s.invoking(d, at)
	case *events.NodeInvokedData:
		s.invoked(d, at)
	case *events.NodeFailedData:
		s.failed(d, at)
	case *events.NodeCancelledData:
		if n := s.current(d.NodeRef, d.Attempt); n != nil {
			s.finish(d.Node, n, d.Item, NodeCancelled, nil, &events.Failure{Type: events.FailureCancelled, Message: d.Reason}, at)
		}
	case *events.NodeSkippedData:
		s.routedAll(d.Routed)
		n := s.activate(d.NodeRef, d.Consumed, d.Owed, nil)
		n.Status, n.EndedAt = NodeSkipped, &at
	case *events.NodeWaitingData:
		s.waiting(d, at)
	case *events.NodeRoutedData:
		s.routed(d)
	case *events.RetryScheduledData:
		// It follows a failed attempt: of the node, or of one item of a
		// map node (which waits on meanwhile).
		n := s.Nodes[d.Node]
		if n == nil || n.Iteration != d.Iteration {
			return nil
		}
		if d.Item != nil {
			if it := item(n, *d.Item); it == nil || it.Status != NodeFailed {
				return nil
			}
		} else if n.Status != NodeFailed {
			return nil
		}
		if s.Timers == nil {
			s.Timers = map[string]Timer{}
		}
		s.Timers[d.TimerID] = Timer{Purpose: "retry", Ref: d.NodeRef, Attempt: d.Attempt, At: d.At.UTC()}
		s.Stats.Retries++
		setStatus(n, d.Item, NodeRetrying)
		if d.Item != nil {
			// A map node waits on while one of its items backs off.
			n.Status, n.Error, n.EndedAt = NodeWaiting, nil, nil
		}
	case *events.TimerFiredData:
		t, ok := s.Timers[d.TimerID]
		if !ok {
			return nil // already fired, or cancelled
		}
		delete(s.Timers, d.TimerID)
		n := s.Nodes[t.Ref.Node]
		if n == nil || n.Iteration != t.Ref.Iteration {
			return nil
		}
		switch t.Purpose {
		case "retry":
			setStatus(n, t.Ref.Item, NodeRetryDue)
		case "deadline":
			if n.Status == NodeWaiting && n.WaitingFor == "signal" {
				f := &events.Failure{Type: events.FailureTimeout, Message: "no signal before the deadline"}
				s.finish(t.Ref.Node, n, nil, NodeFailed, nil, f, at)
			}
		}
	case *events.SignalReceivedData:
		n := s.Nodes[d.Node]
		if n != nil && n.Status == NodeWaiting && n.WaitingFor == "signal" {
			s.dropTimers(d.Node)
			s.finish(d.Node, n, nil, NodeSucceeded, d.Data, nil, at)
			return nil
		}
		if s.Signals == nil {
			s.Signals = map[string][]json.RawMessage{}
		}
		s.Signals[d.Node] = append(s.Signals[d.Node], d.Data)
	case *events.ChildRunStartedData:
		if n := s.Nodes[d.Node]; n != nil && n.Iteration == d.Iteration {
			n.Child = d.ChildRunID
		}
	case *events.ChildRunFinishedData:
		n := s.Nodes[d.Node]
		if n == nil || n.Iteration != d.Iteration || n.Status != NodeWaiting {
			return nil
		}
		switch d.Status {
		case string(RunCompleted):
			s.finish(d.Node, n, nil, NodeSucceeded, d.Output, nil, at)
		default:
			f := d.Error
			if f == nil {
				f = &events.Failure{Type: "ChildRun" + d.Status, Message: "child run " + d.ChildRunID + " " + d.Status}
			}
			s.finish(d.Node, n, nil, NodeFailed, nil, f, at)
		}
	case *events.HeartbeatData:
		// A sign of life changes no state.
	}
	return nil
}

func (s *State) started(e *events.Event, d *events.RunStartedData, at time.Time) error {
	if s.Status != RunPending {
		return fmt.Errorf("second run-started")
	}
	s.RunID, s.GraphName, s.GraphDigest, s.Graph = e.RunID, d.GraphName, d.GraphDigest, d.Graph
	s.Parent, s.Input, s.Invocation = d.Parent, d.Input, d.Invocation
	s.Status, s.StartedAt = RunRunning, &at
	var g struct {
		State struct {
			Reducers map[string]string `json:"reducers"`
		} `json:"state"`
		Nodes []struct {
			ID       string `json:"id"`
			OutputAs string `json:"outputAs"`
		} `json:"nodes"`
	}
	if len(d.Graph) > 0 {
		if err := json.Unmarshal(d.Graph, &g); err != nil {
			return fmt.Errorf("run-started graph: %w", err)
		}
	}
	s.Config.Reducers = g.State.Reducers
	for _, n := range g.Nodes {
		if n.OutputAs != "" {
			if s.Config.OutputAs == nil {
				s.Config.OutputAs = map[string]string{}
			}
			s.Config.OutputAs[n.ID] = n.OutputAs
		}
	}
	if len(d.Input) > 0 {
		var in map[string]json.RawMessage
		if err := json.Unmarshal(d.Input, &in); err != nil {
			return fmt.Errorf("run input must be a JSON object: %w", err)
		}
		if len(in) > 0 {
			s.Vars = in
		}
	}
	return nil
}

// routed queues the edge signals of a routing for their targets.
func (s *State) routed(d *events.NodeRoutedData) {
	if d.Node == "START" {
		s.EntryRouted = true
	} else if n := s.Nodes[d.Node]; n != nil && n.Iteration == d.Iteration {
		n.Routed = d.Iteration
	}
	for _, sig := range d.Signals {
		if sig.To == "END" {
			s.EndReached = s.EndReached || sig.Taken
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

// routedAll applies the routings an activation event carries, before it.
func (s *State) routedAll(rs []events.NodeRoutedData) {
	for i := range rs {
		s.routed(&rs[i])
	}
}

// activate starts a node's activation (or continues it when the iteration
// is the current one), consuming the incoming signals it used up.
func (s *State) activate(ref events.NodeRef, consumed, owed []int, local json.RawMessage) *NodeState {
	n := s.node(ref.Node)
	if ref.Iteration > n.Iteration {
		n.Iteration = ref.Iteration
		n.Attempt, n.Output, n.Error, n.Worker, n.Actions = 0, nil, nil, "", nil
		n.Owed = append(n.Owed, owed...)
		n.Items, n.WaitingFor, n.Deadline, n.Child, n.Fallback = nil, "", nil, "", false
		n.StartedAt, n.EndedAt, n.ReadyAt = nil, nil, nil
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

func (s *State) ready(d *events.NodeReadyData, at time.Time) {
	s.routedAll(d.Routed)
	n := s.activate(d.NodeRef, d.Consumed, d.Owed, d.Local)
	if d.Iteration != n.Iteration {
		return // stale
	}
	if d.Item != nil {
		if it := item(n, *d.Item); it != nil && d.Attempt >= it.Attempt {
			it.Status, it.Attempt = NodeReady, d.Attempt
		}
		return
	}
	if d.Attempt < n.Attempt {
		return
	}
	n.Status, n.Attempt, n.ReadyAt = NodeReady, d.Attempt, &at
}

func (s *State) waiting(d *events.NodeWaitingData, at time.Time) {
	s.routedAll(d.Routed)
	n := s.activate(d.NodeRef, d.Consumed, d.Owed, d.Local)
	if d.Iteration != n.Iteration || n.Status == NodeWaiting {
		return
	}
	n.Status, n.WaitingFor, n.Deadline, n.StartedAt = NodeWaiting, d.For, d.Deadline, &at
	if d.For == "map" {
		var items []json.RawMessage
		_ = json.Unmarshal(d.Items, &items)
		n.Items = make([]*ItemState, len(items))
		for i := range n.Items {
			n.Items[i] = &ItemState{Data: items[i]}
		}
		if len(items) == 0 {
			s.finish(d.Node, n, nil, NodeSucceeded, json.RawMessage("[]"), nil, at)
		}
		return
	}
	if d.For == "signal" {
		if d.Deadline != nil {
			if s.Timers == nil {
				s.Timers = map[string]Timer{}
			}
			s.Timers[DeadlineTimerID(d.NodeRef)] = Timer{Purpose: "deadline", Ref: d.NodeRef, At: d.Deadline.UTC()}
		}
		if buf := s.Signals[d.Node]; len(buf) > 0 {
			s.dropTimers(d.Node)
			data := buf[0]
			if len(buf) == 1 {
				delete(s.Signals, d.Node)
			} else {
				s.Signals[d.Node] = buf[1:]
			}
			s.finish(d.Node, n, nil, NodeSucceeded, data, nil, at)
		}
	}
}

// current returns the node if ref and attempt name its current attempt and
// it has not finished yet.
func (s *State) current(ref events.NodeRef, attempt int) *NodeState {
	n := s.Nodes[ref.Node]
	if n == nil || n.Iteration != ref.Iteration {
		return nil
	}
	if ref.Item != nil {
		it := item(n, *ref.Item)
		if it == nil || it.Attempt != attempt || !it.Status.Active() {
			return nil
		}
		return n
	}
	if n.Attempt != attempt || !n.Status.Active() {
		return nil
	}
	return n
}

func (s *State) invoking(d *events.NodeInvokingData, at time.Time) {
	n := s.Nodes[d.Node]
	if n != nil && n.Iteration == d.Iteration {
		n.Executions++
		s.Stats.Executions++
	}
	if n = s.current(d.NodeRef, d.Attempt); n == nil {
		return
	}
	n.Worker = d.Worker
	if d.Item != nil {
		item(n, *d.Item).Status = NodeRunning
		if n.StartedAt == nil {
			n.StartedAt = &at
		}
		return
	}
	n.Status, n.StartedAt = NodeRunning, &at
}

func (s *State) invoked(d *events.NodeInvokedData, at time.Time) {
	n := s.current(d.NodeRef, d.Attempt)
	if n == nil && d.Fallback {
		// The fallback stands in for an attempt that failed for good.
		if m := s.Nodes[d.Node]; m != nil && m.Iteration == d.Iteration && m.Attempt == d.Attempt && m.Status == NodeFailed && d.Item == nil {
			n = m
		}
	}
	if n == nil {
		return // a late or duplicate outcome: the first one stands
	}
	n.Actions = d.Actions
	for k, v := range d.Updates {
		s.update(k, v)
	}
	n.Worker = d.Worker
	n.Fallback = d.Fallback
	s.finish(d.Node, n, d.Item, NodeSucceeded, d.Output, nil, at)
}

func (s *State) failed(d *events.NodeFailedData, at time.Time) {
	n := s.current(d.NodeRef, d.Attempt)
	if n == nil {
		return
	}
	s.Stats.Failures++
	f := d.Error
	s.finish(d.Node, n, d.Item, NodeFailed, nil, &f, at)
}

// finish records the outcome of an activation, or of one item of a map
// activation; the map node itself finishes when its last item does: it
// succeeds with the items' outputs in item order, or fails with the first
// failed item's error.
func (s *State) finish(id string, n *NodeState, itemIdx *int, status NodeStatus, out json.RawMessage, f *events.Failure, at time.Time) {
	if itemIdx != nil {
		it := item(n, *itemIdx)
		if it == nil {
			return
		}
		it.Status, it.Output, it.Error = status, out, f
		outs := make([]json.RawMessage, len(n.Items))
		for i, it := range n.Items {
			switch it.Status {
			case NodeSucceeded:
				outs[i] = it.Output
				if outs[i] == nil {
					outs[i] = json.RawMessage("null")
				}
			case NodeFailed, NodeCancelled:
				if n.Error == nil {
					n.Error = it.Error
				}
			default:
				return // items still to finish
			}
		}
		if n.Error != nil {
			status, f, out = NodeFailed, n.Error, nil
		} else {
			status, out = NodeSucceeded, mustJSON(outs)
		}
	}
	n.Status, n.Output, n.Error, n.EndedAt = status, out, f, &at
	if status == NodeSucceeded {
		n.WaitingFor = ""
		if key := s.Config.OutputAs[id]; key != "" && out != nil {
			if s.Artifacts == nil {
				s.Artifacts = map[string]json.RawMessage{}
			}
			s.Artifacts[key] = out
		}
	}
}

// DeadlineTimerID is the id of the durable timer that ends a human node
// activation's wait. The node-waiting event that sets the deadline records
// the timer under this id, so a state folded afresh (after a restart) knows
// it as well as the state the deadline was decided in.
func DeadlineTimerID(ref events.NodeRef) string {
	return "deadline-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
}

// dropTimers removes the pending timers of a node.
func (s *State) dropTimers(node string) {
	for id, t := range s.Timers {
		if t.Ref.Node == node {
			delete(s.Timers, id)
		}
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

func item(n *NodeState, i int) *ItemState {
	if i < 0 || i >= len(n.Items) {
		return nil
	}
	return n.Items[i]
}

func setStatus(n *NodeState, itemIdx *int, st NodeStatus) {
	if itemIdx != nil {
		if it := item(n, *itemIdx); it != nil {
			it.Status = st
		}
		return
	}
	n.Status = st
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("projection: " + err.Error())
	}
	return b
}
