package flow

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
)

// Bucket is the KV bucket of flow-control state.
const Bucket = "weft-flow"

// Bounds (see the package docs).
const (
	MaxSlots   = 1000
	MaxWaiters = 2000
	MaxKeys    = 10000
)

// Grace is how old a holder or waiter must be before a sweep may reclaim it.
const Grace = time.Minute

// SweepInterval is how often a coordinator sweeps the bucket.
const SweepInterval = 15 * time.Second

// casRetries bounds the compare-and-set loop of one change.
const casRetries = 64

// KVConfig is the bucket as a coordinator, or the admin's set-up, creates it.
func KVConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Weft flow control: concurrency slots and their waiters, by limit and key",
		History:     1,
		Replicas:    replicas,
	}
}

// Holder is an attempt holding, or waiting for, a slot.
type Holder struct {
	Run       string    `json:"run"`
	Node      string    `json:"node"`
	Iteration int       `json:"iter"`
	Attempt   int       `json:"attempt"`
	Since     time.Time `json:"since"`
	// Priority (1 to 5; 0 is the default, 3) and Fairness are the run's:
	// they rank the attempt among the key's waiters (Entry.next).
	Priority int    `json:"prio,omitempty"`
	Fairness string `json:"fair,omitempty"`
	// By is, for a holder handed its slot by a release (Release), the
	// holder whose release handed it over, by ID: that release asked
	// again wakes it again.
	By string `json:"by,omitempty"`

	// wire is the holder as encodeEntry last stored it: a key's entry is
	// written whole on every change, and most of it, its holders and
	// waiters, did not change. Shared by the copies of the holder (never
	// changed: a new one is made).
	wire *holderWire
}

// holderWire is a holder's stored form and what it says (as).
type holderWire struct {
	b  []byte
	as wireKey
}

// wireKey is what a holder's stored form says: its fields and the base
// its time is relative to.
type wireKey struct {
	run, node, fair, by string
	iter, attempt, prio int
	since, base         int64
}

func (h Holder) wireKey(base int64) wireKey {
	return wireKey{run: h.Run, node: h.Node, fair: h.Fairness, by: h.By, iter: h.Iteration, attempt: h.Attempt, prio: h.Priority, since: h.Since.UnixMilli(), base: base}
}

func (h Holder) priority() int {
	if h.Priority == 0 {
		return 3
	}
	return h.Priority
}

// ID names the attempt: run/node/iteration/attempt.
func (h Holder) ID() string {
	return h.Run + "/" + h.Node + "/" + strconv.Itoa(h.Iteration) + "/" + strconv.Itoa(h.Attempt)
}

func (h Holder) same(o Holder) bool {
	return h.Run == o.Run && h.Node == o.Node && h.Iteration == o.Iteration && h.Attempt == o.Attempt
}

// Entry is the value of one (limit, key).
type Entry struct {
	Limit   string   `json:"limit"`
	Key     string   `json:"key"`
	Max     int      `json:"max"`
	Holders []Holder `json:"holders,omitempty"`
	Waiters []Holder `json:"waiters,omitempty"`
	// Served counts the slots granted per fairness key, less the least
	// count among the keys still holding or waiting: the keys' turns.
	Served map[string]int `json:"served,omitempty"`
	// Evicts is, for a run limit with the cancel-oldest strategy, the
	// holder each waiter (by ID) has cancelled to take its slot
	// (runlimit.go).
	Evicts map[string]Holder `json:"evicts,omitempty"`
	// Parked is, by line of waiters (priority and fairness key), those
	// kept out of the entry, in keys of their own (park.go).
	Parked map[string]*Parked `json:"parked,omitempty"`

	// base is the time the stored holders' times are relative to (Unix
	// milliseconds), kept from one write to the next while it is no later
	// than any of theirs, so their stored forms stay as they were.
	base    int64
	hasBase bool
	// slack is the Limiter's (SetParkSlack), set as the entry is changed.
	slack int
	// ended are the attempts released by the batch being written that
	// were in neither list (maybe parked): its refill leaves them out.
	ended []Holder
}

// grant moves h (a waiter at index i, or -1) to the holders and counts
// the turn of its fairness key.
func (e *Entry) grant(h Holder, i int) {
	if i >= 0 {
		e.Waiters = slices.Delete(e.Waiters, i, i+1)
	}
	e.Holders = append(e.Holders, h)
	if e.Served == nil {
		e.Served = map[string]int{}
	}
	e.Served[h.Fairness]++
	e.normalize()
}

