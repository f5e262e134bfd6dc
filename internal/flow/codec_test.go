package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// memKV is a KV in memory, with the bucket's compare-and-set.
type memKV struct {
	mu   sync.Mutex
	vals map[string][]byte
	revs map[string]uint64
	rev  uint64
}

func (m *memKV) Get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vals[key], m.revs[key], nil
}

func (m *memKV) Put(_ context.Context, key string, value []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[key] != rev {
		return 0, ErrConflict
	}
	if value == nil {
		delete(m.vals, key)
		delete(m.revs, key)
		return 0, nil
	}
	m.rev++
	m.vals[key], m.revs[key] = value, m.rev
	return m.rev, nil
}

func (m *memKV) Keys(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.vals {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (m *memKV) After(_ context.Context, prefix string, rev uint64, n int) ([]Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Item
	for k, v := range m.vals {
		if strings.HasPrefix(k, prefix) && m.revs[k] > rev {
			out = append(out, Item{Key: k, Value: v, Rev: m.revs[k]})
		}
	}
	slices.SortFunc(out, func(a, b Item) int { return cmp.Compare(a.Rev, b.Rev) })
	return out[:min(n, len(out))], nil
}

func newMemKV() *memKV { return &memKV{vals: map[string][]byte{}, revs: map[string]uint64{}} }

// The stored form reads back as the entry written: every field, odd
// strings (quotes, control characters, non-ASCII) included, times to the
// millisecond; and it is less than half the size of the entry's JSON.
func TestEntryCodecRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	h := func(run string, i int, fair string) Holder {
		return Holder{Run: run, Node: "work", Iteration: 1, Attempt: 1 + i%3, Since: t0.Add(time.Duration(i) * time.Millisecond), Priority: i % 6, Fairness: fair}
	}
	e := &Entry{Limit: `g/"n"`, Key: "tenant\x00<é>", Max: 1000, Served: map[string]int{"a": 2, "ü\n": 1},
		Evicts: map[string]Holder{"r/START/1/1": h("old", 0, "")}}
	for i := range 1000 {
		e.Holders = append(e.Holders, h("01KB3Y8XW4G1R1J6N0Q0Y5K3A"+string(rune('A'+i%26)), i, []string{"", "a", "ü\n"}[i%3]))
	}
	e.Holders[7].By, e.Holders[8].By = "r/x/1/2", "r/y.3/1/1"
	e.Waiters = []Holder{h("w1", 2000, "a"), h("w2", 2001, "")}
	b := encodeEntry(e)
	got, err := decodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bare(got), bare(e)) {
		t.Fatalf("read back %+v\nwant %+v", got, e)
	}
	if n := e.size(); len(b) > n {
		t.Fatalf("stored %d bytes, more than the bound %d", len(b), n)
	}
	old, _ := json.Marshal(e)
	if 2*len(b) > len(old) {
		t.Fatalf("stored %d bytes, the JSON is %d: want less than half", len(b), len(old))
	}
	t.Logf("1,000 holders: %d bytes stored, %d as JSON", len(b), len(old))
	// An entry an older version wrote (JSON) is read still.
	if got, err := decodeEntry(old); err != nil || !reflect.DeepEqual(bare(got), bare(e)) {
		t.Fatalf("JSON entry: %v", err)
	}
	// A broken one is an error, not an empty entry.
	if _, err := decodeEntry(b[:len(b)/2]); err == nil {
		t.Fatal("half an entry was read")
	}
}

