package coordinator_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// held runs a coordinator that can be stopped on its own.
type held struct {
	c    *coordinator.Coordinator
	stop func()
}

func runPartitioned(t *testing.T, st events.Store, partitions int) *held {
	t.Helper()
	c := coordinator.New(st, coordinator.WithPartitions(partitions), coordinator.WithLeaseTTL(time.Second), coordinator.WithLogger(quiet()))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return &held{c: c, stop: stop}
}

// pairParts is the partition count of spreadPair's coordinators.
const pairParts = 4

// spreadPair is the set-up of the tests of a limit across partitions: a
// fresh store, a worker, and two coordinators holding pairParts
// partitions between them, each some.
func spreadPair(t *testing.T) (events.Store, *held, *held) {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	a := runPartitioned(t, st, pairParts)
	b := runPartitioned(t, st, pairParts)
	waitSpread(t, pairParts, a, b)
	return st, a, b
}

// waitSpread waits until the coordinators hold every partition between
// them, each at most its share, none twice.
func waitSpread(t *testing.T, partitions int, cs ...*held) {
	t.Helper()
	share := (partitions + len(cs) - 1) / len(cs)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var all []int
		ok := true
		for _, h := range cs {
			ps := h.c.Partitions()
			if len(ps) > share || len(ps) == 0 {
				ok = false
			}
			all = append(all, ps...)
		}
		slices.Sort(all)
		if ok && len(all) == partitions && len(slices.Compact(all)) == partitions {
			return
		}
		if time.Now().After(deadline) {
			for i, h := range cs {
				t.Logf("coordinator %d holds %v", i, h.c.Partitions())
			}
			t.Fatalf("partitions not spread over %d coordinators (share %d)", len(cs), share)
		}
		// What each coordinator holds is its own state, which no event
		// announces (a lease's put comes before it is held): polled.
		time.Sleep(20 * time.Millisecond)
	}
}

// Partitions spread over the coordinators that run, move when one stops
// or starts, and runs complete throughout, each decision written once.
func TestPartitionsRebalance(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	const parts = 6
	a := runPartitioned(t, st, parts)
	waitSpread(t, parts, a)
	g := mustGraph(t, chain)
	runs := start(t, st, g, 20)

	b := runPartitioned(t, st, parts)
	c := runPartitioned(t, st, parts)
	waitSpread(t, parts, a, b, c)
	runs = append(runs, start(t, st, g, 20)...)

	b.stop()
	waitSpread(t, parts, a, c)
	runs = append(runs, start(t, st, g, 20)...)

	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	if s := a.c.Stats(); s.Decisions == 0 {
		t.Fatalf("coordinator a decided nothing: %+v", s)
	}
	if s := c.c.Stats(); s.Decisions == 0 {
		t.Fatalf("coordinator c decided nothing: %+v", s)
	}
}

// Every run lands in the partition its slot says, and the partition
// filters cover every slot once.
func TestPartitionFiltersCoverEverySlotOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64} {
		seen := map[string]int{}
		for p := range n {
			for _, f := range eventlog.PartitionFilters(p, n) {
				seen[f]++
			}
		}
		if n == 1 {
			if len(seen) != 1 || seen[eventlog.AllEvents] != 1 {
				t.Fatalf("one partition: filters %v", seen)
			}
			continue
		}
		if len(seen) != eventlog.Slots {
			t.Fatalf("%d partitions cover %d slots, want %d", n, len(seen), eventlog.Slots)
		}
		for f, k := range seen {
			if k != 1 {
				t.Fatalf("%d partitions: %s in %d partitions", n, f, k)
			}
		}
		for range 100 {
			run := events.NewRunID()
			p := eventlog.PartitionOf(run, n)
			want := "weft.r." + eventlog.Slot(run) + ".>"
			if !slices.Contains(eventlog.PartitionFilters(p, n), want) {
				t.Fatalf("run %s (slot %s) not in the filters of its partition %d", run, eventlog.Slot(run), p)
			}
		}
	}
}