// normalize keeps Served small: keys with nothing held or waiting are
// forgotten, and the least count is taken off every count.
func (e *Entry) normalize() {
	present := map[string]bool{}
	for _, h := range e.Holders {
		present[h.Fairness] = true
	}
	for _, h := range e.Waiters {
		present[h.Fairness] = true
	}
	for _, p := range e.Parked {
		present[p.Fairness] = true
	}
	least := -1
	for k := range present {
		if _, ok := e.Served[k]; !ok {
			least = 0 // a key not served yet counts 0
		}
	}
	for k, n := range e.Served {
		if !present[k] {
			delete(e.Served, k)
			continue
		}
		if least < 0 || n < least {
			least = n
		}
	}
	for k := range e.Served {
		e.Served[k] -= least
	}
	if len(e.Served) == 0 {
		e.Served = nil
	}
}

func (e *Entry) free() int { return max(e.Max-len(e.Holders), 0) }

// next ranks the waiters and returns the first n: higher priorities
// first; within a priority, fairness keys share the slots (max-min fair
// share): the next slot goes to the key holding the fewest, counting the
// slots this ranking gives out, so a key that comes to a limit another
// key fills takes every slot given back until the two hold as many; keys
// holding as many take turns, counted by Served; within a key, first
// come first served. Without priorities or fairness keys this is the
// order they came in.
func (e *Entry) next(n int) []Holder {
	n = min(n, len(e.Waiters))
	if n <= 0 {
		return nil
	}
	out := make([]Holder, 0, n)
	for _, i := range pick(e.ranks(), n) {
		out = append(out, e.Waiters[i])
	}
	return out
}

// ranks ranks each waiter (Entry.next).
func (e *Entry) ranks() []ranked {
	held := map[string]int{}
	for _, h := range e.Holders {
		held[h.Fairness]++
	}
	// The waiters' lines (priority, fairness key) are few: each found by
	// a look at the last one's, then the map.
	type line struct {
		prio  int
		fair  string
		base  int // held, the share of its first waiter
		turn  int // Served, the turn of its first waiter
		count int
	}
	lines := map[[2]string]*line{}
	var last *line
	rs := make([]ranked, len(e.Waiters))
	for i, h := range e.Waiters {
		p := h.priority()
		if last == nil || last.prio != p || last.fair != h.Fairness {
			k := [2]string{strconv.Itoa(p), h.Fairness}
			if last = lines[k]; last == nil {
				last = &line{prio: p, fair: h.Fairness, base: held[h.Fairness], turn: e.Served[h.Fairness]}
				lines[k] = last
			}
		}
		rs[i] = ranked{prio: p, share: last.base + last.count, turn: last.turn + last.count}
		last.count++
	}
	return rs
}

// pick returns the indexes of the first n ranks, in order, the first of
// equals first (a stable sort's order).
func pick(rs []ranked, n int) []int {
	if n*8 > len(rs) {
		idx := make([]int, len(rs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return rs[a].cmp(rs[b]) })
		return idx[:n]
	}
	// A few of many (a hand-over is one or two): picked one by one.
	taken := make([]bool, len(rs))
	out := make([]int, 0, n)
	for range n {
		best := -1
		for i := range rs {
			if !taken[i] && (best < 0 || rs[i].cmp(rs[best]) < 0) {
				best = i
			}
		}
		taken[best] = true
		out = append(out, best)
	}
	return out
}

// ranked is a waiter's rank (Entry.next): its priority, its key's share
// of the slots were it let in, and its key's turn.
type ranked struct {
	prio, share, turn int
}

// cmp orders ranks: higher priority, then the smaller share, then the
// earlier turn.
func (a ranked) cmp(b ranked) int {
	if a.prio != b.prio {
		return b.prio - a.prio
	}
	if a.share != b.share {
		return a.share - b.share
	}
	return a.turn - b.turn
}

// fits reports whether h (a waiter at index i, or -1) may take a free
// slot of e now: one is free and h is among the first waiters to have
// them, itself included.
func fits(e *Entry, h Holder, i int) bool {
	free := e.free()
	if free == 0 {
		return false
	}
	line := e
	if i < 0 {
		line = &Entry{Holders: e.Holders, Waiters: append(slices.Clone(e.Waiters), h), Served: e.Served}
	}
	return indexOf(line.next(free), h) >= 0
}

func indexOf(hs []Holder, h Holder) int {
	return slices.IndexFunc(hs, h.same)
}

// Slot names what is limited: a limit, a key value and the limit's max.
type Slot struct {
	Limit string
	Key   string
	Max   int
}

