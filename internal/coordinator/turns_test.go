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
	add := func(name string, cl runClass) {
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
	for range waiting {
		tr.release()
		select {
		case n := <-got:
			order = append(order, n)
		case <-time.After(30 * time.Second):
			t.Fatalf("no run was given the shard freed; so far %v", order)
		}
	}
	want := []string{"hi", "go-on", "b1", "s1", "b2", "s2", "b3", "b4"}
	if !slices.Equal(order, want) {
		t.Fatalf("shards given in the order %v, want %v", order, want)
	}
	tr.release()
	if tr.free != 1 {
		t.Fatalf("%d shards free after every run gave its back, want 1", tr.free)
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
	tr.release()
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
