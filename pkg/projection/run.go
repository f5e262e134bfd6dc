package projection

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The appliers of the run's own events.

func (s *State) applyRunStarted(e *events.Event, d *events.RunStartedData, at time.Time) error {
	if s.Status != RunPending {
		return fmt.Errorf("second run-started")
	}
	if len(d.State) > 0 {
		s.applyForkState(d.State, d.Fork, d.Graph)
	} else if d.Fork != nil {
		s.Fork = d.Fork
	}
	s.RunID, s.GraphName, s.GraphDigest, s.Graph = e.RunID, d.GraphName, d.GraphDigest, d.Graph
	s.Parent, s.Input, s.Invocation, s.Retention = d.Parent, d.Input, d.Invocation, d.Retention
	s.Nonce, s.StartSeq = d.Nonce, e.Seq
	s.Trigger = d.Trigger
	s.Chain = d.Chain
	s.Priority, s.FairnessKey = d.Priority, d.FairnessKey
	s.Status, s.StartedAt = RunRunning, &at
	if err := s.configure(d.Graph); err != nil {
		return err
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

// configure reads from the graph what the fold itself needs (runConfig).
func (s *State) configure(graph json.RawMessage) error {
	var g struct {
		State struct {
			Reducers map[string]string `json:"reducers"`
		} `json:"state"`
		Nodes []struct {
			ID       string `json:"id"`
			OutputAs string `json:"outputAs"`
		} `json:"nodes"`
	}
	if len(graph) > 0 {
		if err := json.Unmarshal(graph, &g); err != nil {
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
	return nil
}

func (s *State) applyRunCompleted(d *events.RunCompletedData, at time.Time) error {
	s.Output = d.Output
	s.ContinuedAs = d.ContinuedAs
	s.end(RunCompleted, at)
	return nil
}

func (s *State) applyRunFailed(d *events.RunFailedData, at time.Time) error {
	f := d.Error
	s.Error = &f
	s.end(RunFailed, at)
	return nil
}

func (s *State) applyRunCancelRequested(d *events.RunCancelRequestedData, at time.Time) error {
	if s.Cancel != nil {
		return stale("cancellation was requested before, by %s", s.Cancel.By)
	}
	s.Cancel = &CancelRequest{By: d.By, Reason: d.Reason, At: at, Terminate: d.Terminate}
	s.Status = RunCancelling
	return nil
}

func (s *State) applyRunCancelled(d *events.RunCancelledData, at time.Time) error {
	if s.Cancel == nil {
		s.Cancel = &CancelRequest{By: d.By, Reason: d.Reason, At: at, Terminate: d.Terminated}
	}
	for _, n := range s.Nodes {
		if n.Status.Active() {
			n.Status = NodeCancelled
		}
	}
	s.end(RunCancelled, at)
	return nil
}

// end ends the run: every timer still pending goes with it.
func (s *State) end(status RunStatus, at time.Time) {
	s.Status, s.EndedAt = status, &at
	s.Timers = nil
}
