package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Parking keeps a key's waiters out of its entry past a line's first few
// (the package docs, "Parked waiters"): a key's entry holds, for each
// line of waiters (a priority and a fairness key), at most lineCap of
// them; the rest wait in keys of their own, "q.<limit>.<key>.<line>.
// <attempt>", each created once and deleted once, so a line's parked
// waiters are in the bucket's stream in the order they came. The entry
// counts them (Parked) and remembers the revision of the last one moved
// in; a write of the entry that finds a line short moves the next ones in
// (refill), in order.

// MaxParked bounds the waiters parked for one key (the sum of its lines'
// counts): past it, an attempt is refused as one past MaxWaiters was
// (ErrQueueFull).
const MaxParked = 100000

// Parked is one line's waiters kept out of the entry.
type Parked struct {
	Priority int    `json:"priority,omitempty"`
	Fairness string `json:"fairness,omitempty"`
	// Count is how many wait parked. It is counted up by a park after
	// its key was created and down by the refill that moves it in, or the
	// release of a parked attempt, so it is at least the number parked
	// while writes succeed; a sweep sets it to what it finds.
	Count int `json:"count"`
	// After is the revision of the last parked key moved in: the next
	// ones come after it.
	After uint64 `json:"after,omitempty"`
	// Ended are the attempts parked on the line that ended (by ID, their
	// keys' revisions): a refill whose listing was read before their
	// keys were deleted passes them over. Forgotten once After passes
	// them; at most maxEnded.
	Ended map[string]uint64 `json:"ended,omitempty"`
}

// maxEnded bounds a line's Ended. Past it, an ended attempt's key is only
// deleted: a listing read before cannot be told it ended, and moves it in
// (its run's owner gives the slot back when it is handed it, or the sweep).
const maxEnded = 256

// lineOf names h's line of waiters: its priority and fairness key.
func lineOf(h Holder) string { return strconv.Itoa(h.priority()) + "/" + h.Fairness }

// lineCap is how many waiters of one line the entry keeps: twice the
// key's max and some (Limiter.SetParkSlack), so a batch of releases (at
// most max slots given back) cannot empty a line that has waiters
// parked; at most MaxWaiters.
func (e *Entry) lineCap() int { return min(2*e.Max+e.slack, MaxWaiters) }

// DefaultParkSlack is how many waiters of a line an entry keeps past
// twice its max before parking them.
const DefaultParkSlack = 16

// SetParkSlack sets how many waiters of a line an entry keeps past twice
// its max (DefaultParkSlack): the simulator and tests set it low, so that
// a few waiters park.
func (l *Limiter) SetParkSlack(n int) { l.slack = max(n, 0) }

// lineLen counts the entry's waiters of h's line (asked of every
// attempt that is not granted at once: compared field by field, not by
// lineOf's string, which would be made for every waiter).
func (e *Entry) lineLen(h Holder) int {
	prio, n := h.priority(), 0
	for _, w := range e.Waiters {
		if w.Fairness == h.Fairness && w.priority() == prio {
			n++
		}
	}
	return n
}

// line is a holder of p's line (its priority and fairness key).
func (p *Parked) line() Holder { return Holder{Priority: p.Priority, Fairness: p.Fairness} }

// parked is the count of waiters parked for line (0 when none).
func (e *Entry) parked(line string) int {
	if p := e.Parked[line]; p != nil {
		return p.Count
	}
	return 0
}

// parkedTotal is the count of waiters parked for the key.
func (e *Entry) parkedTotal() int {
	n := 0
	for _, p := range e.Parked {
		n += p.Count
	}
	return n
}

// Waiting is how many attempts wait for a slot of the key: in the entry
// and parked.
func (e *Entry) Waiting() int { return len(e.Waiters) + e.parkedTotal() }

// mustPark reports whether h, neither holding nor waiting in e, waits
// parked: its line has waiters parked already (they are before it), or as
// many in the entry as it keeps.
func (e *Entry) mustPark(h Holder) bool {
	return e.parked(lineOf(h)) > 0 || e.lineLen(h) >= e.lineCap()
}

// parkKey is the bucket key of attempt h parked on line for s's key.
func parkKey(s Slot, line string, h Holder) string { return linePrefix(s, line) + hash(h.ID()) }

