package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/testkit"
)

func open(t *testing.T, now func() time.Time) *flow.Limiter {
	t.Helper()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	l, err := flow.Open(t.Context(), js, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(run string, attempt int) flow.Holder {
	return flow.Holder{Run: run, Node: "n", Iteration: 1, Attempt: attempt}
}

func TestAcquireFIFOAndRelease(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	s := flow.Slot{Limit: "g/n", Key: "tenant-a", Max: 2}
	for i, want := range []bool{true, true, false, false} {
		g, err := l.Acquire(ctx, s, holder(fmt.Sprint("r", i), 1))
		if err != nil || g.Granted != want {
			t.Fatalf("acquire r%d: %+v %v, want granted %v", i, g, err, want)
		}
	}
	// Asking again changes nothing: r0 holds, r3 is second in line.
	if g, _ := l.Acquire(ctx, s, holder("r0", 1)); !g.Granted {
		t.Fatal("a holder asking again was refused")
	}
	if g, _ := l.Acquire(ctx, s, holder("r3", 1)); g.Granted || g.Position != 1 {
		t.Fatalf("r3: %+v, want waiting at 1", g)
	}
	// Another key is independent.
	if g, _ := l.Acquire(ctx, flow.Slot{Limit: "g/n", Key: "tenant-b", Max: 2}, holder("rb", 1)); !g.Granted {
		t.Fatal("another key was refused")
	}
	wake, err := l.Release(ctx, s, holder("r0", 1))
	if err != nil || len(wake) != 1 || wake[0].Run != "r2" {
		t.Fatalf("release: wake %+v %v, want r2", wake, err)
	}
	// r3 may not jump r2.
	if g, _ := l.Acquire(ctx, s, holder("r3", 1)); g.Granted {
		t.Fatal("r3 jumped the queue")
	}
	if g, _ := l.Acquire(ctx, s, holder("r2", 1)); !g.Granted {
		t.Fatal("r2, woken, was refused")
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		if _, err := l.Release(ctx, s, holder(r, 1)); err != nil {
			t.Fatal(err)
		}
	}
	es, err := l.Entries(ctx)
	if err != nil || len(es) != 1 || es[0].Key != "tenant-b" {
		t.Fatalf("entries %+v %v: the empty key should not be listed", es, err)
	}
}

// Many goroutines race for 3 slots: never more than 3 hold at once.
func TestAcquireRace(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	s := flow.Slot{Limit: "race", Max: 3}
	var holding, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			h := holder(fmt.Sprint("r", i), 1)
			for {
				g, err := l.Acquire(ctx, s, h)
				if err != nil {
					t.Error(err)
					return
				}
				if g.Granted {
					break
				}
				// Polls: a refused grant is retried, as a caller without a notification would.
				time.Sleep(5 * time.Millisecond)
			}
			n := holding.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			// Holds the slot a while so that holders overlap: the work the limit paces.
			time.Sleep(10 * time.Millisecond)
			holding.Add(-1)
			if _, err := l.Release(ctx, s, h); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak holders %d, want 1..3", p)
	}
}

func TestAcquireBadMax(t *testing.T) {
	l := open(t, nil)
	for _, m := range []int{0, -1, flow.MaxSlots + 1} {
		if _, err := l.Acquire(t.Context(), flow.Slot{Limit: "x", Max: m}, holder("r", 1)); err == nil {
			t.Errorf("max %d accepted", m)
		}
	}
}

func TestSweepReclaims(t *testing.T) {
	ctx := t.Context()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	l := open(t, now)
	s := flow.Slot{Limit: "sweep", Key: "k", Max: 1}
	for _, r := range []string{"dead", "alive", "other"} {
		if _, err := l.Acquire(ctx, s, holder(r, 1)); err != nil {
			t.Fatal(err)
		}
	}
	live := func(_ context.Context, _ flow.Slot, h flow.Holder) (flow.Life, error) {
		switch h.Run {
		case "dead":
			return flow.Gone, nil
		case "alive":
			return flow.Waits, nil
		}
		return flow.Holds, nil
	}
	var woken []string
	wake := func(_ context.Context, _ flow.Slot, h flow.Holder, granted bool) error {
		if !granted {
			t.Errorf("%s woken without its slot", h.Run)
		}
		woken = append(woken, h.Run)
		return nil
	}
	mine := func(run string) bool { return run != "other" }
	if n, err := l.Sweep(ctx, mine, live, wake); err != nil || n != 0 {
		t.Fatalf("young holders swept: %d %v", n, err)
	}
	clock.Add(int64(2 * flow.Grace))
	n, err := l.Sweep(ctx, mine, live, wake)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1 reclaimed", n, err)
	}
	if len(woken) != 1 || woken[0] != "alive" {
		t.Fatalf("woken %v, want [alive]", woken)
	}
	live = func(context.Context, flow.Slot, flow.Holder) (flow.Life, error) { return flow.Gone, errors.New("boom") }
	if _, err := l.Sweep(ctx, mine, live, wake); err == nil {
		t.Fatal("a liveness error was not reported")
	}
}

