package coordinator_test

import (
	"context"
	"sync"
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
// the log for another event re-arms its lost timers itself, so there
// fewer are left to the safety net.
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
			if lost[key] {
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
	if cacheSize > 0 {
		want = 1 // at least: the last timer lost has no event to come
	}
	if len(lost) != 2*len(runs) || got < want || cacheSize == 0 && got != want {
		t.Fatalf("timers fired from the log: %d, want %d (lost: %d)", got, want, len(lost))
	}
}
