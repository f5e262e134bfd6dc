package projection

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/events"
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
// the same event id again is stale.
func (s *State) applySignalReceived(e *events.Event, d *events.SignalReceivedData, at time.Time) error {
	if e.ID != "" && s.SignalIDs[e.ID] {
		return stale("signal %s was applied before", e.ID)
	}
	n := s.Nodes[d.Node]
	if n != nil && n.Status == NodeWaiting && n.WaitingFor == "signal" {
		s.noteSignal(e.ID)
		s.dropTimers(d.Node)
		s.finish(d.Node, n, nil, NodeSucceeded, d.Data, nil, at)
		return nil
	}
	if err := s.canBuffer(d.Node); err != nil {
		return err
	}
	s.noteSignal(e.ID)
	if s.Signals == nil {
		s.Signals = map[string][]json.RawMessage{}
	}
	s.Signals[d.Node] = append(s.Signals[d.Node], d.Data)
	return nil
}

// AcceptsSignal reports whether a signal for node would be taken in now:
// the node waits for one, or the buffers have room. A signal it would not
// take is refused by the fold (ErrRefused) and only weighs on the run's
// history; clients check first and say so (the error is why not).
func (s *State) AcceptsSignal(node string) error {
	if n := s.Nodes[node]; n != nil && n.Status == NodeWaiting && n.WaitingFor == "signal" {
		return nil
	}
	return s.canBuffer(node)
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
