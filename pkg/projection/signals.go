package projection

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// Limits on signals buffered for nodes that are not waiting for one. A
// signal over them is refused (ErrRefused, Stats.Refused): a client cannot
// grow a run's state without bound.
const (
	// MaxBufferedSignals is the most signals buffered for one node.
	MaxBufferedSignals = 100
	// MaxBufferedSignalsPerRun is the most signals buffered in a run.
	MaxBufferedSignalsPerRun = 1000
)

// applySignalReceived ends the wait of a node waiting for a signal, or
// buffers the signal for the node's next wait. A signal is applied once:
// the same event id again is stale. A signal the node would not take
// (AcceptsSignal) is refused: it stays in the log, counted in
// Stats.Refused, and the node keeps waiting.
func (s *State) applySignalReceived(e *events.Event, d *events.SignalReceivedData, at time.Time) error {
	if e.ID != "" && s.SignalIDs[e.ID] {
		if d.Update != "" {
			return stale("update %s was answered before", d.Update)
		}
		return stale("signal %s was applied before", e.ID)
	}
	if d.Update != "" {
		if err := s.AcceptsUpdate(d.Node, d.Iteration, d.Data); err != nil {
			// Its verdict is kept: the same update id again is stale.
			s.noteSignal(e.ID)
			return err
		}
	} else if err := s.AcceptsSignal(d.Node, d.Iteration, d.Data); err != nil {
		return err
	}
	n := s.Nodes[d.Node]
	if n != nil && n.Status == NodeWaiting && n.WaitingFor == "signal" {
		s.noteSignal(e.ID)
		s.dropTimers(d.Node)
		if n.Await != nil {
			s.resumeAwait(n, d.Data)
			return nil
		}
		s.finish(d.Node, n, nil, NodeSucceeded, d.Data, nil, at)
		return nil
	}
	s.noteSignal(e.ID)
	if s.Signals == nil {
		s.Signals = map[string][]json.RawMessage{}
	}
	s.Signals[d.Node] = append(s.Signals[d.Node], d.Data)
	return nil
}

// AcceptsSignal says why a signal for node with data would be refused by
// the fold now, or nil when it would be taken in. It is refused when the
// run's graph has no such node or the node is not a human node; when
// iteration is set (the activation the sender answers) and that
// activation does not wait for a signal; when the node does not accept
// the data (its outputSchema and config.checks, graph.CheckSignal); and,
// for a signal without an iteration for a node that does not wait, when
// the buffers are full. The error wraps ErrRefused; clients check first
// and say so.
func (s *State) AcceptsSignal(node string, iteration int, data json.RawMessage) error {
	def, err := s.nodeDef(node)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	n := s.Nodes[node]
	if n != nil && n.Await != nil {
		return s.acceptsApproval(node, n, iteration, data)
	}
	if def.Type != graph.TypeHuman {
		return fmt.Errorf("%w: node %q is a %q node, and only human nodes wait for signals", ErrRefused, node, def.Type)
	}
	waiting := n != nil && n.Status == NodeWaiting && n.WaitingFor == "signal"
	if iteration > 0 && (!waiting || n.Iteration != iteration) {
		return fmt.Errorf("%w: node %q is not waiting for a signal (%s)", ErrRefused, node, s.signalNotWaiting(node, iteration))
	}
	if err := graph.CheckSignal(def, data, s.VarsMap(), s.InvocationMap()); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if waiting {
		return nil
	}
	return s.canBuffer(node)
}

// AcceptsUpdate says why an update (a signal whose sender waits for the
// verdict: events.SignalReceivedData.Update) for activation iteration of
// node with data would be refused by the fold now, or nil when it would be
// taken in. Over AcceptsSignal's reasons, an update is refused when it
// names no activation (it is never buffered for a later wait) and when the
// node declares nothing it accepts (no outputSchema, no config.checks):
// an update's verdict must mean something. The error wraps ErrRefused.
func (s *State) AcceptsUpdate(node string, iteration int, data json.RawMessage) error {
	def, err := s.nodeDef(node)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if def.Type == graph.TypeHuman && !def.Accepts() {
		return fmt.Errorf("%w: node %q declares no input (no outputSchema, no config.checks), so an update to it cannot be validated: declare what it accepts, or send a signal", ErrRefused, node)
	}
	if iteration <= 0 && def.Type == graph.TypeHuman {
		n := s.Nodes[node]
		return fmt.Errorf("%w: node %q is not waiting for input (%s), and an update is only for a node that waits", ErrRefused, node, s.signalNotWaiting(node, max(1, iterationOf(n))))
	}
	return s.AcceptsSignal(node, iteration, data)
}

func iterationOf(n *NodeState) int {
	if n == nil {
		return 0
	}
	return n.Iteration
}

// signalNotWaiting says where a human node is, for a signal that came
// when it was not waiting for one.
func (s *State) signalNotWaiting(node string, iteration int) string {
	n := s.Nodes[node]
	switch {
	case n == nil || n.Status == NodeIdle:
		return "the run has not reached it"
	case n.Status == NodeWaiting && n.WaitingFor == "signal":
		return fmt.Sprintf("the signal answers its activation %d; activation %d waits now", iteration, n.Iteration)
	case n.Status.Active():
		return "it is " + string(n.Status)
	}
	return fmt.Sprintf("its activation %d %s", n.Iteration, n.Status)
}

// nodeDef returns the definition of a top-level node of the run's graph.
// The graph is decoded once per state.
func (s *State) nodeDef(node string) (*graph.Node, error) {
	if s.defs == nil || s.defsOf != s.GraphDigest {
		var def graph.Definition
		if err := json.Unmarshal(s.Graph, &def); err != nil {
			return nil, fmt.Errorf("the run's graph does not decode: %w", err)
		}
		s.defs = make(map[string]*graph.Node, len(def.Nodes))
		for i := range def.Nodes {
			s.defs[def.Nodes[i].ID] = &def.Nodes[i]
		}
		s.defsOf = s.GraphDigest
	}
	n := s.defs[node]
	if n == nil {
		return nil, fmt.Errorf("%w: graph %q has no node %q", graph.ErrUnknownNode, s.GraphName, node)
	}
	return n, nil
}

func (s *State) canBuffer(node string) error {
	if len(s.Signals[node]) >= MaxBufferedSignals {
		return fmt.Errorf("%w: %d signals are buffered for node %q already", ErrRefused, MaxBufferedSignals, node)
	}
	total := 0
	for _, buf := range s.Signals {
		total += len(buf)
	}
	if total >= MaxBufferedSignalsPerRun {
		return fmt.Errorf("%w: %d signals are buffered in the run already", ErrRefused, MaxBufferedSignalsPerRun)
	}
	return nil
}

func (s *State) noteSignal(id string) {
	if id == "" {
		return
	}
	if s.SignalIDs == nil {
		s.SignalIDs = map[string]bool{}
	}
	s.SignalIDs[id] = true
}

// takeSignal takes the oldest signal buffered for node, if any.
func (s *State) takeSignal(node string) (json.RawMessage, bool) {
	buf := s.Signals[node]
	if len(buf) == 0 {
		return nil, false
	}
	if len(buf) == 1 {
		delete(s.Signals, node)
	} else {
		s.Signals[node] = buf[1:]
	}
	return buf[0], true
}
