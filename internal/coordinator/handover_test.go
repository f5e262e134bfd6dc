package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// grantedWakes returns, per run, the wakes in its log that say its
// attempt was handed its slot (timer.fired purpose slot, granted), each
// checked to be followed by the node-ready of that attempt.
func grantedWakes(t *testing.T, st events.Store, runs []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var waking *events.TimerFiredData
		for _, e := range evs {
			switch d := payload(e).(type) {
			case *events.TimerFiredData:
				if d.Purpose == "slot" && d.Granted {
					out[run]++
					waking = d
				}
			case *events.NodeReadyData:
				if waking != nil && d.Node == waking.Ref.Node && d.Attempt == waking.Attempt {
					waking = nil
				}
			}
		}
		if waking != nil {
			t.Errorf("run %s: woken with its slot for attempt %d, which was never readied", run, waking.Attempt)
		}
	}
	return out
}

func payload(e *events.Event) events.Payload {
	p, _ := e.Payload()
	return p
}

// flowWrites is how many writes the flow bucket has had (its stream's
// last sequence).
func flowWrites(t *testing.T, st events.Store) uint64 {
	t.Helper()
	s, err := eventlog.JetStream(st).Stream(context.Background(), "KV_"+flow.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// Runs through a key of max 1, one after the other: each slot given back
// goes to the next waiter in the write that gives it back, its run is
// woken with the grant and readied without another write. So once the
// runs queued, a hand-over is one write, not two (a give-back, then the
// woken waiter's take).
func TestHandOverIsOneWrite(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, `
name: one-at-a-time
nodes:
  - {id: work, type: sleep, config: {duration: 1s}, concurrency: {max: 1, key: "invocation.tenant"}}
edges: [{from: START, to: work}, {from: work, to: END}]
`)
	const n = 6
	runs := startFor(t, st, g, "solo", n)
	waitForSlots(t, st, runs, n-1)
	queued := flowWrites(t, st)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 1)
	peak, waits := peakHolders(t, st, runs)
	if peak["solo"] != 1 || waits != n-1 {
		t.Fatalf("peak holders %v, waits %d: want 1 and %d", peak, waits, n-1)
	}
	woken := grantedWakes(t, st, runs)
	if len(woken) != n-1 {
		t.Fatalf("%d runs woken with their slot, want %d", len(woken), n-1)
	}
	// n-1 hand-overs and the last give-back; 2(n-1)+1 if each woken run
	// took its slot by a write of its own.
	w := flowWrites(t, st) - queued
	t.Logf("%d writes of the flow bucket once %d runs queued", w, n-1)
	if w > n+1 {
		t.Fatalf("%d writes of the flow bucket for %d hand-overs: want at most %d", w, n-1, n+1)
	}
	waitNoSlots(t, st)
}

// A coordinator that handed a slot over and stopped before waking the
// waiter's run (the wake's append fails, as if it died): the hand-over is
// in the bucket, the waiter's log still waits. The next coordinator's
// sweep finds the holder waiting in its log and wakes it with its grant:
// the run completes, the limit held throughout, and no slot is left.
func TestHandOverSurvivesALostWake(t *testing.T) {
	_, base := testkit.Store(t)
	fs := testkit.NewFaultStore(base)
	var lost atomic.Int32
	fs.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(_ string, evs []*events.Event) error {
			for _, e := range evs {
				if d, ok := payload(e).(*events.TimerFiredData); ok && d.Purpose == "slot" && d.Granted {
					lost.Add(1)
					return errors.New("injected: the coordinator stopped before waking the run")
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, base, "w1")
	actx, stopA := context.WithCancel(ctx)
	a := coordinator.New(fs, coordinator.WithLogger(quiet()))
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(actx) })
	t.Cleanup(func() { stopA(); wg.Wait() })
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "300ms", "10s"))
	runs := startFor(t, base, g, "acme", 3)
	// Two run, the third waits; the first to end hands it its slot, and
	// its wake is lost: the third stays waiting, a holder in the bucket.
	var third string
	deadline := time.Now().Add(30 * time.Second)
	for third == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no hand-over was made (lost wakes %d)", lost.Load())
		}
		// Polls: the hand-over is a KV write, the test watches the bucket.
		time.Sleep(50 * time.Millisecond)
		if lost.Load() == 0 {
			continue
		}
		ended := 0
		for _, r := range runs {
			evs, _ := base.Read(ctx, r, 0, 0)
			s := projection.Fold(evs)
			if s.Status.Ended() {
				ended++
			} else if ns := s.Nodes["work"]; ns != nil && ns.Status == projection.NodeWaiting && ns.WaitingFor == "slot" {
				third = r
			}
		}
		if ended < 1 {
			third = ""
		}
	}
	stopA()
	wg.Wait()
	l, err := flow.Open(ctx, eventlog.JetStream(base), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	es, err := l.Entries(ctx)
	if err != nil || len(es) != 1 || !slices.ContainsFunc(es[0].Holders, func(h flow.Holder) bool { return h.Run == third }) {
		t.Fatalf("the bucket does not name the waiting run %s a holder: %+v %v", third, es, err)
	}
	// The next coordinator, whose sweep sees the hand-over as older than
	// the grace (its limiter's clock is ahead).
	ahead := func() time.Time { return time.Now().Add(2 * flow.Grace) }
	lb, err := flow.Open(ctx, eventlog.JetStream(base), 1, ahead)
	if err != nil {
		t.Fatal(err)
	}
	runCoordinator(t, ctx, base, coordinator.WithLogger(quiet()), coordinator.WithFlow(lb), coordinator.WithFlowSweep(200*time.Millisecond))
	waitEnded(t, base, runs, 60*time.Second)
	checkExactlyOnce(t, base, runs, 1)
	if woken := grantedWakes(t, base, []string{third}); woken[third] != 1 {
		t.Fatalf("run %s woken with its slot %d times, want once (by the sweep)", third, woken[third])
	}
	checkLimit(t, base, runs, "acme")
}

// A wake that fails once (a passing fault) is made again by the
// coordinator that handed the slot over: the run goes on at once, not
// after a sweep (a minute's grace at least).
func TestHandOverWakeIsRetried(t *testing.T) {
	_, base := testkit.Store(t)
	fs := testkit.NewFaultStore(base)
	var failed atomic.Int32
	fs.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(_ string, evs []*events.Event) error {
			for _, e := range evs {
				if d, ok := payload(e).(*events.TimerFiredData); ok && d.Purpose == "slot" && d.Granted && failed.Add(1) == 1 {
					return errors.New("injected: the wake's append failed")
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, base, "w1")
	runCoordinator(t, ctx, fs, coordinator.WithLogger(quiet()))
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "300ms", "10s"))
	runs := startFor(t, base, g, "acme", 3)
	waitEnded(t, base, runs, flow.Grace/2)
	if failed.Load() < 2 {
		t.Fatalf("%d wakes with a grant asked for, want the failed one and its retry", failed.Load())
	}
	checkExactlyOnce(t, base, runs, 1)
	checkLimit(t, base, runs, "acme")
}