// An attempt that would take a key's entry past MaxEntryBytes waits
// parked (park.go), and is moved in only when there is room; a fairness
// key is cut to MaxFairnessLen.
func TestEntrySizeIsBounded(t *testing.T) {
	ctx := context.Background()
	kv := newMemKV()
	l := New(kv, nil)
	s := Slot{Limit: "g/n", Key: "k", Max: 1}
	big := strings.Repeat("n", MaxEntryBytes/4)
	at := func(i int) Holder {
		return Holder{Run: "r" + string(rune('0'+i)), Node: big, Iteration: 1, Attempt: 1, Fairness: strings.Repeat("é", MaxFairnessLen)}
	}
	for i := range 4 {
		if g, err := l.Acquire(ctx, s, at(i)); err != nil || g.Granted != (i == 0) {
			t.Fatalf("attempt %d: %+v %v", i, g, err)
		}
	}
	es, err := l.Entries(ctx)
	if err != nil || len(es) != 1 || len(es[0].Holders)+len(es[0].Waiters) != 3 || es[0].Waiting() != 3 {
		t.Fatalf("entries %v %v", len(es), err)
	}
	// r3 is moved in once r0's release made room, and granted in turn.
	var order []string
	h := at(0)
	for {
		wake, err := l.Release(ctx, s, h)
		if err != nil {
			t.Fatal(err)
		}
		if b, _, _ := kv.Get(ctx, KVKey(s.Limit, s.Key)); len(b) > MaxEntryBytes {
			t.Fatalf("the entry is %d bytes", len(b))
		}
		if len(wake) == 0 {
			break
		}
		h = wake[0]
		order = append(order, h.Run)
	}
	if fmt.Sprint(order) != "[r1 r2 r3]" {
		t.Fatalf("granted %v, want [r1 r2 r3]", order)
	}
	if f := es[0].Holders[0].Fairness; len(f) > MaxFairnessLen || !strings.HasPrefix(f, "éé") || strings.ContainsRune(f, '\uFFFD') {
		t.Fatalf("fairness key stored as %q (%d bytes)", f, len(f))
	}
}

// The stored form against the JSON it replaced, for a key with 1,000
// holders (a limit that never binds at 1,000 runs): go test -run '^$'
// -bench Entry ./internal/flow/
func BenchmarkEntry(b *testing.B) {
	t0 := time.Now()
	e := &Entry{Limit: "bench-limited/work", Key: "k", Max: 1000}
	for i := range 1000 {
		e.Holders = append(e.Holders, Holder{Run: fmt.Sprintf("01KB3Y8XW4G1R1J6N0Q0Y5%04d", i), Node: "work", Iteration: 1, Attempt: 1, Since: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	stored := encodeEntry(e)
	old, _ := json.Marshal(e)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(stored)))
		for b.Loop() {
			encodeEntry(e)
		}
	})
	b.Run("encode-json", func(b *testing.B) {
		b.SetBytes(int64(len(old)))
		for b.Loop() {
			_, _ = json.Marshal(e)
		}
	})
	b.Run("encode-again", func(b *testing.B) {
		// The entry written again with one holder changed, as a commit
		// of the limiter writes it: the other holders' stored forms kept.
		c := e.clone()
		encodeEntry(c)
		for b.Loop() {
			c.Holders[len(c.Holders)-1].Attempt++
			encodeEntry(c)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			_, _ = decodeEntry(stored)
		}
	})
	b.Run("decode-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = decodeEntry(old)
		}
	})
}

// A hand-over's ranking of a key's waiters (Entry.next) with 8 holders
// and 1,900 waiters of two fairness keys, as in the bench's fairness row:
// go test -run '^$' -bench Next ./internal/flow/
func BenchmarkNext(b *testing.B) {
	e := &Entry{Limit: "bench-fair/work", Max: 8}
	for i := range 8 {
		e.Holders = append(e.Holders, Holder{Run: fmt.Sprintf("h%04d", i), Node: "work", Iteration: 1, Attempt: 1, Fairness: "big"})
	}
	for i := range 1900 {
		f := "big"
		if i%190 == 0 {
			f = "small"
		}
		e.Waiters = append(e.Waiters, Holder{Run: fmt.Sprintf("w%04d", i), Node: "work", Iteration: 1, Attempt: 1, Fairness: f})
	}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				e.next(n)
			}
		})
	}
}

