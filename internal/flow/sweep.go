package flow

import (
	"context"
	"errors"
	"time"
)

// Life is what an attempt's run's log says of its slot.
type Life int

const (
	// Gone: the attempt neither holds nor waits for the slot (it ended,
	// or its run did): its slot or place is given back.
	Gone Life = iota
	// Waits: the attempt waits for the slot (it was not readied at that
	// attempt). A holder that waits was handed the slot and its wake was
	// lost or is late: the sweep wakes it.
	Waits
	// Holds: the attempt was readied (or is running) with the slot.
	Holds
)

// Liveness says what h's run's log says of its slot of s.
type Liveness func(ctx context.Context, s Slot, h Holder) (Life, error)

// Waker wakes a waiter: it makes the owner of the waiter's run decide it
// again. granted says the waiter holds the slot already (it was handed
// over, see Release).
type Waker func(ctx context.Context, s Slot, h Holder, granted bool) error

// Sweep reclaims the slots and places of attempts that are no longer live
// (handing them over to the waiters first in line, which it wakes, whoever
// owns them), wakes the holders of the runs mine accepts that still wait
// for the slot in their log (handed it, and not woken), and wakes the
// waiters that fit, for the runs mine accepts (the runs of the partitions
// the caller holds). Holders and waiters younger than Grace are left
// alone. It returns how many it reclaimed; an error ends
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
	reclaimed, err := l.sweepParked(ctx, e, now, mine, live) // park.go
	if len(e.Holders) == 0 && len(e.Waiters) == 0 && len(e.Parked) == 0 && err == nil && reclaimed == 0 {
		// Idle since the last change: deleted, at its revision.
		l.forget(e.key)
		if _, err := l.kv.Put(ctx, e.key, nil, e.rev); err != nil && !errors.Is(err, ErrConflict) {
			return 0, err
		}
		return 0, nil
	}
	errs := []error{err}
	s := Slot{Limit: e.Limit, Key: e.Key, Max: e.Max}
	check := func(h Holder, holding bool) {
		if !mine(h.Run) || now.Sub(h.Since) < Grace {
			return
		}
		life, err := live(ctx, s, h)
		switch {
		case err != nil:
			errs = append(errs, err)
			return
		case life == Waits && holding:
			// Handed the slot; its wake was lost (the coordinator that
			// handed it over stopped before waking it).
			if err := wake(ctx, s, h, true); err != nil {
				errs = append(errs, err)
			}
			return
		case life != Gone:
			return
		}
		handed, err := l.Release(ctx, s, h)
		if err != nil {
			errs = append(errs, err)
			return
		}
		reclaimed++
		errs = append(errs, wakeAll(ctx, s, handed, wake))
	}
	for _, h := range e.Holders {
		check(h, true)
	}
	for _, h := range e.Waiters {
		check(h, false)
	}
	// Slots free, as read now (none once every release handed its slot
	// over): handed over to the waiters first in line. Twice at most: a
	// write that hands over before it moves parked waiters in (park.go)
	// may leave slots free for the next.
	for range 2 {
		cur, _, err := l.get(ctx, e.key)
		if err != nil || cur == nil || cur.free() == 0 || cur.Waiting() == 0 {
			return reclaimed, errors.Join(append(errs, err)...)
		}
		handed, err := l.Release(ctx, s, Holder{})
		errs = append(errs, err, wakeAll(ctx, s, handed, wake))
	}
	return reclaimed, errors.Join(errs...)
}

// wakeAll wakes the waiters handed a slot, whoever owns their runs (a
// wake is an append to the run's log, which any coordinator may make).
func wakeAll(ctx context.Context, s Slot, handed []Holder, wake Waker) error {
	var errs []error
	for _, h := range handed {
		if err := wake(ctx, s, h, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
