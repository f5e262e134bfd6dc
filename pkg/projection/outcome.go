package projection

import (
	"encoding/json"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The appliers of what workers report about an attempt: invoking, the
// outcomes (invoked, failed, node-cancelled) and heartbeats, fenced to the
// live attempt and delivery (see the package doc).

// attempt is the part of a node, or of one item of a map node, that one
// attempt runs in.
type attempt struct {
	status      *NodeStatus
	attempt     int
	delivery    *int
	heartbeatAt **time.Time
	timedOut    *string
}

// attemptOf returns the node and the attempt slot ref names, or why there
// is none: the node is not at ref's activation, or has no such item.
func (s *State) attemptOf(ref events.NodeRef) (*NodeState, attempt, error) {
	n := s.Nodes[ref.Node]
	if n == nil || n.Iteration != ref.Iteration {
		return nil, attempt{}, stale("%s: not the node's current activation", ref.Key())
	}
	if ref.Item == nil {
		return n, attempt{&n.Status, n.Attempt, &n.Delivery, &n.HeartbeatAt, &n.TimedOut}, nil
	}
	it := item(n, *ref.Item)
	if it == nil {
		return nil, attempt{}, stale("%s: no such item", ref.Key())
	}
	return n, attempt{&it.Status, it.Attempt, &it.Delivery, &it.HeartbeatAt, &it.TimedOut}, nil
}

// live returns the node if an outcome of (ref, attempt) counts, else why
// it is stale. It counts when attempt is the current attempt of ref's
// activation (or item), which is ready or running. Whichever delivery's
// outcome lands first stands: the deliveries of one attempt run the same
// logical execution (one input, one idempotency key), and they share one
// work item, which the first delivery's worker acknowledges once its
// outcome is in, so a later delivery is not redelivered if its worker
// dies: fencing the earlier delivery out would leave the attempt running
// forever (the simulator showed it).
func (s *State) live(ref events.NodeRef, att, _ int) (*NodeState, attempt, error) {
	n, a, err := s.attemptOf(ref)
	if err != nil {
		return nil, a, err
	}
	if att != a.attempt {
		return nil, a, stale("attempt %d of %s: the live attempt is %d", att, ref.Key(), a.attempt)
	}
	if st := *a.status; st != NodeReady && st != NodeRunning {
		return nil, a, stale("attempt %d of %s is %s", att, ref.Key(), orIdle(st))
	}
	return n, a, nil
}

func (s *State) applyNodeInvoking(d *events.NodeInvokingData, at time.Time) error {
	if n := s.Nodes[d.Node]; n != nil && n.Iteration == d.Iteration {
		n.Executions++
		s.Stats.Executions++
	}
	n, a, err := s.live(d.NodeRef, d.Attempt, 0)
	if err != nil || d.Delivery != 0 && d.Delivery < *a.delivery {
		// An execution all the same, but not the live one.
		return nil
	}
	*a.status, *a.delivery = NodeRunning, max(*a.delivery, d.Delivery)
	n.Worker = d.Worker
	if d.Item == nil || n.StartedAt == nil {
		n.StartedAt = &at
	}
	s.armTimeouts(n, d.NodeRef, d.Attempt, at)
	return nil
}

func (s *State) applyNodeInvoked(d *events.NodeInvokedData, at time.Time) error {
	n, err := s.invokedTarget(d)
	if err != nil {
		return err
	}
	s.dropAttemptTimers(d.NodeRef, d.Attempt)
	n.Actions = d.Actions
	for k, v := range d.Updates {
		s.update(k, v)
	}
	n.Worker = d.Worker
	n.Fallback = d.Fallback
	s.finish(d.Node, n, d.Item, NodeSucceeded, d.Output, nil, at)
	return nil
}

// invokedTarget is live for a node-invoked, with the two outcomes the
// coordinator writes (delivery 0) for a node no worker runs: a router's,
// while it waits for it, and a fallback, which stands in for the last
// attempt that failed for good.
func (s *State) invokedTarget(d *events.NodeInvokedData) (*NodeState, error) {
	n, _, err := s.live(d.NodeRef, d.Attempt, d.Delivery)
	if err == nil || d.Delivery != 0 || d.Item != nil {
		return n, err
	}
	m := s.Nodes[d.Node]
	if m == nil || m.Iteration != d.Iteration || m.Attempt != d.Attempt {
		return nil, err
	}
	switch {
	case d.Fallback && m.Status == NodeFailed:
		return m, nil
	case !d.Fallback && m.Status == NodeWaiting && m.WaitingFor == "router":
		return m, nil
	}
	return nil, err
}

func (s *State) applyNodeFailed(d *events.NodeFailedData, at time.Time) error {
	n, _, err := s.live(d.NodeRef, d.Attempt, d.Delivery)
	if err != nil {
		return err
	}
	s.dropAttemptTimers(d.NodeRef, d.Attempt)
	s.Stats.Failures++
	f := d.Error
	s.finish(d.Node, n, d.Item, NodeFailed, nil, &f, at)
	return nil
}

func (s *State) applyNodeCancelled(d *events.NodeCancelledData, at time.Time) error {
	n, _, err := s.live(d.NodeRef, d.Attempt, d.Delivery)
	if err != nil {
		return err
	}
	s.dropAttemptTimers(d.NodeRef, d.Attempt)
	s.finish(d.Node, n, d.Item, NodeCancelled, nil, &events.Failure{Type: events.FailureCancelled, Message: d.Reason}, at)
	return nil
}

func (s *State) applyHeartbeat(d *events.HeartbeatData, at time.Time) error {
	n, a, err := s.live(d.NodeRef, d.Attempt, 0)
	if err != nil {
		return err
	}
	*a.heartbeatAt = &at
	s.armHeartbeat(n, d.NodeRef, d.Attempt, at)
	return nil
}

// applyNodeStep checks a node step (an agent's recorded model answer or
// tool result) against the live attempt and changes nothing: the step is
// the node's own record, read back by the worker that runs the node
// again, and seen in the run's timeline; the run's state is the node's
// outcome's to change. A step that awaits something ends the attempt and
// makes the activation wait (await.go).
func (s *State) applyNodeStep(d *events.NodeStepData) error {
	n, _, err := s.live(d.NodeRef, d.Attempt, 0)
	if err != nil || d.Await == nil {
		return err
	}
	return s.awaitStep(d, n)
}

// finish records the outcome of an activation, or of one item of a map
// activation; the map node itself finishes when its last item does.
func (s *State) finish(id string, n *NodeState, itemIdx *int, status NodeStatus, out json.RawMessage, f *events.Failure, at time.Time) {
	if itemIdx != nil {
		it := item(n, *itemIdx)
		if it == nil {
			return
		}
		it.Status, it.Output, it.Error = status, out, f
		var done bool
		if status, out, f, done = mapOutcome(n); !done {
			return
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

// mapOutcome is the outcome of a map node once all its items finished: it
// succeeds with the items' outputs in item order, or fails with the first
// failed item's error (recorded in n.Error as soon as an item fails).
func mapOutcome(n *NodeState) (NodeStatus, json.RawMessage, *events.Failure, bool) {
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
			return "", nil, nil, false // items still to finish
		}
	}
	if n.Error != nil {
		return NodeFailed, nil, n.Error, true
	}
	return NodeSucceeded, mustJSON(outs), nil, true
}

func item(n *NodeState, i int) *ItemState {
	if i < 0 || i >= len(n.Items) {
		return nil
	}
	return n.Items[i]
}

// fenceQueue passes over a worker's report whose queue is not its
// attempt's: a local attempt (its work item on events.LocalQueue, run by
// the coordinator) takes its reports from LocalQueue only, which no worker
// may write, and a LocalQueue report counts for a local attempt only. So a
// worker cannot answer for a local node, nor the coordinator's local
// executor for a worker's. Reports with no queue (built in memory, not read
// from the log) and reports of no live attempt are left to their applier.
func (s *State) fenceQueue(e *events.Event, p events.Payload) error {
	if e.IsDecision() || e.Queue == "" {
		return nil
	}
	var ref events.NodeRef
	switch d := p.(type) {
	case *events.NodeInvokingData:
		ref = d.NodeRef
	case *events.NodeInvokedData:
		ref = d.NodeRef
	case *events.NodeFailedData:
		ref = d.NodeRef
	case *events.NodeCancelledData:
		ref = d.NodeRef
	case *events.HeartbeatData:
		ref = d.NodeRef
	case *events.NodeStepData:
		ref = d.NodeRef
	default:
		return nil
	}
	n, _, err := s.attemptOf(ref)
	if err != nil {
		return nil
	}
	local := n.LocalAttempt
	if ref.Item != nil {
		local = n.Items[*ref.Item].LocalAttempt
	}
	if fromLocal := e.Queue == events.LocalQueue; fromLocal != local {
		if local {
			return stale("%s runs in the coordinator: a report from queue %q does not count", ref.Key(), e.Queue)
		}
		return stale("%s is not a local node's: a report from queue %q does not count", ref.Key(), e.Queue)
	}
	return nil
}