// linePrefix is the prefix of the keys of line's waiters parked for s's key.
func linePrefix(s Slot, line string) string {
	return "q." + hash(s.Limit) + "." + hash(s.Limit+"\x00"+s.Key) + "." + hash(line) + "."
}

// park keeps h out of the entry, in its own key, then counts it there:
// created first, so a refill that lists the line finds every waiter the
// entry counts (it may find one not counted yet: the count then comes
// after and is one too many, which the refill mends). A key already there
// is h asking again. g is h's answer (its place).
func (l *Limiter) park(ctx context.Context, s Slot, h Holder, g Grant) (Grant, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return Grant{}, err
	}
	key := parkKey(s, lineOf(h), h)
	rev, err := l.kv.Put(ctx, key, b, 0)
	again := errors.Is(err, ErrConflict)
	if err != nil && !again {
		// The key may be there all the same (the reply was lost): taken
		// away, so that a refill does not move in an attempt that, asked
		// again, was let in without parking, nor one that ended.
		if _, rev, gerr := l.kv.Get(ctx, key); gerr == nil && rev > 0 {
			_, _ = l.kv.Put(ctx, key, nil, rev)
		}
		return Grant{}, fmt.Errorf("parking %s for limit %q key %q: %w", h.ID(), s.Limit, s.Key, err)
	}
	line := lineOf(h)
	redundant := false
	err = l.change(ctx, s, func(e *Entry, created bool) (bool, error) {
		// h asked again while parked, and a refill moved its key in (and
		// deleted it) between this answer and the key's creation: h is in
		// the entry, and the key made now is one too many (moved in too
		// after h's end, it would be a waiter whose attempt is gone).
		redundant = true
		if indexOf(e.Holders, h) >= 0 {
			g = Grant{Granted: true}
			return false, nil
		}
		if i := indexOf(e.Waiters, h); i >= 0 {
			g = Grant{Position: i}
			return false, nil
		}
		redundant = false
		if e.Parked == nil {
			e.Parked = map[string]*Parked{}
		}
		p := e.Parked[line]
		if p == nil {
			p = &Parked{Priority: h.Priority, Fairness: h.Fairness}
			e.Parked[line] = p
		}
		switch {
		case !again:
			p.Count++
		case p.Count == 0:
			// Parked already, and maybe never counted (the count's write
			// was lost): counted, so that a refill lists the line (and
			// mends the count to what it finds).
			p.Count = 1
		}
		return true, nil
	})
	if err == nil && redundant && !again {
		_, err = l.kv.Put(ctx, key, nil, rev)
	}
	return g, err
}

// unpark takes h off the lines it may be parked on (its attempt ended
// while parked; a release names an attempt, not its line): on the line
// whose key of h is there, it is counted down and noted ended (so that a
// refill whose listing was read before passes it over), then its key is
// deleted. A refill may have moved h into the entry meanwhile (the
// release's own write, which listed the line after its change): it is
// taken off the waiters then, its count down already. It reports whether
// h was parked.
func (l *Limiter) unpark(ctx context.Context, s Slot, h Holder, lines []string) (bool, error) {
	for _, line := range lines {
		key := parkKey(s, line, h)
		b, rev, err := l.kv.Get(ctx, key)
		if err != nil {
			return false, err
		}
		if b == nil && !l.cachedWaiter(s, h) {
			continue
		}
		err = l.change(ctx, s, func(e *Entry, created bool) (bool, error) {
			if i := indexOf(e.Waiters, h); i >= 0 {
				e.Waiters = slices.Delete(e.Waiters, i, i+1)
				e.normalize()
				return true, nil
			}
			p := e.Parked[line]
			if b == nil || p == nil || rev <= p.After {
				return false, nil // moved in and given back already
			}
			if _, done := p.Ended[h.ID()]; !done {
				p.Count = max(p.Count-1, 0)
				if len(p.Ended) < maxEnded {
					if p.Ended == nil {
						p.Ended = map[string]uint64{}
					}
					p.Ended[h.ID()] = rev
				}
			}
			return true, nil
		})
		if err != nil {
			return false, err
		}
		if b != nil {
			_, _ = l.kv.Put(ctx, key, nil, rev) // else the refill or the sweep
		}
		return true, nil
	}
	return false, nil
}

