package coordinator_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// A retry timer whose schedule the server acknowledged and never fires
// (NATS keeps a fired schedule "in flight" until its fired message is
// stored, for as long as the stream's leader lasts: a fired message lost
// to a node's kill leaves it there, firing no more). Its run has no event
// to come, so no fold re-arms it: before the safety net, the run waited
// forever (the stuck TestChaosTypeScript run). Now the coordinator fires
// the timer from the log once it is overdue by the grace, and the run
// goes on exactly as if the timer had fired on time. With a run cache of
// one entry, the runs waiting are mostly not the ones the coordinator
// holds in memory (the watch outlives the cache); a run read afresh from
// the log (its own decision's echo, after it was evicted) re-arms its
// timers, so there every schedule of a timer is lost, the re-armed ones
// too, and each timer is left to the safety net.
func TestLostScheduleFiredFromLog(t *testing.T) {
	t.Run("cached", func(t *testing.T) { lostSchedules(t, 0) })
	t.Run("evicted", func(t *testing.T) { lostSchedules(t, 1) })
}

func lostSchedules(t *testing.T, cacheSize int) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	var mu sync.Mutex
	lost := map[string]bool{} // by run and timer id
	st.Set(func(f *testkit.FaultStore) {
		f.LoseSchedule = func(ev *events.Event, id string) bool {
			mu.Lock()
			defer mu.Unlock()
			key := ev.RunID + "/" + id
			if lost[key] && cacheSize == 0 {
				return false
			}
			lost[key] = true
			return true
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const grace = time.Second
	opts := []coordinator.Option{coordinator.WithLogger(quiet()), coordinator.WithTimerGrace(grace, 0)}
	if cacheSize > 0 {
		opts = append(opts, coordinator.WithCacheSize(cacheSize))
	}
	c := runCoordinator(t, ctx, st, opts...)
	runWorker(t, ctx, base, "w1")
	runs := start(t, base, mustGraph(t, flakyGraph), 3)
	for _, s := range waitEnded(t, base, runs, 60*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %v", s.RunID, s.Status, s.Error)
		}
	}
	for _, run := range runs {
		if got := attempts(t, base, run); got != wantFlaky {
			t.Fatalf("run %s: %s\nwant %s", run, got, wantFlaky)
		}
	}
	// Every retry timer (two a run) was lost once; with every run in the
	// cache, no fold re-armed one, and each was fired from the log.
	mu.Lock()
	defer mu.Unlock()
	got, want := c.Stats().OverdueTimers, int64(2*len(runs))
	if len(lost) != 2*len(runs) || got < want || cacheSize == 0 && got != want {
		t.Fatalf("timers fired from the log: %d, want %d (lost: %d)", got, want, len(lost))
	}
}

// The safety net never fires a timer early: a lost retry timer an hour
// away is left alone by every sweep until the coordinator's clock is past
// its time by more than the grace, and then fired once.
func TestLostScheduleNotFiredEarly(t *testing.T) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	st.Set(func(f *testkit.FaultStore) {
		f.LoseSchedule = func(*events.Event, string) bool { return true }
	})
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()), coordinator.WithClock(clock), coordinator.WithTimerGrace(time.Minute, 0))
	runWorker(t, ctx, base, "w1")
	run := start(t, base, mustGraph(t, `
name: later
nodes:
  - {id: a, type: fail, config: {failAttempts: 1}, retry: {maxAttempts: 2, initialInterval: 1h, maxInterval: 1h, jitter: 0.01}}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`), 1)[0]
	waitFor(t, base, run, events.RetryScheduled)
	for deadline := time.Now().Add(20 * time.Second); c.Stats().WatchedRuns == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the run's timer is not watched")
		}
		// Waits for the coordinator to note the run's timer: it does
		// just after the retry's decision landed and its schedule was
		// (lost), which the test cannot see otherwise.
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		if n, err := c.SweepTimers(ctx); n != 0 || err != nil {
			t.Fatalf("a sweep before the timer's time fired %d (%v)", n, err)
		}
	}
	if got := attempts(t, base, run); strings.Contains(got, "timer") {
		t.Fatalf("fired early: %s", got)
	}
	offset.Store(int64(2 * time.Hour))
	for deadline := time.Now().Add(20 * time.Second); c.Stats().OverdueTimers == 0; {
		if _, err := c.SweepTimers(ctx); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the overdue timer was not fired")
		}
	}
	if s := waitEnded(t, base, []string{run}, 30*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s %v", run, s.Status, s.Error)
	}
	if got, want := attempts(t, base, run), "ready 1, failed 1, retry 2, timer 2, ready 2, invoked 2"; got != want {
		t.Fatalf("run %s: %s\nwant %s", run, got, want)
	}
	if st := c.Stats(); st.OverdueTimers != 1 || st.WatchedRuns != 0 {
		t.Fatalf("timers fired from the log: %d, want 1; runs watched: %d, want 0 (the run ended)", st.OverdueTimers, st.WatchedRuns)
	}
}

// A timer the server holds and never fires, armed by a coordinator that
// is gone (its watch with it): the coordinator that takes the partition
// finds the run's schedule in the timers stream, and fires the timer from
// the log once it is overdue. Before, the run waited forever.
func TestStalledScheduleFiredAfterTakeover(t *testing.T) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	st.Set(func(f *testkit.FaultStore) {
		f.StallSchedule = func(*events.Event, string) bool { return true }
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, base, "w1")
	// The first coordinator, with a grace it never reaches.
	actx, stopA := context.WithCancel(ctx)
	a := runCoordinator(t, actx, st, coordinator.WithLogger(quiet()), coordinator.WithTimerGrace(time.Hour, 0))
	run := start(t, base, mustGraph(t, flakyGraph), 1)[0]
	waitFor(t, base, run, events.RetryScheduled)
	for deadline := time.Now().Add(20 * time.Second); a.Stats().WatchedRuns == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the run's timer is not watched")
		}
		// Waits for the coordinator to note the run's timer, just
		// after its schedule, which the test cannot see otherwise.
		time.Sleep(10 * time.Millisecond)
	}
	stopA()
	b := runCoordinator(t, ctx, base, coordinator.WithLogger(quiet()), coordinator.WithTimerGrace(time.Second, 0))
	if s := waitEnded(t, base, []string{run}, 60*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s %v", run, s.Status, s.Error)
	}
	if got := attempts(t, base, run); got != wantFlaky {
		t.Fatalf("run %s: %s\nwant %s", run, got, wantFlaky)
	}
	if n := b.Stats().OverdueTimers; n != 1 {
		t.Fatalf("timers the second coordinator fired from the log: %d, want 1 (the first stalled; the second, armed by it, fired)", n)
	}
}
