package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/testkit"
)

func fairHolder(run, key string) flow.Holder {
	return flow.Holder{Run: run, Node: "n", Iteration: 1, Attempt: 1, Fairness: key}
}

// bucketKV is the flow bucket of a fresh server, as a Limiter opens it.
func bucketKV(t *testing.T) flow.KV {
	t.Helper()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	bucket, _, err := setup.CreateKV(t.Context(), js, flow.KVConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	return flow.BucketKV(js, bucket)
}

// grantsInTurn gives back the slots of held, then of each holder it
// hands a slot to, in the order they were granted, until none is handed
// over; it returns the runs handed a slot, in that order.
func grantsInTurn(t *testing.T, l *flow.Limiter, s flow.Slot, held ...flow.Holder) []string {
	t.Helper()
	var order []string
	for len(held) > 0 {
		h := held[0]
		held = held[1:]
		wake, err := l.Release(t.Context(), s, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wake {
			order = append(order, w.Run)
			held = append(held, w)
		}
	}
	return order
}

// stored is the size of a key's entry as the bucket stores it.
func stored(t *testing.T, kv flow.KV, s flow.Slot) int {
	t.Helper()
	b, _, err := kv.Get(t.Context(), flow.KVKey(s.Limit, s.Key))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// A key with many waiters keeps a few of each line in its entry and parks
// the rest: the entry stays small however many wait, every waiter is
// counted, each line's waiters are granted first come first served, and a
// key that comes later still takes its share at once (its line is in the
// entry beside the big one's first waiters).
func TestParkedWaitersKeepTheirOrder(t *testing.T) {
	ctx := t.Context()
	kv := bucketKV(t)
	l := flow.New(kv, nil)
	s := flow.Slot{Limit: "park", Max: 2}
	const big = 300
	for i := range big {
		g, err := l.Acquire(ctx, s, fairHolder(fmt.Sprint("big", i), "big"))
		if err != nil || g.Granted != (i < 2) {
			t.Fatalf("big%d: %+v %v", i, g, err)
		}
	}
	for i := range 3 {
		if g, err := l.Acquire(ctx, s, fairHolder(fmt.Sprint("small", i), "small")); err != nil || g.Granted {
			t.Fatalf("small%d: %+v %v, want waiting", i, g, err)
		}
	}
	es, err := l.Entries(ctx)
	if err != nil || len(es) != 1 {
		t.Fatalf("entries: %v %v", es, err)
	}
	e := es[0]
	if e.Waiting() != big-2+3 {
		t.Fatalf("waiting %d, want %d", e.Waiting(), big-2+3)
	}
	if len(e.Waiters) > 2*2+flow.DefaultParkSlack+3 {
		t.Fatalf("the entry keeps %d waiters, want at most a line's cap and the small key's", len(e.Waiters))
	}
	if n := stored(t, kv, s); n > 4096 {
		t.Fatalf("the entry is %d bytes with %d waiting, want it small", n, e.Waiting())
	}
	// Slots given back one at a time, each holder in the order it was
	// granted.
	order := grantsInTurn(t, l, s, fairHolder("big0", "big"), fairHolder("big1", "big"))
	if len(order) != big-2+3 {
		t.Fatalf("%d granted, want %d", len(order), big-2+3)
	}
	// Fair share of 2 slots: one each, so the keys alternate while the
	// small one waits.
	if got, want := strings.Join(order[:6], " "), "small0 big2 small1 big3 small2 big4"; got != want {
		t.Fatalf("first granted %q, want %q", got, want)
	}
	var bigs []string
	for _, r := range order {
		if strings.HasPrefix(r, "big") {
			bigs = append(bigs, r)
		}
	}
	for i, r := range bigs {
		if want := fmt.Sprint("big", i+2); r != want {
			t.Fatalf("the big key's grant %d went to %s, want %s (first come first served)", i, r, want)
		}
	}
	if es, err := l.Entries(ctx); err != nil || len(es) != 0 {
		t.Fatalf("entries once all were given back: %+v %v", es, err)
	}
}

// A parked attempt whose run ends is taken off its line (its release
// finds it parked): it is never granted, and the count goes down.
func TestParkedWaiterReleased(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	l.SetParkSlack(0)
	s := flow.Slot{Limit: "park-release", Max: 1}
	for i := range 6 { // 1 holds, 2 in the entry (2×max), 3 parked
		if _, err := l.Acquire(ctx, s, holder(fmt.Sprint("r", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if wake, err := l.Release(ctx, s, holder("r4", 1)); err != nil || len(wake) != 0 {
		t.Fatalf("releasing a parked attempt: %v %v", wake, err)
	}
	es, _ := l.Entries(ctx)
	if len(es) != 1 || es[0].Waiting() != 4 {
		t.Fatalf("entries after a parked attempt ended: %+v, want 4 waiting", es)
	}
	order := grantsInTurn(t, l, s, holder("r0", 1))
	if got := strings.Join(order, " "); got != "r1 r2 r3 r5" {
		t.Fatalf("granted %q, want r1 r2 r3 r5 (r4 ended while parked)", got)
	}
}

// lossyKV loses the reply of the first write of an entry (a "c." key)
// made right after a parked waiter's key was created: the park's count.
type lossyKV struct {
	flow.KV
	parked atomic.Bool
	lost   atomic.Int32
}

func (k *lossyKV) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if strings.HasPrefix(key, "c.") && value != nil && k.parked.Load() && k.lost.Load() == 0 {
		k.lost.Add(1)
		return 0, errors.New("lost before it was written")
	}
	next, err := k.KV.Put(ctx, key, value, rev)
	if strings.HasPrefix(key, "q.") && value != nil && err == nil {
		k.parked.Store(true)
	}
	return next, err
}

// A park whose count was never written (its key created, the entry's
// write lost) is asked again by its attempt: the key is there, and the
// line is counted again, so the waiter is granted in its turn.
func TestParkCountLost(t *testing.T) {
	ctx := t.Context()
	kv := &lossyKV{KV: bucketKV(t)}
	l := flow.New(kv, nil)
	l.SetParkSlack(0)
	s := flow.Slot{Limit: "park-lost", Max: 1}
	for i := range 3 {
		if _, err := l.Acquire(ctx, s, holder(fmt.Sprint("r", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Acquire(ctx, s, holder("r3", 1)); err == nil {
		t.Fatal("the lost count was not reported")
	}
	if _, err := l.Acquire(ctx, s, holder("r3", 1)); err != nil { // asked again
		t.Fatal(err)
	}
	order := grantsInTurn(t, l, s, holder("r0", 1))
	if got := strings.Join(order, " "); got != "r1 r2 r3" {
		t.Fatalf("granted %q, want r1 r2 r3", got)
	}
}

// The sweep takes a parked attempt that is no longer live off its line,
// counts again a line whose count was lost, and deletes the keys refills
// left behind; then the idle key goes.
func TestSweepParked(t *testing.T) {
	ctx := t.Context()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	kv := &lossyKV{KV: bucketKV(t)}
	kv.lost.Store(1) // nothing lost until the test says so
	l := flow.New(kv, now)
	l.SetParkSlack(0)
	s := flow.Slot{Limit: "park-sweep", Max: 1}
	for i := range 5 { // r0 holds, r1 r2 in the entry, r3 r4 parked
		if _, err := l.Acquire(ctx, s, holder(fmt.Sprint("r", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	kv.lost.Store(0)
	kv.parked.Store(false)
	if _, err := l.Acquire(ctx, s, holder("r5", 1)); err == nil { // parked, not counted
		t.Fatal("the lost count was not reported")
	}
	live := func(_ context.Context, _ flow.Slot, h flow.Holder) (flow.Life, error) {
		if h.Run == "r3" {
			return flow.Gone, nil
		}
		if h.Run == "r0" {
			return flow.Holds, nil
		}
		return flow.Waits, nil
	}
	wake := func(context.Context, flow.Slot, flow.Holder, bool) error { return nil }
	all := func(string) bool { return true }
	clock.Add(int64(2 * flow.Grace))
	n, err := l.Sweep(ctx, all, live, wake)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want r3 reclaimed", n, err)
	}
	order := grantsInTurn(t, l, s, holder("r0", 1))
	if got := strings.Join(order, " "); got != "r1 r2 r4 r5" {
		t.Fatalf("granted %q, want r1 r2 r4 r5", got)
	}
	for range 2 { // the first deletes what is left behind, the second the idle key
		if _, err := l.Sweep(ctx, all, live, wake); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := kv.Keys(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("keys left once every attempt ended and two sweeps passed: %v %v", keys, err)
	}
}
