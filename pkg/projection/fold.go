package projection

import (
	"errors"
	"fmt"
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
// redelivered event harmless.
//
// Every other event moves LastSeq on, and Apply says what became of it:
// nil when it was applied; an error wrapping ErrRefused when it was not
// taken in (Stats.Refused); one wrapping ErrStale when it came too late to
// count (Stats.Stale); any other error when it cannot be applied at all
// (Stats.Rejected). In every case the fold moves past it.
func (s *State) Apply(e *events.Event) error {
	if e.Seq != 0 && e.Seq <= s.LastSeq {
		return nil
	}
	if e.Seq > s.LastSeq {
		s.LastSeq = e.Seq
	}
	var err error
	if e.Refused != nil {
		err = fmt.Errorf("%w: %w", ErrRefused, e.Refused)
	} else {
		err = s.apply(e)
	}
	s.count(e, err)
	return err
}

// count records what became of an event in Stats.
func (s *State) count(e *events.Event, err error) {
	if !e.IsDecision() {
		// A decision's payload may be completed after the coordinator
		// applied it ahead of the log (routings join the activation they
		// lead to): counting it would make the cache and the log differ.
		s.Stats.Bytes += int64(len(e.Data))
	}
	if errors.Is(err, ErrRefused) {
		s.Stats.Refused++
		return
	}
	s.Stats.Events++
	t := eventTime(e)
	s.UpdatedAt = &t
	switch {
	case err == nil:
	case errors.Is(err, ErrStale):
		s.Stats.Stale++
	default:
		s.Stats.Rejected++
	}
}

// eventTime is the time the fold records for an event: for a decision,
// the coordinator's (only the coordinator role may write decisions, and
// the coordinator applies its decisions before the stream has stamped
// them, so its cache and a fresh fold agree); for anything else, the
// stream's own timestamp when the event was read from the store (a writer
// cannot forge it), else the writer's (recorded histories).
//
// A local node's outcome (events.LocalQueue) counts as a decision here:
// only the coordinator role may write it, and the coordinator applies it
// to its cache before the stream stamps it.
func eventTime(e *events.Event) time.Time {
	if !e.Stored.IsZero() && !e.IsDecision() && e.Queue != events.LocalQueue {
		return e.Stored.UTC()
	}
	return e.Time.UTC()
}

// stale returns an error wrapping ErrStale that says why.
func stale(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrStale}, args...)...)
}

// apply checks an event against the run and hands it to its applier.
func (s *State) apply(e *events.Event) error {
	if s.RunID != "" && e.RunID != s.RunID {
		return fmt.Errorf("event %s of run %q applied to run %q", e.ID, e.RunID, s.RunID)
	}
	p, err := e.Payload()
	if errors.Is(err, events.ErrUnknownType) {
		// Written by a newer Weft: kept in the history, passed over.
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if err != nil {
		return err
	}
	if s.Status == RunPending && e.Type != events.RunStarted {
		return fmt.Errorf("%s before run-started", e.Type)
	}
	if s.Status.Ended() {
		return stale("the run already %s", s.Status)
	}
	if err := s.fenceQueue(e, p); err != nil {
		return err
	}
	return s.dispatch(e, p, eventTime(e))
}

// dispatch hands an event to the applier of its type: the catalogue, one
// case per event type, each a one-line call to the applier named after
// the event (its length and complexity are the catalogue's, not logic).
//
// Size: the catalogue, one case per event type.
func (s *State) dispatch(e *events.Event, p events.Payload, at time.Time) error {
	switch d := p.(type) {
	case *events.RunStartedData:
		return s.applyRunStarted(e, d, at)
	case *events.RunCompletedData:
		return s.applyRunCompleted(d, at)
	case *events.RunFailedData:
		return s.applyRunFailed(d, at)
	case *events.RunCancelRequestedData:
		return s.applyRunCancelRequested(d, at)
	case *events.RunCancelledData:
		return s.applyRunCancelled(d, at)
	case *events.NodeReadyData:
		return s.applyNodeReady(d, at)
	case *events.NodeInvokingData:
		return s.applyNodeInvoking(d, at)
	case *events.NodeInvokedData:
		return s.applyNodeInvoked(d, at)
	case *events.NodeFailedData:
		return s.applyNodeFailed(d, at)
	case *events.NodeCancelledData:
		return s.applyNodeCancelled(d, at)
	case *events.NodeSkippedData:
		return s.applyNodeSkipped(d, at)
	case *events.NodeWaitingData:
		return s.applyNodeWaiting(d, at)
	case *events.NodeRoutedData:
		return s.applyNodeRouted(d)
	case *events.HeartbeatData:
		return s.applyHeartbeat(d, at)
	case *events.NodeStepData:
		return s.applyNodeStep(d)
	case *events.RetryScheduledData:
		return s.applyRetryScheduled(d)
	case *events.TimerFiredData:
		return s.applyTimerFired(d, at)
	case *events.SignalReceivedData:
		return s.applySignalReceived(e, d, at)
	case *events.ChildRunStartedData:
		return s.applyChildRunStarted(d)
	case *events.ChildRunFinishedData:
		return s.applyChildRunFinished(d, at)
	}
	return nil
}
