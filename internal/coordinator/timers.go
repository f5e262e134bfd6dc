package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/projection"
)

// Durable timers are correct by construction:
//
//   - A timer is pending when the fold says so (State.Timers): from the
//     decision that asks for it (a retry-scheduled, a node-waiting with a
//     deadline) or, for an attempt's timeouts, from the invoking or
//     heartbeat that (re)starts them. It is scheduled only after that
//     event is in the log, so no timer exists without its cause, and the
//     fold always knows a timer before it fires.
//   - A timer's schedule subject is named by the timer's id (derived from
//     the node, iteration, item and attempt), and a schedule published on
//     a subject replaces the one there: arming a timer twice leaves one
//     schedule. The fired event's id is derived from the timer id, and
//     the fold applies a timer that is pending only, so a timer that fires
//     twice changes the run once.
//   - Whenever a coordinator folds a run from the log (a restart, a
//     redelivery, a takeover), it re-arms every timer the state says is
//     pending (syncTimers): a coordinator that died between a decision and its
//     timer, or a schedule that failed, leaves no run waiting forever.
//   - When a run ends, its pending schedules are purged (syncTimers), and
//     a purge that fails leaves the event to be handled again; a timer
//     that fires anyway into the ended run is passed over by the fold.

// syncTimers arms every timer the run's state says is pending and this
// coordinator has not armed at that time yet: a timer the decision just
// appended asked for, a timeout an invoking or a heartbeat (re)started,
// and, for a run just folded from the log, all of them. Arming is after
// the events that ask for the timers are in the log. A failure leaves the
// event to be handled again, from a fresh fold, which re-arms everything.
func (c *Coordinator) syncTimers(ctx context.Context, ent *runEntry) error {
	s := ent.state
	if s.Status.Ended() {
		// Once per entry: the decision that ended the run, or the first
		// event this coordinator gets of a run that ended (a restart, a
		// purge that failed and left its event to come again).
		if !ent.dropped {
			if err := c.store.CancelSchedules(ctx, s.RunID); err != nil {
				return fmt.Errorf("dropping the timers of ended run %s: %w", s.RunID, err)
			}
			ent.armed, ent.dropped = nil, true
		}
		return nil
	}
	for _, t := range pendingTimers(s) {
		if at, ok := ent.armed[t.ID]; ok && at.Equal(t.At) {
			continue
		}
		ev, err := decider.TimerEvent(s.RunID, t.ID, t.Timer)
		if err != nil {
			return err
		}
		telemetry.Inject(ctx, ev)
		if err := c.store.Schedule(ctx, ev, t.ID, t.At); err != nil {
			return fmt.Errorf("arming timer %s: %w", t.ID, err)
		}
		if ent.armed == nil {
			ent.armed = map[string]time.Time{}
		}
		ent.armed[t.ID] = t.At
	}
	for id := range ent.armed {
		if _, ok := s.Timers[id]; !ok {
			delete(ent.armed, id)
		}
	}
	return nil
}

// timerRef is a pending timer with its id.
type timerRef struct {
	ID string
	projection.Timer
}

// pendingTimers lists s's pending timers, by time then id: what a
// coordinator loading the run re-arms.
func pendingTimers(s *projection.State) []timerRef {
	out := make([]timerRef, 0, len(s.Timers))
	for id, t := range s.Timers {
		out = append(out, timerRef{ID: id, Timer: t})
	}
	slices.SortFunc(out, func(a, b timerRef) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
