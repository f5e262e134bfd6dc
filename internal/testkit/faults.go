package testkit

import (
	"context"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// FaultStore wraps a store and fails, delays or loses the acks of its
// writes on demand: the seam where faults are injected into the real
// coordinator and worker running against real JetStream. Each hook, when
// set, is called for every call of its kind; a nil hook injects nothing.
type FaultStore struct {
	eventlog.Engine

	mu sync.Mutex
	// BeforeAppend runs before an append; an error fails it unwritten.
	BeforeAppend func(run string, evs []*events.Event) error
	// AfterAppend runs after an append was written; an error is returned
	// as if the acknowledgement was lost: the events are in the log.
	AfterAppend func(run string, evs []*events.Event) error
	// BeforeSchedule runs before a timer is scheduled; an error fails it.
	BeforeSchedule func(ev *events.Event, timerID string) error
	// LoseSchedule runs before a timer is scheduled; when it says so the
	// schedule is acknowledged and not written: a timer the server took
	// and never fires (as NATS does with a schedule whose fired message
	// was lost while it was in flight; see coordinator's timers.go).
	LoseSchedule func(ev *events.Event, timerID string) bool
	// StallSchedule runs before a timer is scheduled; when it says so the
	// schedule is written for a time a century later: a timer that stays
	// in the timers stream and never fires (as a schedule NATS holds in
	// flight after its fired message was lost).
	StallSchedule func(ev *events.Event, timerID string) bool
	// Delay, if set, is slept before every append and schedule.
	Delay time.Duration
}

// NewFaultStore wraps st, a store events.Open made.
func NewFaultStore(st events.Store) *FaultStore { return &FaultStore{Engine: eventlog.Must(st)} }

// Unwrap is the wrapped store, whose reads the engine makes directly
// (eventlog.LastOn and the like).
func (f *FaultStore) Unwrap() events.Store { return f.Engine }

// Set changes the hooks under the lock the calls read them under.
func (f *FaultStore) Set(fn func(f *FaultStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *FaultStore) hooks() (before, after func(string, []*events.Event) error, sched func(*events.Event, string) error, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.BeforeAppend, f.AfterAppend, f.BeforeSchedule, f.Delay
}

// Append injects the append faults around the real append.
func (f *FaultStore) Append(ctx context.Context, run string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	return f.append(ctx, run, expectLast, evs, f.Engine.Append)
}

// AppendDecisions injects the append faults around the real append of
// decisions.
func (f *FaultStore) AppendDecisions(ctx context.Context, run string, expectLast uint64, evs ...*events.Event) (uint64, error) {
	return f.append(ctx, run, expectLast, evs, f.Engine.AppendDecisions)
}

// AppendStep injects the append faults around the real append of a
// local step (outcomes, then decisions): the hooks see all its events.
func (f *FaultStore) AppendStep(ctx context.Context, run string, expectLast uint64, outcomes, decisions []*events.Event) (uint64, error) {
	all := make([]*events.Event, 0, len(outcomes)+len(decisions))
	all = append(append(all, outcomes...), decisions...)
	return f.append(ctx, run, expectLast, all, func(ctx context.Context, run string, expectLast uint64, _ ...*events.Event) (uint64, error) {
		return f.Engine.AppendStep(ctx, run, expectLast, outcomes, decisions)
	})
}

func (f *FaultStore) append(ctx context.Context, run string, expectLast uint64, evs []*events.Event,
	do func(context.Context, string, uint64, ...*events.Event) (uint64, error)) (uint64, error) {
	before, after, _, delay := f.hooks()
	if delay > 0 {
		time.Sleep(delay)
	}
	if before != nil {
		if err := before(run, evs); err != nil {
			return 0, err
		}
	}
	seq, err := do(ctx, run, expectLast, evs...)
	if err == nil && after != nil {
		if aerr := after(run, evs); aerr != nil {
			return 0, aerr
		}
	}
	return seq, err
}

// Schedule injects the schedule faults around the real schedule.
func (f *FaultStore) Schedule(ctx context.Context, ev *events.Event, timerID string, at time.Time) error {
	_, _, sched, delay := f.hooks()
	if delay > 0 {
		time.Sleep(delay)
	}
	if sched != nil {
		if err := sched(ev, timerID); err != nil {
			return err
		}
	}
	f.mu.Lock()
	lose, stall := f.LoseSchedule, f.StallSchedule
	f.mu.Unlock()
	if lose != nil && lose(ev, timerID) {
		return nil
	}
	if stall != nil && stall(ev, timerID) {
		at = at.AddDate(100, 0, 0)
	}
	return f.Engine.Schedule(ctx, ev, timerID, at)
}
