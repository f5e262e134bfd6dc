package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"
)

// With every shard busy, the runs waiting get the shards freed by
// priority, then runs in progress before runs starting, then by fairness
// key in turn, then in the order they came: a key whose runs came after
// another key's many is served every other turn, not after them, and a
// run in progress (an outcome that gives a slot back) passes the starts.
func TestTurnsRankByPriorityThenFairness(t *testing.T) {
	ctx := t.Context()
	tr := newTurns(1)
	if !tr.acquire(ctx, runClass{}) {
		t.Fatal("the free shard was not given")
	}
	got := make(chan string, 16)
	var waiting []string
	classes := map[string]runClass{}
	add := func(name string, cl runClass) {
		classes[name] = cl
		ready := make(chan struct{})
		go func() {
			close(ready)
			if tr.acquire(ctx, cl) {
				got <- name
			}
		}()
		<-ready
		waitFor(t, func() bool { return tr.waiting() == len(waiting)+1 })
		waiting = append(waiting, name)
	}
	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		add(n, runClass{key: "big", starting: true})
	}
	add("s1", runClass{key: "small", starting: true})
	add("s2", runClass{key: "small", starting: true})
	add("hi", runClass{priority: 5, key: "big"})
	add("go-on", runClass{key: "big"})
	var order []string
	holder := runClass{}
	for range waiting {
		tr.release(holder)
		select {
		case n := <-got:
			order = append(order, n)
			holder = classes[n]
		case <-time.After(30 * time.Second):
			t.Fatalf("no run was given the shard freed; so far %v", order)
		}
	}
	want := []string{"hi", "go-on", "b1", "s1", "b2", "s2", "b3", "b4"}
	if !slices.Equal(order, want) {
		t.Fatalf("shards given in the order %v, want %v", order, want)
	}
	tr.release(holder)
	if tr.free != 1 || tr.starting != 0 {
		t.Fatalf("%d shards free and %d held by starts after every run gave its back, want 1 and 0", tr.free, tr.starting)
	}
}

// A run that stops waiting (the coordinator stops) leaves its key's
// line, and a shard handed to it as it gave up is passed on, not lost.
func TestTurnsGiveUpLeavesNoShardBehind(t *testing.T) {
	tr := newTurns(1)
	if !tr.acquire(t.Context(), runClass{}) {
		t.Fatal("the free shard was not given")
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan bool)
	go func() { gaveUp <- tr.acquire(ctx, runClass{key: "a"}) }()
	waitFor(t, func() bool { return tr.waiting() == 1 })
	cancel()
	if <-gaveUp {
		t.Fatal("a run whose context ended was given a shard")
	}
	if n := tr.waiting(); n != 0 {
		t.Fatalf("%d runs still in line after the only one gave up", n)
	}
	tr.release(runClass{})
	if !tr.acquire(t.Context(), runClass{key: "b"}) {
		t.Fatal("the shard given back was not free again")
	}
}

// waiting counts the runs in line.
func (t *turns) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.lines {
		for _, ws := range l.waiters {
			n += len(ws)
		}
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		// Polls the turns' state, which other goroutines change.
		time.Sleep(time.Millisecond)
	}
}

// Runs starting hold at most a quarter of the shards: with that many
// starting, another start waits though shards are free, a run in
// progress takes one at once, and a start that ends lets the next in.
func TestStartsLeaveShardsForRunsInProgress(t *testing.T) {
	ctx := t.Context()
	tr := newTurns(8)
	start := runClass{key: "big", starting: true}
	for i := range 2 {
		if !tr.acquire(ctx, start) {
			t.Fatalf("start %d was not given a free shard", i)
		}
	}
	third := make(chan bool, 1)
	go func() { third <- tr.acquire(ctx, start) }()
	waitFor(t, func() bool { return tr.waiting() == 1 })
	if !tr.acquire(ctx, runClass{key: "small"}) {
		t.Fatal("a run in progress was not given a free shard")
	}
	select {
	case <-third:
		t.Fatal("a third start took a shard: starts hold at most 2 of 8")
	default:
	}
	tr.release(runClass{key: "small"})
	if tr.waiting() != 1 || tr.free != 6 {
		t.Fatalf("a run in progress that ended: %d waiting, %d shards free; want the third start still waiting, 6 free", tr.waiting(), tr.free)
	}
	tr.release(start)
	select {
	case ok := <-third:
		if !ok {
			t.Fatal("the third start gave up")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a start that ended did not let the next in")
	}
	tr.release(start)
	tr.release(start)
	if tr.free != 8 || tr.starting != 0 {
		t.Fatalf("%d shards free and %d held by starts at the end, want 8 and 0", tr.free, tr.starting)
	}
}
