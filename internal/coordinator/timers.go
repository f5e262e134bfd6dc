package coordinator

import (
	"context"
	"fmt"
	"sort"

	"github.com/weft-dev/weft/internal/engine"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/projection"
)

// Durable timers are correct by construction:
//
//   - A timer is scheduled only after the decision that asks for it (a
//     retry-scheduled, a node-waiting with a deadline) is in the log, so
//     no timer exists without its decision, and the fold always knows a
//     timer before it fires.
//   - A timer's schedule subject is named by the timer's id (derived from
//     the node, iteration, item and attempt), and a schedule published on
//     a subject replaces the one there: arming a timer twice leaves one
//     schedule. The fired event's id is derived from the timer id, and
//     the fold applies a timer that is pending only, so a timer that fires
//     twice changes the run once.
//   - Whenever a coordinator folds a run from the log (a restart, a
//     redelivery, a takeover), it re-arms every timer the state says is
//     pending (rearm): a coordinator that died between a decision and its
//     timer, or a schedule that failed, leaves no run waiting forever.
//   - When a run ends, its pending schedules are purged (dropTimers); one
//     that fires anyway into the ended run is passed over by the fold, and
//     purges what is left.

// schedule arms timers whose decisions are in the log.
func (c *Coordinator) schedule(ctx context.Context, timers []engine.Timer) error {
	for _, t := range timers {
		telemetry.Inject(ctx, t.Event)
		if err := c.store.Schedule(ctx, t.Event, t.ID, t.At); err != nil {
			return fmt.Errorf("arming timer %s: %w", t.ID, err)
		}
	}
	return nil
}

// rearm arms every timer the state says is pending.
func (c *Coordinator) rearm(ctx context.Context, s *projection.State) error {
	if len(s.Timers) == 0 || s.Status.Ended() {
		return nil
	}
	ids := make([]string, 0, len(s.Timers))
	for id := range s.Timers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	timers := make([]engine.Timer, 0, len(ids))
	for _, id := range ids {
		t := s.Timers[id]
		ev, err := engine.TimerEvent(s.RunID, id, t)
		if err != nil {
			return err
		}
		timers = append(timers, engine.Timer{ID: id, At: t.At, Event: ev})
	}
	return c.schedule(ctx, timers)
}

// dropTimers purges an ended run's pending schedules. A failure is logged:
// a timer left behind fires into the ended run, changes nothing there, and
// purges again.
func (c *Coordinator) dropTimers(ctx context.Context, run string) {
	if err := c.store.CancelSchedules(ctx, run); err != nil {
		c.log.Warn("dropping the timers of an ended run", logattr.RunID, run, logattr.Error, err)
	}
}
