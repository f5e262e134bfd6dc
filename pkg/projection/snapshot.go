package projection

import (
	"encoding/json"
	"fmt"

	"github.com/weft-dev/weft/pkg/events"
)

// Snapshot is a run's state at a point of its log, stored so that
// rebuilding the run folds only the events after it: Restore, then Resume
// with the events after Seq, gives the same state as folding the whole log.
// Snapshots are a cache: any of them may be lost or thrown away, and the log
// rebuilds the state without it.
type Snapshot struct {
	// Seq is the sequence of the last event folded into State.
	Seq uint64 `json:"seq"`
	// LastDecision is the sequence of the run's last decision at Seq (the
	// coordinator's optimistic-concurrency point), 0 for none.
	LastDecision uint64 `json:"lastDecision,omitempty"`
	// State is State.Marshal's JSON.
	State json.RawMessage `json:"state"`
}

// TakeSnapshot snapshots s, which must be a fold of the log's events (no
// decisions applied ahead of the log), as of its LastSeq.
func TakeSnapshot(s *State, lastDecision uint64) *Snapshot {
	return &Snapshot{Seq: s.LastSeq, LastDecision: lastDecision, State: s.Marshal()}
}

// Restore returns the snapshot's state.
func (sn *Snapshot) Restore() (*State, error) {
	s, err := Unmarshal(sn.State)
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot at %d: %w", sn.Seq, err)
	}
	if s.LastSeq != sn.Seq {
		return nil, fmt.Errorf("restoring snapshot: state is at %d, snapshot says %d", s.LastSeq, sn.Seq)
	}
	return s, nil
}

// Resume folds the tail of a log into s: the events after s.LastSeq, in
// order (events at or before it are passed over, as Apply does).
func Resume(s *State, tail []*events.Event) *State {
	for _, e := range tail {
		_ = s.Apply(e)
	}
	return s
}