// KVKey is the bucket key of a (limit, key): c.<limit hash>.<key hash>.
func KVKey(limit, key string) string {
	return limitPrefix(limit) + hash(limit+"\x00"+key)
}

func limitPrefix(limit string) string { return "c." + hash(limit) + "." }

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// Limiter takes and gives back slots in the bucket.
type Limiter struct {
	kv  KV
	now func() time.Time
	// locks serialise this process's changes of one rate key (by KV
	// key), so that its own deciders do not lose compare-and-sets to
	// each other; the bucket's revision is what keeps processes apart.
	locks sync.Map
	// slots are this process's concurrency keys (by KV key, *keyState):
	// the changes waiting to be written together (batch.go).
	slots sync.Map
	// slack is how many waiters of a line an entry keeps past twice its
	// max (park.go).
	slack int
	// counts are this process's counts of each limit's keys (by limit,
	// *keyCount: admitKey), and maxKeys the bound they are held to
	// (MaxKeys unless a test sets it).
	counts  sync.Map
	maxKeys int
}

// keyCount is what a process knows of how many keys a limit has: a
// listing's count, when it was made, and the keys created here since.
type keyCount struct {
	mu      sync.Mutex
	listed  int
	at      time.Time
	created int
}

// admitKey answers, for a key of limit about to be created, whether the
// limit has room for it (ErrTooManyKeys when not). The count is a
// listing of the limit's keys made at most SweepInterval ago plus the
// keys this process created since, so a process lists a limit's keys at
// most once a sweep interval, not at every new key; a limit that looks
// full is listed again before a key is refused. Coordinators together
// may go past maxKeys by what the others created since each one's
// listing, never further: a key per run cannot grow the bucket without
// bound.
func (l *Limiter) admitKey(ctx context.Context, limit string) error {
	v, _ := l.counts.LoadOrStore(limit, &keyCount{})
	kc := v.(*keyCount)
	kc.mu.Lock()
	defer kc.mu.Unlock()
	bound := cmp.Or(l.maxKeys, MaxKeys)
	now := l.now()
	if kc.at.IsZero() || now.Sub(kc.at) >= SweepInterval || kc.listed+kc.created >= bound {
		n, err := l.keys(ctx, limit)
		if err != nil {
			return err
		}
		kc.listed, kc.created, kc.at = n, 0, now
	}
	if n := kc.listed + kc.created; n >= bound {
		return fmt.Errorf("limit %q: %d keys are in use: %w", limit, n, ErrTooManyKeys)
	}
	kc.created++
	return nil
}

