package flow

import (
	"context"
	"fmt"
	"slices"
)

// Run limits. A graph's limit on its runs in progress by key
// (graph.RunConcurrency) takes its slots in the same entries as a node's
// limit: the holder is the run's entry, node START, iteration 1,
// attempt 1 (RunHolder), held from before the run's first node until the
// run ends. Beside the default strategy (queue: Acquire), a run limit may
// refuse a run over the limit (cancel-newest) or cancel the oldest run
// holding the key and queue the new run first in line for the slot that
// frees (cancel-oldest); both are one compare-and-set on the key, like
// Acquire.

// RunNode is the node a run's own slot is held under: START, the run's
// entry, which no node of a graph is named.
const RunNode = "START"

// RunHolder is the holder of run's own slot.
func RunHolder(run string, priority int, fairness string) Holder {
	return Holder{Run: run, Node: RunNode, Iteration: 1, Attempt: 1, Priority: priority, Fairness: fairness}
}

// The strategies of a run limit (graph.RunQueue and the others).
const (
	StrategyQueue        = "queue"
	StrategyCancelNewest = "cancel-newest"
	StrategyCancelOldest = "cancel-oldest"
)

// RunGrant is the answer to AcquireRun.
type RunGrant struct {
	Grant
	// Full says, for cancel-newest, that the key is full: the run was not
	// queued, and is to be cancelled.
	Full bool
	// Evict is, for cancel-oldest, the holder the run takes the slot of:
	// the caller cancels its run (asking again gives the same holder
	// while the run waits, so a lost cancellation is asked for again).
	// Nil when the run holds its slot, or every holder is being evicted
	// for an earlier run already.
	Evict *Holder
}

// AcquireRun takes a slot of s for a run's holder h by strategy (""
// is queue, which is Acquire). Asking again changes nothing.
func (l *Limiter) AcquireRun(ctx context.Context, s Slot, h Holder, strategy string) (RunGrant, error) {
	switch strategy {
	case "", StrategyQueue:
		g, err := l.Acquire(ctx, s, h)
		return RunGrant{Grant: g}, err
	case StrategyCancelNewest, StrategyCancelOldest:
	default:
		return RunGrant{}, fmt.Errorf("limit %q: unknown strategy %q", s.Limit, strategy)
	}
	if s.Max < 1 || s.Max > MaxSlots {
		return RunGrant{}, fmt.Errorf("limit %q: max %d is outside 1..%d", s.Limit, s.Max, MaxSlots)
	}
	h = l.stamp(h)
	var g RunGrant
	err := l.change(ctx, s, func(e *Entry, _ bool) (bool, error) {
		g = RunGrant{}
		e.Max = s.Max
		if indexOf(e.Holders, h) >= 0 {
			g.Granted = true
			return false, nil
		}
		i := indexOf(e.Waiters, h)
		if fits(e, h, i) {
			e.grant(h, i)
			delete(e.Evicts, h.ID())
			g.Granted = true
			return true, nil
		}
		if strategy == StrategyCancelNewest {
			g.Full = true
			return false, nil
		}
		return evictOldest(e, h, i, &g)
	})
	return g, err
}

// evictOldest queues h (a waiter at index i, or -1) for the slot of the
// oldest holder that no earlier waiter evicts, and records that holder in
// g.Evict and e.Evicts; a waiter already queued gets its holder again.
func evictOldest(e *Entry, h Holder, i int, g *RunGrant) (bool, error) {
	g.Position = i
	if i >= 0 {
		if v, ok := e.Evicts[h.ID()]; ok && indexOf(e.Holders, v) >= 0 {
			g.Evict = &v
		}
		return false, nil
	}
	if len(e.Waiters) >= MaxWaiters {
		return false, fmt.Errorf("limit %q key %q: %d runs wait already: %w", e.Limit, e.Key, len(e.Waiters), ErrQueueFull)
	}
	if e.size()+h.wireSize() > MaxEntryBytes {
		return false, fmt.Errorf("limit %q key %q: the entry would pass %d bytes: %w", e.Limit, e.Key, MaxEntryBytes, ErrQueueFull)
	}
	taken := map[string]bool{}
	for id, v := range e.Evicts {
		if !slices.ContainsFunc(e.Waiters, func(w Holder) bool { return w.ID() == id }) {
			delete(e.Evicts, id) // its waiter was granted or left
			continue
		}
		taken[v.ID()] = true
	}
	var oldest *Holder
	for k := range e.Holders {
		v := e.Holders[k]
		if !taken[v.ID()] && (oldest == nil || v.Since.Before(oldest.Since)) {
			oldest = &v
		}
	}
	e.Waiters = append(e.Waiters, h)
	g.Position = len(e.Waiters) - 1
	if oldest != nil {
		if e.Evicts == nil {
			e.Evicts = map[string]Holder{}
		}
		e.Evicts[h.ID()] = *oldest
		g.Evict = oldest
	}
	return true, nil
}
