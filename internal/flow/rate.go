package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Rate limits (GCRA, the generic cell rate algorithm): each (limit, key)
// is one key of the bucket, "r.<hash>.<hash>", holding one time, the
// theoretical arrival time (TAT) of the next unit, and the turns reserved
// and not yet come. A turn for u units at time now is reserved by one
// compare-and-set: tat' = max(TAT, now) + u·T, where T = per/limit, and
// the turn is at max(now, tat' − per): the first limit units after a quiet
// spell go at once, then one every T. So at most limit units start in any
// window of per plus the burst, and over a long time exactly limit per per.
// The value is that one time (a few bytes), so a hot key's compare-and-set
// stays cheap. A turn is not remembered per attempt: the wait the engine
// records in the log is the memory, and an attempt that asks again
// because its decision was not written (a conflict, a crash) takes a
// fresh turn, which spends the rate and never exceeds it. Backoff moves
// TAT so that no turn falls before a time: the whole key waits out an
// outside Retry-After.

// RateSpec names a rate limit's key and its rate.
type RateSpec struct {
	Limit string
	Key   string
	Rate  int
	Per   time.Duration
}

// rateEntry is the value of one rate key.
type rateEntry struct {
	Limit string `json:"limit"`
	Key   string `json:"key"`
	Rate  int    `json:"rate"`
	PerMs int64  `json:"perMs"`
	// TAT is the theoretical arrival time of the next unit (unix ns).
	TAT int64 `json:"tat"`
	// Turns are the later turns taken by map items and not yet come to
	// (holder ID → unix ns): their memory, which a node's attempt keeps
	// in its run's log instead (rateturns.go).
	Turns map[string]int64 `json:"turns,omitempty"`
	// Until is the last time an outside refusal (Backoff) holds the key
	// back to (unix ns), for 'weft queues'.
	Until int64 `json:"until,omitempty"`
}

// RateKVKey is the bucket key of a rate limit's key.
func RateKVKey(limit, key string) string {
	return "r." + hash(limit) + "." + hash(limit+"\x00"+key)
}

// Reserve takes a turn for units of s for h, asked at time asked (the
// decision's time, which the node-ready it leads to records: the log then
// shows the rate exactly; zero: the limiter's clock), and returns when the
// turn is: the zero time when it is now.
func (l *Limiter) Reserve(ctx context.Context, s RateSpec, h Holder, units int, asked time.Time) (time.Time, error) {
	if s.Rate < 1 || s.Per <= 0 || units < 1 {
		return time.Time{}, fmt.Errorf("rate limit %q: %d units of %d per %s", s.Limit, units, s.Rate, s.Per)
	}
	var at int64
	err := l.changeRate(ctx, s, func(e *rateEntry, now int64) (bool, error) {
		if !asked.IsZero() {
			now = asked.UnixNano()
		}
		var err error
		at, err = e.take(s, units, now)
		return err == nil, err
	})
	if at == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, at).UTC(), err
}

// take takes the next turn of e for units at time now (GCRA) and
// returns it, 0 when it is now; past MaxWaiters units queued it takes
// none (ErrQueueFull).
func (e *rateEntry) take(s RateSpec, units int, now int64) (int64, error) {
	per := s.Per.Nanoseconds()
	T := per / int64(s.Rate)
	tat := max(e.TAT, now) + int64(units)*T
	at := max(now, tat-per)
	if queued := (tat - now) / T; queued > int64(MaxWaiters)+int64(s.Rate) {
		return 0, fmt.Errorf("rate limit %q key %q: %d units wait for their turn already: %w", s.Limit, s.Key, queued, ErrQueueFull)
	}
	e.TAT = tat
	if at <= now {
		return 0, nil
	}
	return at, nil
}

// Backoff makes no turn of s come before until: an outside Retry-After
// holds the whole key back.
func (l *Limiter) Backoff(ctx context.Context, s RateSpec, until time.Time) error {
	return l.changeRate(ctx, s, func(e *rateEntry, _ int64) (bool, error) {
		per := s.Per.Nanoseconds()
		T := per / int64(s.Rate)
		tat := until.UnixNano() + per - T
		if tat <= e.TAT {
			return false, nil
		}
		e.TAT, e.Until = tat, until.UnixNano()
		return true, nil
	})
}