// bare is e without what encoding remembers for the next write (the
// holders' stored forms, the base): what a reader sees.
func bare(e *Entry) *Entry {
	c := e.clone()
	c.base, c.hasBase = 0, false
	c.Evicts = maps.Clone(e.Evicts)
	if len(c.Holders) == 0 {
		c.Holders = nil
	}
	if len(c.Waiters) == 0 {
		c.Waiters = nil
	}
	if len(c.Served) == 0 {
		c.Served = nil
	}
	if len(c.Evicts) == 0 {
		c.Evicts = nil
	}
	strip := func(hs []Holder) {
		for i := range hs {
			hs[i].wire = nil
		}
	}
	strip(c.Holders)
	strip(c.Waiters)
	for id, h := range c.Evicts {
		h.wire = nil
		c.Evicts[id] = h
	}
	return c
}

// An entry written again after changes reads back as it is, whatever
// changed: holders' stored forms are reused only for what did not change
// (a hand-over sets By on a waiter that had a stored form; the earliest
// holder leaves, or one earlier than every other comes, moving the base
// or not). Each write is checked against a fresh encoding of the same
// entry, byte for byte once reordered into the same base.
func TestEntryRewrittenAfterChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	e := &Entry{Limit: "g/n", Key: "k", Max: 8}
	n := 0
	add := func(at time.Duration) Holder {
		n++
		return Holder{Run: fmt.Sprint("r", n), Node: "work", Iteration: 1, Attempt: 1 + n%3, Since: t0.Add(at), Priority: n % 6, Fairness: []string{"", "a", "b"}[n%3]}
	}
	for i := range 20 {
		e.Waiters = append(e.Waiters, add(time.Duration(i)*time.Second))
	}
	for step := range 2000 {
		switch rng.IntN(6) {
		case 0, 1: // a waiter comes, mostly later, now and then earlier than all
			at := time.Duration(step) * time.Second
			if rng.IntN(10) == 0 {
				at = -time.Duration(rng.IntN(3600)) * time.Second
			}
			e.Waiters = append(e.Waiters, add(at))
		case 2: // a hand-over: the first waiter holds, handed by someone
			if len(e.Waiters) > 0 {
				w := e.Waiters[0]
				w.By = fmt.Sprint("r", rng.IntN(n)+1, "/work/1/1")
				e.Waiters = e.Waiters[1:]
				e.Holders = append(e.Holders, w)
			}
		case 3, 4: // a holder leaves, the earliest as often as not
			if len(e.Holders) > 0 {
				i := rng.IntN(len(e.Holders))
				e.Holders = append(e.Holders[:i:i], e.Holders[i+1:]...)
			}
		case 5: // an attempt's fields change in place
			if len(e.Waiters) > 0 {
				e.Waiters[rng.IntN(len(e.Waiters))].Attempt++
			}
		}
		b := encodeEntry(e)
		got, err := decodeEntry(b)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !reflect.DeepEqual(bare(got), bare(e)) {
			t.Fatalf("step %d: read back %+v\nwant %+v", step, bare(got), bare(e))
		}
		fresh := bare(e)
		fresh.base, fresh.hasBase = e.base, true
		if want := encodeEntry(fresh); string(b) != string(want) {
			t.Fatalf("step %d: stored\n%s\nfresh\n%s", step, b, want)
		}
		if len(b) > e.size() {
			t.Fatalf("step %d: stored %d bytes, more than the bound %d", step, len(b), e.size())
		}
		// The next commit changes the entry written in place (keyState).
	}
}

// clone is a deep copy of e (its maps and slices).
func (e *Entry) clone() *Entry {
	if e == nil {
		return nil
	}
	c := *e
	c.Holders = slices.Clone(e.Holders)
	c.Waiters = slices.Clone(e.Waiters)
	c.Served = maps.Clone(e.Served)
	return &c
}
