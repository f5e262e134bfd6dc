package flow_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/flow"
)

// A map item's later turn is remembered: asking again before it gives
// the same turn (not a fresh one, which would push every item back), the
// first ask at or after it is granted, and the one after that (a decision
// made again) takes a fresh turn. Turns never asked for again are
// dropped after Grace.
func TestReserveItemRemembersTheTurn(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(base.UnixNano())
	l := open(t, func() time.Time { return time.Unix(0, clock.Load()) })
	s := flow.RateSpec{Limit: "g/m", Key: "k", Rate: 4, Per: time.Second}
	item := func(i int) flow.Holder {
		return flow.Holder{Run: "r", Node: fmt.Sprint("m.", i), Iteration: 1, Attempt: 1}
	}
	turn := func(i int, now time.Duration) (time.Duration, bool) {
		t.Helper()
		at, fresh, err := l.ReserveItem(ctx, s, item(i), 1, base.Add(now))
		if err != nil {
			t.Fatal(err)
		}
		if at.IsZero() {
			return now, fresh
		}
		return at.Sub(base), fresh
	}
	var got []time.Duration
	for i := range 6 {
		at, fresh := turn(i, 0)
		if !fresh {
			t.Fatalf("item %d: its first turn is not fresh", i)
		}
		got = append(got, at)
	}
	want := []time.Duration{0, 0, 0, 0, 250 * time.Millisecond, 500 * time.Millisecond}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("turns %v, want %v", got, want)
	}
	// Asked again early: the same turns, nothing taken.
	for i := 4; i < 6; i++ {
		if at, fresh := turn(i, 100*time.Millisecond); at != want[i] || fresh {
			t.Fatalf("item %d asked again: %v fresh %v, want %v remembered", i, at, fresh, want[i])
		}
	}
	// Item 4 after its turn (late, at 300ms): granted, given as its turn
	// (250ms), forgotten.
	if at, fresh := turn(4, 300*time.Millisecond); at != 250*time.Millisecond || fresh {
		t.Fatalf("item 4 at its turn: %v fresh %v, want its turn, 250ms", at, fresh)
	}
	// A new item queues behind item 5, not behind a fresh turn of 4.
	if at, _ := turn(6, 300*time.Millisecond); at != 750*time.Millisecond {
		t.Fatalf("item 6: %v, want 750ms", at)
	}
	// Item 4 asking again takes a fresh turn (its first was spent).
	if at, fresh := turn(4, 300*time.Millisecond); at != time.Second || !fresh {
		t.Fatalf("item 4 again: %v fresh %v, want a fresh turn at 1s", at, fresh)
	}
	// Items 4, 5 and 6 never ask again: after Grace their turns are
	// dropped by the next write, and by the sweep with the idle key.
	clock.Add(int64(flow.Grace + 2*time.Second))
	if _, err := l.Sweep(ctx, func(string) bool { return true }, nil, nil); err != nil {
		t.Fatal(err)
	}
	if rs, _ := l.Rates(ctx); len(rs) != 0 {
		t.Fatalf("idle rate key kept with its turns: %+v", rs)
	}
}

// 'weft queues' and the UI show a rate key's tokens left (the burst that
// may go at once) and, while a RateLimited failure holds it back, until
// when.
func TestRateStateShowsTokensAndBackoff(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(base.UnixNano())
	l := open(t, func() time.Time { return time.Unix(0, clock.Load()) })
	s := flow.RateSpec{Limit: "api", Key: "k", Rate: 4, Per: time.Second}
	state := func() flow.RateState {
		t.Helper()
		rs, err := l.Rates(ctx)
		if err != nil || len(rs) != 1 {
			t.Fatalf("rates %+v %v", rs, err)
		}
		return rs[0]
	}
	for i := range 3 {
		if _, err := l.Reserve(ctx, s, holder(fmt.Sprint("r", i), 1), 1, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if r := state(); r.Tokens != 1 || r.Waiting != 0 || r.BackoffUntil != nil {
		t.Fatalf("after 3 of a burst of 4: %+v, want 1 token left", r)
	}
	for i := 3; i < 5; i++ {
		if _, err := l.Reserve(ctx, s, holder(fmt.Sprint("r", i), 1), 1, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if r := state(); r.Tokens != 0 || r.Waiting != 1 {
		t.Fatalf("after 5: %+v, want no token and 1 waiting", r)
	}
	clock.Add(int64(500 * time.Millisecond)) // two turns' time: two tokens back, less the one waiting
	if r := state(); r.Tokens != 1 {
		t.Fatalf("500ms on: %+v, want 1 token", r)
	}
	until := base.Add(10 * time.Second)
	if err := l.Backoff(ctx, s, until); err != nil {
		t.Fatal(err)
	}
	if r := state(); r.Tokens != 0 || r.BackoffUntil == nil || !r.BackoffUntil.Equal(until) {
		t.Fatalf("backing off: %+v, want no token until %s", r, until)
	}
	clock.Store(until.Add(time.Second).UnixNano())
	if r := state(); r.Tokens != 4 || r.BackoffUntil != nil {
		t.Fatalf("after the back-off and a turn's time: %+v, want the whole burst and no back-off", r)
	}
}