// lock takes this process's lock of a key and returns its unlock.
func (l *Limiter) lock(key string) func() {
	m, _ := l.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// KV is what a Limiter needs of a key-value bucket: the JetStream bucket
// (Open), or the simulator's model of it.
type KV interface {
	// Get returns a key's value and revision; nil and 0 when it is
	// absent or deleted.
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Put writes value at revision rev (0: the key must be absent), or
	// deletes the key at rev when value is nil, and returns the key's new
	// revision (0 after a delete); a revision that is not the key's last
	// is ErrConflict.
	Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// Keys lists the keys that start with prefix ("" for all).
	Keys(ctx context.Context, prefix string) ([]string, error)
	// After lists up to n keys that start with prefix, with revisions
	// after rev, in the order of their revisions, deleted keys left out.
	After(ctx context.Context, prefix string, rev uint64, n int) ([]Item, error)
}

// New returns a Limiter over kv, with now as its clock (nil: time.Now).
func New(kv KV, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{kv: kv, now: now, slack: DefaultParkSlack}
}

// Open opens the bucket, creating it when missing.
func Open(ctx context.Context, js jetstream.JetStream, replicas int, now func() time.Time) (*Limiter, error) {
	kv, _, err := setup.CreateKV(ctx, js, KVConfig(max(replicas, 1)))
	if err != nil {
		return nil, fmt.Errorf("opening the flow bucket %s: %w", Bucket, err)
	}
	return New(jsKV{kv, js.Conn()}, now), nil
}

// Grant is the answer to Acquire.
type Grant struct {
	Granted bool
	// Position is, when not granted, the attempt's place among the
	// key's waiters (0: the first).
	Position int
}

// stamp dates h (when it has no time yet) and cuts its fairness key to
// MaxFairnessLen bytes, at a character's start.
func (l *Limiter) stamp(h Holder) Holder {
	if h.Since.IsZero() {
		h.Since = l.now().UTC()
	}
	if len(h.Fairness) > MaxFairnessLen {
		n := MaxFairnessLen
		for n > 0 && !utf8.RuneStart(h.Fairness[n]) {
			n--
		}
		h.Fairness = h.Fairness[:n]
	}
	return h
}

// Acquire takes a slot of s for h, or queues h behind the key's waiters.
// Taking a slot h holds already, or asking again while waiting, changes
// nothing. Errors wrapping ErrQueueFull or ErrTooManyKeys are final for
// the attempt; any other is a failure to reach the bucket.
func (l *Limiter) Acquire(ctx context.Context, s Slot, h Holder) (Grant, error) {
	if s.Max < 1 || s.Max > MaxSlots {
		return Grant{}, fmt.Errorf("limit %q: max %d is outside 1..%d", s.Limit, s.Max, MaxSlots)
	}
	h = l.stamp(h)
	var g Grant
	var a answer
	err := l.change(ctx, s, func(e *Entry, created bool) (bool, error) {
		e.Max = s.Max
		if created {
			if err := l.admitKey(ctx, s.Limit); err != nil {
				return false, err
			}
		}
		var err error
		g, a, err = e.ask(h)
		return a == granted || a == queued, err
	})
	if err != nil || a != parks {
		return g, err
	}
	return l.park(ctx, s, h, g) // park.go
}

// answer is what asking for a slot did to the entry (Entry.ask).
type answer int

const (
	unchanged answer = iota // held already, or waiting at its place
	granted                 // a holder now
	queued                  // a waiter now, in the entry
	parks                   // to wait parked (park.go)
)

// ask is h's answer in e: it holds the slot already, takes a free one
// (Entry.next: first in line), waits at its place, joins the line in the
// entry, or parks: behind its line's parked waiters, past its line's cap,
// or past what the entry may hold (MaxWaiters, MaxEntryBytes). Past
// MaxParked it is refused (ErrQueueFull).
func (e *Entry) ask(h Holder) (Grant, answer, error) {
	if indexOf(e.Holders, h) >= 0 {
		return Grant{Granted: true}, unchanged, nil
	}
	if i := indexOf(e.Waiters, h); i >= 0 {
		if fits(e, h, i) {
			e.grant(h, i)
			return Grant{Granted: true}, granted, nil
		}
		return Grant{Position: i}, unchanged, nil
	}
	switch {
	case e.mustPark(h) || e.size()+h.wireSize() > MaxEntryBytes:
		return e.parkAnswer()
	case fits(e, h, -1):
		e.grant(h, -1)
		return Grant{Granted: true}, granted, nil
	case len(e.Waiters) >= MaxWaiters:
		return e.parkAnswer()
	}
	e.Waiters = append(e.Waiters, h)
	return Grant{Position: len(e.Waiters) - 1}, queued, nil
}

// parkAnswer is the answer of an attempt that parks, or is refused past
// MaxParked.
func (e *Entry) parkAnswer() (Grant, answer, error) {
	if e.parkedTotal() >= MaxParked {
		return Grant{}, unchanged, fmt.Errorf("limit %q key %q: %d attempts wait already: %w", e.Limit, e.Key, e.Waiting(), ErrQueueFull)
	}
	return Grant{Position: e.Waiting()}, parks, nil
}

// Release gives back h's slot of s (or takes h off the waiters) and, in
// the same compare-and-set, hands the slots now free to the waiters
// first in line (Entry.next): they are holders once it is written. It
// returns them, first first: the caller wakes each with its grant.
// Releasing what is not held changes nothing but the hand-over of slots
// free already; a release asked again (its wakes failed, or its
// coordinator stopped before them) returns the holders it handed slots to
// that still hold them, to be woken again.
func (l *Limiter) Release(ctx context.Context, s Slot, h Holder) ([]Holder, error) {
	var handed []Holder
	var lines []string // the lines h may be parked on, when it was in neither
	err := l.change(ctx, s, func(e *Entry, created bool) (bool, error) {
		handed, lines = nil, nil
		if created {
			return false, nil
		}
		changed := false
		if i := indexOf(e.Holders, h); i >= 0 {
			e.Holders, changed = slices.Delete(e.Holders, i, i+1), true
		}
		if i := indexOf(e.Waiters, h); i >= 0 {
			e.Waiters, changed = slices.Delete(e.Waiters, i, i+1), true
		}
		if len(e.Parked) > 0 && h.Run != "" {
			// Not moved in by this write's refill (park.go): a key of
			// h's left parked is passed over.
			e.ended = append(e.ended, h)
		}
		if !changed && h.Run != "" {
			for line := range e.Parked {
				lines = append(lines, line)
			}
		}
		if changed {
			e.normalize()
		}
		by := ""
		if h.Run != "" {
			by = h.ID()
		}
		handed = e.handOver(by)
		n := len(handed)
		if by != "" {
			handed = e.handedBy(by)
		}
		return changed || n > 0, nil
	})
	if err == nil && len(lines) > 0 {
		_, err = l.unpark(ctx, s, h, lines) // park.go
	}
	return handed, err
}

// handOver grants the free slots to the waiters first in line, handed
// over by holder by, and returns them.
func (e *Entry) handOver(by string) []Holder {
	next := e.next(e.free())
	for k, w := range next {
		i := indexOf(e.Waiters, w)
		w.By = by
		next[k] = w
		e.grant(w, i)
		delete(e.Evicts, w.ID())
	}
	if len(e.Evicts) == 0 {
		e.Evicts = nil
	}
	return next
}

// handedBy lists the holders that the release of by handed their slots.
func (e *Entry) handedBy(by string) []Holder {
	var out []Holder
	for _, h := range e.Holders {
		if h.By == by {
			out = append(out, h)
		}
	}
	return out
}

func (l *Limiter) get(ctx context.Context, key string) (*Entry, uint64, error) {
	b, rev, err := l.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading flow key %s: %w", key, err)
	}
	if b == nil {
		return nil, 0, nil
	}
	e, err := decodeEntry(b)
	if err != nil {
		return nil, 0, fmt.Errorf("flow key %s: %w", key, err)
	}
	return e, rev, nil
}

