package flow

import (
	"context"
	"errors"
	"time"
)

// Liveness says whether an attempt still holds (holding) or waits for
// (!holding) a slot of s in its run's log.
type Liveness func(ctx context.Context, s Slot, h Holder, holding bool) (bool, error)

// Waker wakes a waiter: it makes the owner of the waiter's run decide it
// again.
type Waker func(ctx context.Context, s Slot, h Holder) error

// Sweep reclaims the slots and places of attempts that are no longer live
// and wakes the waiters that fit, for the runs mine accepts (the runs of
// the partitions the caller holds). Holders and waiters younger than
// Grace are left alone. It returns how many it reclaimed; an error ends
// the sweep early (the next one goes on).
func (l *Limiter) Sweep(ctx context.Context, mine func(run string) bool, live Liveness, wake Waker) (int, error) {
	if err := l.dropIdleRates(ctx); err != nil {
		return 0, err
	}
	es, err := l.scan(ctx, true)
	if err != nil {
		return 0, err
	}
	now := l.now()
	reclaimed := 0
	var errs []error
	for _, e := range es {
		n, err := l.sweepEntry(ctx, e, now, mine, live, wake)
		reclaimed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return reclaimed, errors.Join(errs...)
}

// sweepEntry sweeps one limit key's entry: deleted when idle; else its
// dead holders and waiters released, then the waiters that fit woken.
func (l *Limiter) sweepEntry(ctx context.Context, e revEntry, now time.Time, mine func(run string) bool, live Liveness, wake Waker) (int, error) {
	if len(e.Holders) == 0 && len(e.Waiters) == 0 {
		// Idle since the last change: deleted, at its revision.
		l.forget(e.key)
		if _, err := l.kv.Put(ctx, e.key, nil, e.rev); err != nil && !errors.Is(err, ErrConflict) {
			return 0, err
		}
		return 0, nil
	}
	reclaimed := 0
	var errs []error
	s := Slot{Limit: e.Limit, Key: e.Key, Max: e.Max}
	check := func(h Holder, holding bool) {
		if !mine(h.Run) || now.Sub(h.Since) < Grace {
			return
		}
		ok, err := live(ctx, s, h, holding)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if ok {
			return
		}
		if _, err := l.Release(ctx, s, h); err != nil {
			errs = append(errs, err)
			return
		}
		reclaimed++
	}
	for _, h := range e.Holders {
		check(h, true)
	}
	for _, h := range e.Waiters {
		check(h, false)
	}
	// Wake the waiters that fit, as read now.
	cur, _, err := l.get(ctx, e.key)
	if err != nil || cur == nil {
		return reclaimed, errors.Join(append(errs, err)...)
	}
	for _, h := range cur.next(cur.free()) {
		if mine(h.Run) {
			if err := wake(ctx, s, h); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return reclaimed, errors.Join(errs...)
}
