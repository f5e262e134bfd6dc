package flow

import (
	"context"
	"fmt"
	"time"
)

// Map items' turns. A node's attempt whose turn is later records its
// wait in its run's log (a node.waiting for "rate" and its timer), so its
// turn is taken once. A map item has no wait of its own in the log (the
// node's state is one for all its items), so the key's entry remembers
// the later turns of items by holder (rateEntry.Turns): an item that asks
// again before its turn is given the same turn, and the first ask at or
// after it is granted and forgets it, all in the key's compare-and-set.
// Asking again after that (a decision thrown away and made again) takes
// a fresh turn, which spends the rate and never exceeds it, as a node's
// attempt asking again does. The turns left by items that never asked
// again (their run ended) are dropped by the next write of the key after
// Grace, and with the key when it is idle (Sweep), so the entry holds at
// most the units queued (MaxWaiters plus the rate) and those of the last
// Grace.

// ReserveItem is Reserve for a map item's attempt h, remembering a later
// turn for h: it returns the turn, the zero time when it is now, the turn
// remembered (not after asked) when it came; fresh says the turn was
// taken by this call (the caller then arranges to ask again at it).
func (l *Limiter) ReserveItem(ctx context.Context, s RateSpec, h Holder, units int, asked time.Time) (turn time.Time, fresh bool, err error) {
	if s.Rate < 1 || s.Per <= 0 || units < 1 {
		return time.Time{}, false, fmt.Errorf("rate limit %q: %d units of %d per %s", s.Limit, units, s.Rate, s.Per)
	}
	id := h.ID()
	var at int64
	err = l.changeRate(ctx, s, func(e *rateEntry, now int64) (bool, error) {
		if !asked.IsZero() {
			now = asked.UnixNano()
		}
		pruned := e.pruneTurns(now - Grace.Nanoseconds())
		if t, ok := e.Turns[id]; ok {
			fresh = false
			if t > now {
				at = t
				return pruned, nil
			}
			at = t // come: granted (a time not after asked), forgotten
			delete(e.Turns, id)
			return true, nil
		}
		var err error
		fresh = true
		if at, err = e.take(s, units, now); err != nil || at == 0 {
			return err == nil, err
		}
		if e.Turns == nil {
			e.Turns = map[string]int64{}
		}
		e.Turns[id] = at
		return true, nil
	})
	if err != nil || at == 0 {
		return time.Time{}, fresh, err
	}
	// A turn that came is returned as it was given, for the log.
	return time.Unix(0, at).UTC(), fresh, nil
}

// pruneTurns drops the remembered turns before cutoff and reports whether
// it dropped any.
func (e *rateEntry) pruneTurns(cutoff int64) bool {
	n := len(e.Turns)
	for id, t := range e.Turns {
		if t < cutoff {
			delete(e.Turns, id)
		}
	}
	if len(e.Turns) == 0 {
		e.Turns = nil
	}
	return len(e.Turns) != n
}