// write writes e at revision rev (0: the key must not exist) and
// returns its new revision. An entry left empty is written too (the batch
// is confirmed by it), and kept, so that the next attempt of the key does
// not create it again (and count the limit's keys): the sweep deletes it
// once idle.
func (l *Limiter) write(ctx context.Context, key string, e *Entry, rev uint64) (uint64, error) {
	b := encodeEntry(e)
	if len(b) > MaxEntryBytes {
		// Acquire refuses what would pass it (fits); this is the last guard.
		return 0, fmt.Errorf("limit %q key %q: the entry is %d bytes, more than %d: %w", e.Limit, e.Key, len(b), MaxEntryBytes, ErrQueueFull)
	}
	return l.kv.Put(ctx, key, b, rev)
}

// keys counts the keys of a limit in use.
func (l *Limiter) keys(ctx context.Context, limit string) (int, error) {
	ks, err := l.kv.Keys(ctx, limitPrefix(limit))
	if err != nil {
		return 0, fmt.Errorf("counting the keys of limit %q: %w", limit, err)
	}
	return len(ks), nil
}

// Entries lists every (limit, key) in use, with its revision, by limit then key.
func (l *Limiter) Entries(ctx context.Context) ([]Entry, error) {
	out, err := l.entries(ctx)
	if err != nil {
		return nil, err
	}
	es := make([]Entry, len(out))
	for i, r := range out {
		es[i] = r.Entry
	}
	return es, nil
}

type revEntry struct {
	Entry
	key string
	rev uint64
}

func (l *Limiter) entries(ctx context.Context) ([]revEntry, error) {
	return l.scan(ctx, false)
}

// scan lists the concurrency entries, the empty ones too when all.
func (l *Limiter) scan(ctx context.Context, all bool) ([]revEntry, error) {
	keys, err := l.kv.Keys(ctx, "c.")
	if err != nil {
		return nil, fmt.Errorf("listing the flow bucket: %w", err)
	}
	var out []revEntry
	for _, k := range keys {
		e, rev, err := l.get(ctx, k)
		if err != nil {
			return nil, err
		}
		if e != nil && (all || len(e.Holders) > 0 || e.Waiting() > 0) {
			out = append(out, revEntry{Entry: *e, key: k, rev: rev})
		}
	}
	slices.SortFunc(out, func(a, b revEntry) int {
		if a.Limit != b.Limit {
			if a.Limit < b.Limit {
				return -1
			}
			return 1
		}
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out, nil
}

// Lookup opens the bucket when it exists, for readers ('weft queues',
// the UI's workers page): ErrNoBucket when no coordinator has made it
// yet. A reader lists keys by direct gets, not with a KV watcher: the
// readers' roles create no consumer of the bucket (deploy/SECURITY.md).
func Lookup(ctx context.Context, js jetstream.JetStream) (*Limiter, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, ErrNoBucket
	}
	if err != nil {
		return nil, fmt.Errorf("opening the flow bucket %s: %w", Bucket, err)
	}
	return New(readerKV{jsKV{kv, js.Conn()}, js.Conn()}, nil), nil
}
