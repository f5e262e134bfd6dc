package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
	if !reflect.DeepEqual(got, e) {
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
	if got, err := decodeEntry(old); err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("JSON entry: %v", err)
	}
	// A broken one is an error, not an empty entry.
	if _, err := decodeEntry(b[:len(b)/2]); err == nil {
		t.Fatal("half an entry was read")
	}
}

// An attempt that would take a key's entry past MaxEntryBytes is refused
// as one past MaxWaiters is; a fairness key is cut to MaxFairnessLen.
func TestEntrySizeIsBounded(t *testing.T) {
	ctx := context.Background()
	l := New(newMemKV(), nil)
	s := Slot{Limit: "g/n", Key: "k", Max: 1}
	big := strings.Repeat("n", MaxEntryBytes/4)
	for i, want := range []error{nil, nil, nil, ErrQueueFull} {
		_, err := l.Acquire(ctx, s, Holder{Run: "r" + string(rune('0'+i)), Node: big, Iteration: 1, Attempt: 1, Fairness: strings.Repeat("é", MaxFairnessLen)})
		if !errors.Is(err, want) {
			t.Fatalf("attempt %d: %v, want %v", i, err, want)
		}
	}
	es, err := l.Entries(ctx)
	if err != nil || len(es) != 1 || len(es[0].Holders)+len(es[0].Waiters) != 3 {
		t.Fatalf("entries %v %v", len(es), err)
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