// refill moves parked waiters into e, line by line, for the lines that
// have no more in the entry than a batch could hand over (max): up to the
// line's cap, in the order they were parked. Each batch's write refills
// after its changes, so a line with waiters parked starts every batch
// with more than max in the entry, and a batch's releases (at most max)
// leave it some. A line's listing is read once per batch (cache), not on
// every compare-and-set of it: read again on each, it widened the window
// another process's write falls in, and three processes on one key
// livelocked. A listing may thus be older than the entry it is applied
// to: what it lists at or before the line's After was moved in by
// another write, and an attempt that ended since is in the line's Ended.
// It returns the keys moved in, which the caller deletes once e is
// written (a key left behind is before the line's After, never listed
// again; the sweep deletes it), and the first error, the lines before it
// refilled.
func (l *Limiter) refill(ctx context.Context, s Slot, e *Entry, cache map[string]*listing) ([]Item, error) {
	var moved []Item
	for line, p := range e.Parked {
		have := e.lineLen(p.line())
		want := min(e.lineCap()-have, MaxWaiters-len(e.Waiters))
		if p.Count <= 0 || have > e.Max || want <= 0 {
			continue // none parked, enough in the entry, or no room
		}
		lst, fresh, err := l.listed(ctx, s, line, p, want, cache)
		if err != nil {
			return moved, err
		}
		n, full := e.moveIn(p, lst.items, &moved)
		for id, rev := range p.Ended {
			if rev <= p.After {
				delete(p.Ended, id)
			}
		}
		if fresh && lst.complete && !full {
			// Every one parked after After was listed: the count comes
			// back to what is there (a park counted twice, or counted
			// after its refill, is mended here).
			p.Count = 0
		} else {
			p.Count = max(p.Count-n, 1) // more may be there
		}
	}
	// A line with none parked keeps its After (keys moved in may be left
	// behind, and must not be listed again) until the sweep has deleted
	// its keys (sweepParked).
	return moved, nil
}

// moveIn moves the waiters of items after p's After into e, in order,
// while they fit, and adds their keys to moved. It returns how many of
// them it counts off the line (an ended one was counted off when it
// ended) and whether it stopped for room.
func (e *Entry) moveIn(p *Parked, items []Item, moved *[]Item) (int, bool) {
	n, size := 0, e.size()
	for _, it := range items {
		if it.Rev <= p.After {
			continue // moved in by another write
		}
		var h Holder
		bad := json.Unmarshal(it.Value, &h) != nil
		if !bad && size+h.wireSize() > MaxEntryBytes {
			return n, true // the rest wait for room
		}
		p.After = it.Rev
		*moved = append(*moved, it)
		if _, ended := p.Ended[h.ID()]; ended || bad {
			continue // counted down when it ended
		}
		n++
		if indexOf(e.Holders, h) < 0 && indexOf(e.Waiters, h) < 0 && indexOf(e.ended, h) < 0 {
			e.Waiters = append(e.Waiters, h)
			size += h.wireSize()
		}
	}
	return n, false
}

// listing is a line's parked waiters as listed after a revision.
type listing struct {
	after    uint64
	items    []Item
	complete bool // fewer than asked for: every one there was listed
}

// listed is line's listing for this batch: the one read already when it
// still has waiters after the line's After (or listed every one there),
// else read now from After (fresh).
func (l *Limiter) listed(ctx context.Context, s Slot, line string, p *Parked, want int, cache map[string]*listing) (*listing, bool, error) {
	if lst := cache[line]; lst != nil && lst.after <= p.After {
		if lst.complete || slices.ContainsFunc(lst.items, func(it Item) bool { return it.Rev > p.After }) {
			return lst, false, nil
		}
	}
	items, err := l.kv.After(ctx, linePrefix(s, line), p.After, want)
	if err != nil {
		return nil, false, fmt.Errorf("reading the parked waiters of limit %q key %q: %w", s.Limit, s.Key, err)
	}
	lst := &listing{after: p.After, items: items, complete: len(items) < want}
	cache[line] = lst
	return lst, true, nil
}

// Item is a key's value and revision (KV.After).
type Item struct {
	Key   string
	Value []byte
	Rev   uint64
}

