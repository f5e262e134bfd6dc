package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
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
//   - A schedule the server acknowledged can still never reach the log.
//     NATS (server/scheduler.go, v2.15) marks a schedule it fires "in
//     flight" and fires it no more until its fired message is stored or
//     the stream's leader changes; the firing is one proposal by the
//     leader (processClusteredInboundMsg, node.Propose) that nothing
//     retries, so a firing refused or lost (a stream leader not ready, a
//     term that moved, a node killed) can leave the schedule in flight,
//     silently, for as long as that leader lasts.
//     And a run waiting on a timer has no event to come, so no fold
//     re-arms it. The safety net (sweepTimers): every coordinator notes,
//     for each run it armed timers of, the time of the earliest one
//     pending (timerWatch, bounded by WithTimerGrace's watched runs: past
//     it new runs go unwatched, counted in Stats), and, when it takes a
//     partition, every run of it with a schedule in the timers stream (a
//     schedule held in flight stays there), so that a timer armed by a
//     coordinator since killed is watched too (watchScheduled, as due
//     then: read once a grace later); every half grace it reads each run
//     whose noted timer is later than its time by more than the grace
//     from the log, and for each timer the log says is still pending and overdue
//     it appends the fired notice itself: the very event the relay
//     appends (same id, decider.TimerEvent), under the run's last
//     sequence (expectLast), so that it lands only on the history it was
//     read from. It is safe whoever holds the run's partition now (the
//     watch outlives the run cache and partition moves): firing twice is
//     harmless (the id is the timer's, the fold applies a pending timer
//     only), firing late is what the timer did anyway, and firing early
//     cannot happen (the timer was read pending and overdue from the very
//     history the notice is appended to). A run whose timers all fired or
//     that ended is dropped from the watch.

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
		if !ent.dropped && ent.unscheduled {
			// No timer was ever armed for it: nothing to purge, and
			// the timers stream spared two purges per run.
			ent.dropped = true
		}
		if !ent.dropped {
			if err := c.store.CancelSchedules(ctx, s.RunID); err != nil {
				return fmt.Errorf("dropping the timers of ended run %s: %w", s.RunID, err)
			}
			ent.armed, ent.dropped = nil, true
		}
		c.watch.forget(s.RunID)
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
		ent.unscheduled = false // before: a failed schedule may be in
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
	c.watch.note(s)
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

// DefaultTimerGrace is how much later than its time a pending timer may
// be before the safety net fires it from the log (WithTimerGrace). It is
// well above what a healthy relay takes (the server's 250ms tick, an
// append), and well below what a stuck run costs.
const DefaultTimerGrace = 30 * time.Second

// defaultMaxWatched bounds the runs the safety net watches: a run is a
// map entry (its id and a time), about 100 bytes.
const defaultMaxWatched = 100_000

// WithTimerGrace sets how much later than its time a pending timer may be
// before the coordinator fires it from the log (default DefaultTimerGrace;
// see timers.go), and, when watched > 0, how many runs it watches at most
// (default 100,000).
func WithTimerGrace(grace time.Duration, watched int) Option {
	return func(o *options) {
		if grace > 0 {
			o.timerGrace = grace
		}
		if watched > 0 {
			o.maxWatched = watched
		}
	}
}

// timerWatch holds, for each run a coordinator armed timers of, the time
// of its earliest pending timer: what the safety net checks.
type timerWatch struct {
	mu   sync.Mutex
	max  int
	runs map[string]time.Time
	// unwatched counts the runs not watched for want of room.
	unwatched int64
}

func newTimerWatch(max int) *timerWatch {
	return &timerWatch{max: max, runs: map[string]time.Time{}}
}

// note records s's earliest pending timer, or forgets s when none is.
func (w *timerWatch) note(s *projection.State) {
	earliest, ok := time.Time{}, false
	for _, t := range s.Timers {
		if !ok || t.At.Before(earliest) {
			earliest, ok = t.At, true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok {
		delete(w.runs, s.RunID)
		return
	}
	if _, known := w.runs[s.RunID]; !known && len(w.runs) >= w.max {
		w.unwatched++
		return
	}
	w.runs[s.RunID] = earliest
}

func (w *timerWatch) size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.runs))
}

func (w *timerWatch) missed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unwatched
}