// RateState is a rate key's state, for 'weft queues'.
type RateState struct {
	Limit    string        `json:"limit"`
	Key      string        `json:"key"`
	Rate     int           `json:"rate"`
	Per      time.Duration `json:"per"`
	Waiting  int           `json:"waiting"` // units reserved whose turn is later, about
	NextTurn time.Time     `json:"nextTurn"`
	// Tokens are the units that may go at once now (GCRA's burst left,
	// 0 to Rate).
	Tokens int `json:"tokens"`
	// BackoffUntil is, while an outside refusal (a RateLimited failure's
	// Retry-After) holds the key back, the time it holds it back to.
	BackoffUntil *time.Time `json:"backoffUntil,omitempty"`
}

func (l *Limiter) changeRate(ctx context.Context, s RateSpec, fn func(e *rateEntry, now int64) (bool, error)) error {
	key := RateKVKey(s.Limit, s.Key)
	defer l.lock(key)()
	for range casRetries {
		b, rev, err := l.kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("reading flow key %s: %w", key, err)
		}
		e := &rateEntry{}
		if b != nil {
			if err := json.Unmarshal(b, e); err != nil {
				return fmt.Errorf("flow key %s: %w", key, err)
			}
		} else if n, err := l.kv.Keys(ctx, "r."+hash(s.Limit)+"."); err != nil {
			return err
		} else if len(n) >= MaxKeys {
			return fmt.Errorf("rate limit %q: %d keys are in use: %w", s.Limit, len(n), ErrTooManyKeys)
		}
		e.Limit, e.Key, e.Rate, e.PerMs = s.Limit, s.Key, s.Rate, s.Per.Milliseconds()
		changed, err := fn(e, l.now().UnixNano())
		if err != nil || !changed {
			return err
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = l.kv.Put(ctx, key, v, rev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("writing flow key %s (rate limit %q key %q): %w", key, s.Limit, s.Key, err)
		}
	}
	return fmt.Errorf("flow key %s (rate limit %q key %q): %w", key, s.Limit, s.Key, ErrContended)
}

// dropIdleRates deletes the rate keys whose next turn is due already and
// that have no turn reserved: such a key is the same as no key, and its
// place counts against MaxKeys.
func (l *Limiter) dropIdleRates(ctx context.Context) error {
	keys, err := l.kv.Keys(ctx, "r.")
	if err != nil {
		return err
	}
	now := l.now().UnixNano()
	for _, k := range keys {
		b, rev, err := l.kv.Get(ctx, k)
		if err != nil || b == nil {
			continue
		}
		var e rateEntry
		if json.Unmarshal(b, &e) != nil {
			continue
		}
		if e.TAT <= now {
			if _, err := l.kv.Put(ctx, k, nil, rev); err != nil && !errors.Is(err, ErrConflict) {
				return err
			}
		}
	}
	return nil
}

// Rates lists the rate keys in use.
func (l *Limiter) Rates(ctx context.Context) ([]RateState, error) {
	keys, err := l.kv.Keys(ctx, "r.")
	if err != nil {
		return nil, err
	}
	var out []RateState
	for _, k := range keys {
		b, _, err := l.kv.Get(ctx, k)
		if err != nil || b == nil {
			continue
		}
		var e rateEntry
		if json.Unmarshal(b, &e) != nil {
			continue
		}
		out = append(out, e.state(l.now()))
	}
	return out, nil
}

// state is e's state at now.
func (e *rateEntry) state(now time.Time) RateState {
	per := time.Duration(e.PerMs) * time.Millisecond
	next := time.Unix(0, e.TAT).Add(-per).UTC()
	rs := RateState{Limit: e.Limit, Key: e.Key, Rate: e.Rate, Per: per, NextTurn: next, Tokens: e.Rate}
	T := per / time.Duration(max(e.Rate, 1))
	if T <= 0 {
		return rs
	}
	if next.After(now) {
		rs.Waiting = int((next.Sub(now) + T - 1) / T) // units whose turn is later: the next one's, and one every T before it
	}
	if busy := time.Unix(0, e.TAT).Sub(now); busy > 0 {
		// The burst left: what the units not yet come leave of per.
		rs.Tokens = min(max(int((per-busy)/T), 0), e.Rate)
	}
	if until := time.Unix(0, e.Until).UTC(); e.Until != 0 && until.After(now) {
		rs.BackoffUntil = &until
	}
	return rs
}