// sweepParked sweeps the waiters parked for e's key. A key left behind
// by a refill (at or before its line's After: moved in) is deleted. Of
// the others, those of the runs mine accepts and older than Grace: a key
// whose attempt is no longer live is taken off its line (unpark); a live
// one on a line the entry does not count (a park whose count was lost) is
// counted again, so a refill finds it. A line with none parked and no key
// left is dropped. It returns how many it reclaimed.
func (l *Limiter) sweepParked(ctx context.Context, e revEntry, now time.Time, mine func(run string) bool, live Liveness) (int, error) {
	s := Slot{Limit: e.Limit, Key: e.Key, Max: e.Max}
	keys, err := l.kv.Keys(ctx, "q."+hash(s.Limit)+"."+hash(s.Limit+"\x00"+s.Key)+".")
	if err != nil {
		return 0, err
	}
	sw := &parkSweep{l: l, e: e, s: s, now: now, mine: mine, live: live, left: map[string]bool{}, stranded: map[string]*Parked{}}
	for _, k := range keys {
		sw.key(ctx, k)
	}
	sw.errs = append(sw.errs, sw.recount(ctx))
	return sw.reclaimed, errors.Join(sw.errs...)
}

// parkSweep is one sweep of a key's parked waiters (sweepParked).
type parkSweep struct {
	l         *Limiter
	e         revEntry
	s         Slot
	now       time.Time
	mine      func(run string) bool
	live      Liveness
	reclaimed int
	left      map[string]bool    // lines with a key left
	stranded  map[string]*Parked // lines to count again
	errs      []error
}

// key sweeps one parked key (sweepParked).
func (sw *parkSweep) key(ctx context.Context, k string) {
	b, rev, err := sw.l.kv.Get(ctx, k)
	var h Holder
	if err != nil || b == nil || json.Unmarshal(b, &h) != nil {
		sw.errs = append(sw.errs, err)
		return
	}
	line := lineOf(h)
	p := sw.e.Parked[line]
	if p != nil && rev <= p.After {
		// Moved in, left behind; while it is there, its line keeps its
		// After (a line dropped would list it again).
		if _, err := sw.l.kv.Put(ctx, k, nil, rev); err != nil {
			sw.left[line] = true
			sw.errs = append(sw.errs, err)
		}
		return
	}
	sw.left[line] = true
	if !sw.mine(h.Run) || sw.now.Sub(h.Since) < Grace {
		return
	}
	life, err := sw.live(ctx, sw.s, h)
	switch {
	case err != nil:
		sw.errs = append(sw.errs, err)
	case life == Gone:
		ok, err := sw.l.unpark(ctx, sw.s, h, []string{line})
		if ok {
			sw.reclaimed++
		}
		sw.errs = append(sw.errs, err)
	case p == nil || p.Count == 0:
		if sw.stranded[line] == nil {
			sw.stranded[line] = &Parked{Priority: h.Priority, Fairness: h.Fairness}
		}
		sw.stranded[line].Count++
	}
}

// recount writes what the sweep found: lines counted again, lines with
// none parked and no key left dropped.
func (sw *parkSweep) recount(ctx context.Context) error {
	drop := false
	for line, p := range sw.e.Parked {
		drop = drop || (p.Count == 0 && !sw.left[line])
	}
	if len(sw.stranded) == 0 && !drop {
		return nil
	}
	return sw.l.change(ctx, sw.s, func(e *Entry, _ bool) (bool, error) {
		for line, p := range e.Parked {
			if p.Count == 0 && !sw.left[line] {
				delete(e.Parked, line)
			}
		}
		for line, sp := range sw.stranded {
			if e.Parked == nil {
				e.Parked = map[string]*Parked{}
			}
			if p := e.Parked[line]; p == nil {
				e.Parked[line] = sp
			} else if p.Count == 0 {
				p.Count = sp.Count
			}
		}
		if len(e.Parked) == 0 {
			e.Parked = nil
		}
		return true, nil
	})
}

// cachedWaiter reports whether the entry of s's key as this process last
// wrote it has h among its waiters.
func (l *Limiter) cachedWaiter(s Slot, h Holder) bool {
	ks := l.keyState(KVKey(s.Limit, s.Key))
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.known && ks.cached != nil && indexOf(ks.cached.Waiters, h) >= 0
}
