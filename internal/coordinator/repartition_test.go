package coordinator_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// runOnce runs a coordinator until ctx ends and returns what Run returned.
func runOnce(t *testing.T, st events.Store, opts ...coordinator.Option) (stop func() error) {
	t.Helper()
	c := coordinator.New(st, append([]coordinator.Option{coordinator.WithLeaseTTL(time.Second), coordinator.WithLogger(quiet())}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { err = c.Run(ctx) })
	var once sync.Once
	stop = func() error { once.Do(func() { cancel(); wg.Wait() }); return err }
	t.Cleanup(func() { _ = stop() })
	return stop
}

// A coordinator told another partition count than the deployment's
// refuses to start, saying why, and one told to repartition while another
// coordinator runs refuses too.
func TestPartitionCountMismatchRefused(t *testing.T) {
	_, st := testkit.Store(t)
	stop := runOnce(t, st, coordinator.WithPartitions(4))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 5)
	waitEnded(t, st, runs, 30*time.Second)

	c := coordinator.New(st, coordinator.WithPartitions(6), coordinator.WithLogger(quiet()))
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	err := c.Run(rctx)
	if !errors.Is(err, coordinator.ErrPartitionCount) || !strings.Contains(err.Error(), "made for 4 partitions, this coordinator is told 6") {
		t.Fatalf("a coordinator told 6 partitions on a deployment of 4: Run returned %v, want ErrPartitionCount", err)
	}
	if rctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}

	c = coordinator.New(st, coordinator.WithPartitions(6), coordinator.WithRepartition(true), coordinator.WithLogger(quiet()))
	err = c.Run(rctx)
	if !errors.Is(err, coordinator.ErrPartitionCount) || !strings.Contains(err.Error(), "announced") {
		t.Fatalf("repartitioning while another coordinator runs: Run returned %v, want a refusal", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Changing the partition count as the docs say: runs in flight when every
// coordinator stops, and runs started while none runs, all complete once a
// coordinator with the new count repartitions, each decision written once;
// shrinking from 4 partitions to 2 leaves no slot unconsumed, and growing
// to 6 afterwards too.
func TestRepartitionKeepsRunsGoing(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, chain)
	var runs []string
	stop := runOnce(t, st, coordinator.WithPartitions(4))
	for _, n := range []int{2, 6} {
		runs = append(runs, start(t, st, g, 20)...)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, start(t, st, g, 20)...) // while no coordinator runs
		stop = runOnce(t, st, coordinator.WithPartitions(n), coordinator.WithRepartition(true))
		waitEnded(t, st, runs, 60*time.Second)
		checkExactlyOnce(t, st, runs, 5)
		for p := range n {
			cons, err := eventlog.JetStream(st).Consumer(ctx, st.StreamName(), coordinator.ConsumerName("coordinator", p))
			if err != nil {
				t.Fatalf("partition %d of %d: %v", p, n, err)
			}
			if got := cons.CachedInfo().Config.Metadata["weft.partitions"]; got != strconv.Itoa(n) {
				t.Fatalf("consumer of partition %d says %q partitions, want %d", p, got, n)
			}
			// The first round's runs had all ended: the new consumers
			// start past them, not at the stream's start.
			if n == 6 && cons.CachedInfo().Config.OptStartSeq <= 1 {
				t.Fatalf("consumer of partition %d starts at %d: it re-reads the whole stream", p, cons.CachedInfo().Config.OptStartSeq)
			}
		}
		if n == 2 {
			for _, p := range []int{2, 3} {
				if _, err := eventlog.JetStream(st).Consumer(ctx, st.StreamName(), coordinator.ConsumerName("coordinator", p)); err == nil {
					t.Fatalf("the consumer of old partition %d is still there", p)
				}
			}
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A repartition interrupted after it replaced partition 0's consumer (the
// one that records the count) is finished by the coordinators that start
// next with the new count: a consumer left from the old count is replaced,
// so no slot is left unconsumed, and every run completes once.
func TestInterruptedRepartitionFinishes(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, chain)
	stop := runOnce(t, st, coordinator.WithPartitions(4))
	runs := start(t, st, g, 20)
	waitEnded(t, st, runs[:1], 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// What a repartition to 2 leaves when it dies after its first step.
	js, stream := eventlog.JetStream(st), st.StreamName()
	if err := js.DeleteConsumer(ctx, stream, coordinator.ConsumerName("coordinator", 0)); err != nil {
		t.Fatal(err)
	}
	cfg := partitionConsumer(coordinator.ConsumerName("coordinator", 0), 10*time.Second)
	cfg.FilterSubject, cfg.FilterSubjects = "", eventlog.PartitionFilters(0, 2)
	cfg.Metadata = map[string]string{"weft.partitions": "2"}
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	runs = append(runs, start(t, st, g, 20)...)

	stop = runOnce(t, st, coordinator.WithPartitions(2))
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	cons, err := js.Consumer(ctx, stream, coordinator.ConsumerName("coordinator", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cons.CachedInfo().Config.FilterSubjects, eventlog.ProgressFilters(1, 2); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("partition 1's consumer filters %v, want %v", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