// GCRA: a burst of the limit at once, then one turn every per/limit; a
// turn asked for again is the same; a back-off holds every later turn.
func TestReserve(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(base.UnixNano())
	l := open(t, func() time.Time { return time.Unix(0, clock.Load()) })
	s := flow.RateSpec{Limit: "api", Key: "k", Rate: 4, Per: time.Second}
	var at []time.Duration
	for i := range 8 {
		got, err := l.Reserve(ctx, s, holder(fmt.Sprint("r", i), 1), 1, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got.IsZero() {
			got = base // now
		}
		at = append(at, got.Sub(base))
	}
	want := []time.Duration{0, 0, 0, 0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Fatalf("turns %v, want %v", at, want)
	}
	// Units: 2 units take two turns' time.
	two, _ := l.Reserve(ctx, s, holder("big", 1), 2, time.Time{})
	if two.Sub(base) != 1500*time.Millisecond {
		t.Fatalf("2 units at %v, want 1.5s", two.Sub(base))
	}
	if err := l.Backoff(ctx, s, base.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	next, _ := l.Reserve(ctx, s, holder("after", 1), 1, time.Time{})
	if next.Sub(base) != 10*time.Second {
		t.Fatalf("after a back-off to 10s: %v", next.Sub(base))
	}
	rs, err := l.Rates(ctx)
	if err != nil || len(rs) != 1 || rs[0].Waiting != 40 { // the next turn is 10s away, at 4/s
		t.Fatalf("rates %+v %v", rs, err)
	}
	// Once every turn came and went, a sweep drops the key.
	clock.Add(int64(time.Minute))
	if _, err := l.Sweep(ctx, func(string) bool { return true }, nil, nil); err != nil {
		t.Fatal(err)
	}
	if rs, _ := l.Rates(ctx); len(rs) != 0 {
		t.Fatalf("idle rate key kept: %+v", rs)
	}
}

// Waiters are let in by priority, then by fairness key in turns, then in
// the order they came: a key with 2 waiting is not queued behind one with
// 6, and a priority-5 attempt goes before both.
func TestWakeOrder(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	s := flow.Slot{Limit: "fair", Max: 1}
	if g, _ := l.Acquire(ctx, s, holder("first", 1)); !g.Granted {
		t.Fatal("the first was refused")
	}
	var order []string
	ask := func(run, fairness string, prio int) {
		h := flow.Holder{Run: run, Node: "n", Iteration: 1, Attempt: 1, Fairness: fairness, Priority: prio}
		if g, err := l.Acquire(ctx, s, h); err != nil || g.Granted {
			t.Fatalf("%s: %+v %v, want waiting", run, g, err)
		}
	}
	for i := range 6 {
		ask(fmt.Sprint("big", i), "big", 0)
	}
	ask("small0", "small", 0)
	ask("small1", "small", 0)
	ask("urgent", "big", 5)
	cur := holder("first", 1)
	for range 9 {
		wake, err := l.Release(ctx, s, cur)
		if err != nil || len(wake) != 1 {
			t.Fatalf("release: %v %v", wake, err)
		}
		g, err := l.Acquire(ctx, s, wake[0])
		if err != nil || !g.Granted {
			t.Fatalf("the woken %s was refused: %+v %v", wake[0].Run, g, err)
		}
		order = append(order, wake[0].Run)
		cur = wake[0]
	}
	// urgent is of key big: small has its turn next.
	want := "[urgent small0 big0 small1 big1 big2 big3 big4 big5]"
	if fmt.Sprint(order) != want {
		t.Fatalf("let in %v, want %s", order, want)
	}
}

// countingKV counts the writes made through it.
type countingKV struct {
	flow.KV
	puts atomic.Int64
}

func (c *countingKV) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	c.puts.Add(1)
	return c.KV.Put(ctx, key, value, rev)
}

// A slot given back goes to the first waiter in line in the same
// compare-and-set: one write, after which the bucket names the waiter a
// holder (read by another process's limiter too), never more than max
// holders, and the waiter asking for it is granted at once.
func TestReleaseHandsOverInOneWrite(t *testing.T) {
	ctx := t.Context()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	kv, _, err := setup.CreateKV(ctx, js, flow.KVConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingKV{KV: flow.BucketKV(js, kv)}
	l, other := flow.New(counted, nil), flow.New(flow.BucketKV(js, kv), nil)
	s := flow.Slot{Limit: "handover", Key: "k", Max: 2}
	for i, want := range []bool{true, true, false, false} {
		h := flow.Holder{Run: fmt.Sprint("r", i), Node: "n", Iteration: 1, Attempt: 1, Priority: []int{0, 0, 0, 5}[i]}
		if g, err := l.Acquire(ctx, s, h); err != nil || g.Granted != want {
			t.Fatalf("r%d: %+v %v, want granted %v", i, g, err, want)
		}
	}
	before := counted.puts.Load()
	handed, err := l.Release(ctx, s, holder("r0", 1))
	if err != nil || len(handed) != 1 {
		t.Fatalf("release: %+v %v, want one hand-over", handed, err)
	}
	// r3 (priority 5) is first in line (Entry.next), before r2.
	if handed[0].Run != "r3" {
		t.Fatalf("handed to %s, want r3 (priority 5)", handed[0].Run)
	}
	if n := counted.puts.Load() - before; n != 1 {
		t.Fatalf("the hand-over took %d writes, want 1", n)
	}
	es, err := other.Entries(ctx)
	if err != nil || len(es) != 1 {
		t.Fatalf("entries %+v %v", es, err)
	}
	var holders, waiters []string
	for _, h := range es[0].Holders {
		holders = append(holders, h.Run)
	}
	for _, h := range es[0].Waiters {
		waiters = append(waiters, h.Run)
	}
	if fmt.Sprint(holders) != "[r1 r3]" || fmt.Sprint(waiters) != "[r2]" {
		t.Fatalf("holders %v waiters %v, want [r1 r3] and [r2]", holders, waiters)
	}
	// Asked again, from another process, the hand-over is a grant; r2
	// still waits.
	if g, err := other.Acquire(ctx, s, handed[0]); err != nil || !g.Granted {
		t.Fatalf("r3 asking: %+v %v", g, err)
	}
	if g, err := other.Acquire(ctx, s, holder("r2", 1)); err != nil || g.Granted {
		t.Fatalf("r2 asking: %+v %v, want waiting", g, err)
	}
	// The release asked again (its wakes failed): the holder it handed
	// the slot to, to be woken again; nothing more is handed over.
	if again, err := l.Release(ctx, s, holder("r0", 1)); err != nil || len(again) != 1 || again[0].Run != "r3" {
		t.Fatalf("release asked again: %+v %v, want r3 again", again, err)
	}
	// A release of what is not held hands nothing over (no slot is free).
	if handed, err := l.Release(ctx, s, holder("nobody", 1)); err != nil || len(handed) != 0 {
		t.Fatalf("release of nobody: %+v %v", handed, err)
	}
}

// Fairness keys share a limit's slots: a key that comes to a limit
// another key fills takes every slot given back until the two hold as
// many (4 of 8 each), then each key's slot given back is its own again;
// the key that filled the limit is not served first because it has more
// waiting. (Taking turns alone let the newcomer in at every other slot
// given back: 8 releases to reach its share, not 4.)
func TestFairnessKeysShareTheSlots(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	s := flow.Slot{Limit: "share", Max: 8}
	fair := func(run, key string) flow.Holder {
		return flow.Holder{Run: run, Node: "n", Iteration: 1, Attempt: 1, Fairness: key}
	}
	var big []flow.Holder
	for i := range 30 {
		h := fair(fmt.Sprint("big", i), "big")
		g, err := l.Acquire(ctx, s, h)
		if err != nil || g.Granted != (i < 8) {
			t.Fatalf("big%d: %+v %v", i, g, err)
		}
		big = append(big, h)
	}
	for i := range 10 {
		if g, err := l.Acquire(ctx, s, fair(fmt.Sprint("small", i), "small")); err != nil || g.Granted {
			t.Fatalf("small%d: %+v %v, want waiting", i, g, err)
		}
	}
	held := map[string][]flow.Holder{"big": big[:8]}
	release := func(key string) string {
		h := held[key][0]
		held[key] = held[key][1:]
		wake, err := l.Release(ctx, s, h)
		if err != nil || len(wake) != 1 {
			t.Fatalf("release %s: %v %v", h.Run, wake, err)
		}
		w := wake[0]
		held[w.Fairness] = append(held[w.Fairness], w)
		return w.Fairness
	}
	var got []string
	for range 6 { // the big key's holders end, one by one
		got = append(got, release("big"))
	}
	got = append(got, release("small"), release("small")) // then two of the small key's
	want := "[small small small small big big small small]"
	if fmt.Sprint(got) != want {
		t.Fatalf("slots given back went to %v, want %s", got, want)
	}
	if len(held["small"]) != 4 || len(held["big"]) != 4 {
		t.Fatalf("held: small %d, big %d; want 4 each", len(held["small"]), len(held["big"]))
	}
}

// A limit has at most its bound of keys, holders or not: a key
// expression that gives one key per run gets ErrTooManyKeys past it (the
// run fails, naming the limit), from the limiter that made the keys and
// from another (another coordinator) that lists them, and a key given
// back and swept makes room again.
func TestMaxKeysBoundsKeysWithHolders(t *testing.T) {
	ctx := t.Context()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	a, err := flow.Open(ctx, js, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := flow.Open(ctx, js, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.SetMaxKeys(5)
	b.SetMaxKeys(5)
	slot := func(i int) flow.Slot { return flow.Slot{Limit: "per-run", Key: fmt.Sprint("run-", i), Max: 2} }
	for i := range 5 {
		if g, err := a.Acquire(ctx, slot(i), holder(fmt.Sprint("r", i), 1)); err != nil || !g.Granted {
			t.Fatalf("key %d: %+v %v, want granted", i, g, err)
		}
	}
	for name, l := range map[string]*flow.Limiter{"the limiter that made them": a, "another": b} {
		_, err := l.Acquire(ctx, slot(5), holder("r5", 1))
		if !errors.Is(err, flow.ErrTooManyKeys) || !strings.Contains(err.Error(), `limit "per-run"`) {
			t.Fatalf("a sixth key from %s: %v, want ErrTooManyKeys naming the limit", name, err)
		}
	}
	// Another limit has keys of its own.
	if g, err := a.Acquire(ctx, flow.Slot{Limit: "other", Key: "k", Max: 1}, holder("o", 1)); err != nil || !g.Granted {
		t.Fatalf("another limit: %+v %v", g, err)
	}
	// A holder asking again is no new key.
	if g, err := a.Acquire(ctx, slot(0), holder("r0", 1)); err != nil || !g.Granted {
		t.Fatalf("a holder asking again: %+v %v", g, err)
	}
	if _, err := a.Release(ctx, slot(0), holder("r0", 1)); err != nil {
		t.Fatal(err)
	}
	gone := func(context.Context, flow.Slot, flow.Holder) (flow.Life, error) { return flow.Holds, nil }
	if _, err := a.Sweep(ctx, func(string) bool { return true }, gone, nil); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, slot(5), holder("r5", 1)); err != nil || !g.Granted {
		t.Fatalf("a new key once one was swept: %+v %v, want granted", g, err)
	}
}
