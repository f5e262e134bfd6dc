package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Changes of one concurrency key are written in batches (the package
// docs, "The fast path"): the changes this process's deciders ask for
// while a write of the key is in flight wait, and the next write applies
// them all, in the order they came, to one entry, with one
// compare-and-set. Each change's answer (granted, its place, the waiters
// to wake) is the one it gets in that entry, and is returned only once the
// entry was written at the revision it was read at (so was the key's
// current one).

// keyState is this process's side of one concurrency key: the changes
// waiting for the next write and the entry as this process last read or
// wrote it, at its revision.
type keyState struct {
	mu      sync.Mutex
	pending []*change
	writing bool // a caller is writing a batch: the others wait for it
	// cached is the entry at revision rev, as last written here; known
	// says it is there at all. It is the revision the next
	// compare-and-set is made at, never an answer: a write at a revision
	// that is no longer the key's fails, and the batch is done again from
	// a fresh read.
	cached *Entry
	rev    uint64
	known  bool
}

// change is one change of a key's entry: fn changes e (created: the key
// is absent), reports whether it changed it and leaves it as it was when
// it returns an error.
type change struct {
	fn   func(e *Entry, created bool) (bool, error)
	err  error
	done chan struct{} // closed once the change is written or failed
	lead chan struct{} // closed when this change's caller is to write the next batch
}

func (l *Limiter) keyState(key string) *keyState {
	ks, _ := l.slots.LoadOrStore(key, &keyState{})
	return ks.(*keyState)
}

// forget drops what this process remembers of a key's entry (the sweep
// deletes the key).
func (l *Limiter) forget(key string) {
	if v, ok := l.slots.Load(key); ok {
		v.(*keyState).remember(nil, 0, false)
	}
}

// change applies fn to s's entry, written with the changes of the same
// key that come while a write of it is in flight (see above). An entry
// left empty is kept (put).
func (l *Limiter) change(ctx context.Context, s Slot, fn func(e *Entry, created bool) (bool, error)) error {
	key := KVKey(s.Limit, s.Key)
	ks := l.keyState(key)
	c := &change{fn: fn, done: make(chan struct{}), lead: make(chan struct{})}
	ks.mu.Lock()
	ks.pending = append(ks.pending, c)
	leader := !ks.writing
	ks.writing = true
	ks.mu.Unlock()
	if !leader {
		// A write is in flight: this change goes in the next batch,
		// written by the caller whose change is first in it. The wait is
		// bounded by the writes' own (every KV call has a deadline).
		select {
		case <-c.done:
			return c.err
		case <-c.lead:
		}
	}
	l.writeBatch(ctx, key, s, ks)
	<-c.done
	return c.err
}

// writeBatch writes the changes pending for a key, then hands the writing
// on to the first caller of the changes that came meanwhile, if any.
func (l *Limiter) writeBatch(ctx context.Context, key string, s Slot, ks *keyState) {
	ks.mu.Lock()
	batch := ks.pending
	ks.pending = nil
	ks.mu.Unlock()
	moved, err := l.commit(ctx, key, s, ks, batch)
	for _, c := range batch {
		if err != nil {
			c.err = err
		}
		close(c.done)
	}
	ks.mu.Lock()
	if len(ks.pending) > 0 {
		close(ks.pending[0].lead)
	} else {
		ks.writing = false
	}
	ks.mu.Unlock()
	// The parked waiters the write moved in are deleted once it is
	// written (park.go); one left behind is before its line's After, so
	// never moved in again, and the sweep deletes it.
	for _, it := range moved {
		_, _ = l.kv.Put(ctx, it.Key, nil, it.Rev)
	}
}

// commit applies a batch to the key's entry and writes it with one
// compare-and-set, at the cached revision when there is one; on a
// conflict, from a fresh read, up to casRetries times. Every answer is
// confirmed by that write, a batch that changes nothing writing its entry
// unchanged: a read alone may be stale, since the bucket's gets are
// direct gets, which any replica answers, one that is behind included
// (seen in the chaos test: a grant read back as a wait). It returns the
// error of the batch as a whole; each change's own error is in the change.
//
// After the batch's changes, the lines of waiters that are short in the
// entry and have waiters parked are refilled (park.go); it returns the
// parked keys moved in, to be deleted once the entry is written.
func (l *Limiter) commit(ctx context.Context, key string, s Slot, ks *keyState, batch []*change) ([]Item, error) {
	listings := map[string]*listing{} // park.go
	for range casRetries {
		e, rev, err := l.current(ctx, key, ks)
		if err != nil {
			return nil, err
		}
		created := e == nil
		if created {
			e = &Entry{Limit: s.Limit, Key: s.Key, Max: s.Max}
		}
		e.slack, e.ended = l.slack, nil
		failed := 0
		for _, c := range batch {
			if _, c.err = c.fn(e, created); c.err != nil {
				failed++
			}
		}
		if created && failed == len(batch) {
			// Nothing to write: a key whose every change was refused
			// (ErrTooManyKeys) is not created empty.
			return nil, nil
		}
		// A line not refilled (the bucket did not answer) is at the
		// next write, or the sweep's.
		moved, _ := l.refill(ctx, s, e, listings)
		next, err := l.write(ctx, key, e, rev)
		if errors.Is(err, ErrConflict) {
			ks.remember(nil, 0, false)
			continue
		}
		if err != nil {
			ks.remember(nil, 0, false)
			return nil, fmt.Errorf("writing flow key %s (limit %q key %q): %w", key, s.Limit, s.Key, err)
		}
		ks.remember(e, next, true)
		return moved, nil
	}
	return nil, fmt.Errorf("flow key %s (limit %q key %q): %w", key, s.Limit, s.Key, ErrContended)
}

// current is the key's entry and its revision: the cached one when there
// is one, else read. The cached one is changed in place, not copied
// (a copy of a key with 2,000 waiters was a third of a commit's CPU): only
// the batch's writer uses it, one at a time, and a write that fails
// forgets it (commit), so a change not written is never read again.
func (l *Limiter) current(ctx context.Context, key string, ks *keyState) (*Entry, uint64, error) {
	ks.mu.Lock()
	cached, rev, known := ks.cached, ks.rev, ks.known
	ks.mu.Unlock()
	if known {
		return cached, rev, nil
	}
	return l.get(ctx, key)
}

// remember sets the cached entry (see keyState).
func (ks *keyState) remember(e *Entry, rev uint64, known bool) {
	ks.mu.Lock()
	ks.cached, ks.rev, ks.known = e, rev, known
	ks.mu.Unlock()
}