// suspect watches run, unless watched already, as if its earliest timer
// were due at: for a run whose timers are known to exist, not when.
func (w *timerWatch) suspect(run string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, known := w.runs[run]; known {
		return
	}
	if len(w.runs) >= w.max {
		w.unwatched++
		return
	}
	w.runs[run] = at
}

func (w *timerWatch) forget(run string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, run)
}

// due lists the runs whose earliest timer is before cutoff.
func (w *timerWatch) due(cutoff time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for run, at := range w.runs {
		if at.Before(cutoff) {
			out = append(out, run)
		}
	}
	slices.Sort(out)
	return out
}

// sweepTimers runs the safety net (SweepTimers) every half grace until ctx
// ends.
func (c *Coordinator) sweepTimers(ctx context.Context) {
	t := time.NewTicker(c.opts.timerGrace / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.SweepTimers(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("checking for overdue timers", logattr.Error, err)
		}
	}
}

// SweepTimers fires, from the log, every timer of a watched run that is
// still pending longer than the grace after its time (see timers.go), and
// returns how many it fired. Run calls it every half grace.
func (c *Coordinator) SweepTimers(ctx context.Context) (int, error) {
	now := c.opts.now()
	fired := 0
	var errs []error
	for _, run := range c.watch.due(now.Add(-c.opts.timerGrace)) {
		n, err := c.fireOverdue(ctx, run, now)
		fired += n
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fired, errors.Join(errs...)
}

// fireOverdue reads run from the log and appends the fired notice of each
// of its timers pending longer than the grace after its time, each under
// the sequence the one before left (a run that moved on meanwhile is left
// to the next sweep). It notes what is left pending, or forgets the run.
func (c *Coordinator) fireOverdue(ctx context.Context, run string, now time.Time) (int, error) {
	s := &projection.State{}
	var last uint64
	err := eventlog.Each(ctx, c.store, run, 0, 0, func(ev *events.Event) error {
		_ = s.Apply(ev) // stale and refused events change nothing
		last = ev.Seq
		return nil
	})
	if errors.Is(err, events.ErrRunNotFound) || err == nil && (last == 0 || s.Status.Ended()) {
		c.watch.forget(run)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading run %s for its overdue timers: %w", run, err)
	}
	fired := 0
	for _, t := range pendingTimers(s) {
		if now.Sub(t.At) <= c.opts.timerGrace {
			break // by time: the rest are not overdue either
		}
		ev, err := decider.TimerEvent(run, t.ID, t.Timer)
		if err != nil {
			return fired, err
		}
		seq, err := c.store.Append(ctx, run, last, ev)
		if errors.Is(err, events.ErrConflict) {
			return fired, nil // the run moved on: the next sweep reads it again
		}
		if err != nil {
			return fired, fmt.Errorf("firing overdue timer %s of run %s: %w", t.ID, run, err)
		}
		c.log.Warn("a durable timer did not fire in time: fired it from the log", logattr.RunID, run, logattr.Timer, t.ID, logattr.Due, t.At)
		c.n.overdueFired.Add(1)
		fired++
		last = seq
		_ = s.Apply(ev)
	}
	c.watch.note(s)
	return fired, nil
}

// watchScheduled watches the runs of partition p that have a schedule in
// the timers stream, as if their timers were due now: a coordinator that
// takes a partition (a restart, a takeover) learns of the timers another
// armed, whose watch died with it or stays there. A schedule NATS holds in
// flight stays in the stream, so it is found; a run whose timers are far
// off is read once a grace later, and then noted for its real time.
func (c *Coordinator) watchScheduled(ctx context.Context, p int) error {
	ts, err := c.js.Stream(ctx, c.store.TimerStream())
	if err != nil {
		return err
	}
	// One listing of every pending timer's subject, sorted out here: one
	// request, where a filter per slot of the partition would be many.
	info, err := ts.Info(ctx, jetstream.WithSubjectFilter(eventlog.PendingTimers))
	if err != nil {
		return err
	}
	now := c.opts.now()
	for subj := range info.State.Subjects {
		if run, ok := eventlog.ScheduledRun(subj); ok && eventlog.PartitionOf(run, c.opts.partitions) == p {
			c.watch.suspect(run, now)
		}
	}
	return nil
}
