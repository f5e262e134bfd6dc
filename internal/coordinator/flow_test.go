package coordinator_test

import (
	"context"
	"encoding/json"
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
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

const limitedGraph = `
name: limited
nodes:
  - {id: work, type: sleep, config: {duration: %s}, timeout: %s, retry: {maxAttempts: 1},
     concurrency: {max: 2, key: "invocation.tenant"}}
edges:
  - {from: START, to: work}
  - {from: work, to: END}
`

// startFor starts n runs of g with the invocation state {"tenant": tenant}.
func startFor(t testing.TB, st events.Store, g *graph.Graph, tenant string, n int) []string {
	t.Helper()
	var runs []string
	for range n {
		run := events.NewRunID()
		e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
			Invocation: json.RawMessage(fmt.Sprintf(`{"tenant":%q}`, tenant)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(context.Background(), run, 0, e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

// peakHolders reads the runs' logs and returns, per key, the most
// attempts that held a slot at once in the stream's order: from the
// node-ready that records the grant to the attempt's outcome (or the
// run's end). The slot is taken before the ready is appended and given
// back after the outcome is folded, so this never exceeds what the bucket
// held. It also returns how many waits for a slot the logs record.
func peakHolders(t *testing.T, st events.Store, runs []string) (map[string]int, int) {
	t.Helper()
	type mark struct {
		seq   uint64
		key   string
		delta int
	}
	var marks []mark
	waits := 0
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]string{} // attempt → key
		for _, e := range evs {
			p, err := e.Payload()
			if err != nil {
				continue
			}
			switch d := p.(type) {
			case *events.NodeWaitingData:
				if d.For == "slot" {
					waits++
				}
			case *events.NodeReadyData:
				if d.Slot != nil {
					k := d.Key() + "/" + fmt.Sprint(d.Attempt)
					held[k] = d.Slot.Key
					marks = append(marks, mark{e.Seq, d.Slot.Key, +1})
				}
			case *events.NodeInvokedData, *events.NodeFailedData, *events.NodeCancelledData:
				var ref events.NodeRef
				var attempt int
				switch d := d.(type) {
				case *events.NodeInvokedData:
					ref, attempt = d.NodeRef, d.Attempt
				case *events.NodeFailedData:
					ref, attempt = d.NodeRef, d.Attempt
				case *events.NodeCancelledData:
					ref, attempt = d.NodeRef, d.Attempt
				}
				k := ref.Key() + "/" + fmt.Sprint(attempt)
				if key, ok := held[k]; ok {
					delete(held, k)
					marks = append(marks, mark{e.Seq, key, -1})
				}
			}
			if e.Type.Terminal() {
				for k, key := range held {
					delete(held, k)
					marks = append(marks, mark{e.Seq, key, -1})
				}
			}
		}
	}
	slices.SortFunc(marks, func(a, b mark) int {
		if a.seq != b.seq {
			return int(a.seq) - int(b.seq)
		}
		return a.delta - b.delta // an end before a start at one sequence
	})
	cur, peak := map[string]int{}, map[string]int{}
	for _, m := range marks {
		cur[m.key] += m.delta
		peak[m.key] = max(peak[m.key], cur[m.key])
	}
	return peak, waits
}

// waitNoSlots waits until the flow bucket holds no slot and no waiter.
func waitNoSlots(t *testing.T, st events.Store) {
	t.Helper()
	l, err := flow.Open(context.Background(), eventlog.JetStream(st), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		es, err := l.Entries(context.Background())
		if err == nil && len(es) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots left in the bucket (%v): %+v", err, es)
		}
		// Polls: a slot's release is a KV delete, which this test does not watch.
		time.Sleep(50 * time.Millisecond)
	}
}

func checkLimit(t *testing.T, st events.Store, runs []string, keys ...string) {
	t.Helper()
	peak, waits := peakHolders(t, st, runs)
	for _, k := range keys {
		if peak[k] != 2 {
			t.Errorf("key %q: at most %d held a slot at once, want exactly the limit, 2", k, peak[k])
		}
	}
	if waits == 0 {
		t.Error("no attempt waited for a slot: the limit never bound")
	}
	waitNoSlots(t, st)
}

// Ten runs of one key with max 2: never more than two hold a slot, every
// run completes, no slot is left; another key is not held up by the first.
func TestConcurrencyLimitByKey(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "150ms", "10s"))
	runs := startFor(t, st, g, "acme", 10)
	runs = append(runs, startFor(t, st, g, "globex", 4)...)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 1)
	checkLimit(t, st, runs, "acme", "globex")
}

// The same across two coordinators that own different partitions: the
// slots are one compare-and-set state for both.
func TestConcurrencyLimitAcrossPartitions(t *testing.T) {
	st, a, _ := spreadPair(t)
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "150ms", "10s"))
	runs := startFor(t, st, g, "acme", 12)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 1)
	owners := map[bool]int{}
	for _, r := range runs {
		owners[slices.Contains(a.c.Partitions(), eventlog.PartitionOf(r, pairParts))]++
	}
	if owners[true] == 0 || owners[false] == 0 {
		t.Fatalf("the runs were not spread over both coordinators: %v", owners)
	}
	// Every run that waited was handed its slot by a give-back (made by
	// the owner of the run giving it back, whichever coordinator that
	// is) and woken with it; runs of both coordinators were.
	woken := grantedWakes(t, st, runs)
	wokenBy := map[bool]int{}
	for r := range woken {
		wokenBy[slices.Contains(a.c.Partitions(), eventlog.PartitionOf(r, pairParts))]++
	}
	_, waits := peakHolders(t, st, runs)
	if len(woken) != waits || wokenBy[true] == 0 || wokenBy[false] == 0 {
		t.Fatalf("%d runs woken with their slot (by owner %v), %d waited: want all, of both", len(woken), wokenBy, waits)
	}
	checkLimit(t, st, runs, "acme")
}

// Attempts that time out, and runs cancelled while they hold or wait for
// a slot, give their slots back: every run ends and no slot is left.
func TestConcurrencySlotsReleased(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	// Each attempt sleeps 5s with a timeout of 200ms: it fails by timeout.
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "5s", "200ms"))
	timedOut := startFor(t, st, g, "slow", 5)
	waitEnded(t, st, timedOut, 60*time.Second)
	for _, r := range timedOut {
		evs, _ := st.Read(ctx, r, 0, 0)
		if s := projection.Fold(evs); s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailureTimeout {
			t.Fatalf("run %s: %s %+v, want failed by timeout", r, s.Status, s.Error)
		}
	}
	waitNoSlots(t, st)

	// Long attempts: two hold, the rest wait; cancel them all.
	g = mustGraph(t, fmt.Sprintf(limitedGraph, "30s", "60s"))
	cancelled := startFor(t, st, g, "long", 6)
	waitForSlots(t, st, cancelled, 4)
	for _, r := range cancelled {
		e, err := events.New(r, r+"-cancel", time.Now(), &events.RunCancelRequestedData{By: "test", Reason: "done"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, r, events.AnySeq, e); err != nil {
			t.Fatal(err)
		}
	}
	waitEnded(t, st, cancelled, 60*time.Second)
	waitNoSlots(t, st)
}

// waitForSlots waits until n of the runs wait for a slot.
func waitForSlots(t *testing.T, st events.Store, runs []string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		k := 0
		for _, r := range runs {
			evs, _ := st.Read(context.Background(), r, 0, 0)
			if ns := projection.Fold(evs).Nodes["work"]; ns != nil && ns.Status == projection.NodeWaiting && ns.WaitingFor == "slot" {
				k++
			}
		}
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs wait for a slot, want %d", k, n)
		}
		// Polls: the waiters are a KV value's contents, not events.
		time.Sleep(50 * time.Millisecond)
	}
}

// A rate limit of 10 per second over 30 runs: the first 10 start at once,
// then one every 100ms, so the 30th starts no sooner than 2s after the
// first; the waits are in the log; every run completes.
func TestRateLimitByKey(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, `
name: rated
nodes:
  - {id: call, type: echo, rate: {limit: 10, per: 1s, key: "invocation.tenant"}}
edges: [{from: START, to: call}, {from: call, to: END}]
`)
	runs := startFor(t, st, g, "acme", 30)
	other := startFor(t, st, g, "globex", 3)
	waitEnded(t, st, append(runs, other...), 60*time.Second)
	checkExactlyOnce(t, st, append(runs, other...), 1)
	starts, waits := readyTimes(t, st, runs)
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	span := starts[len(starts)-1].Sub(starts[0])
	if span < 1900*time.Millisecond || span > 10*time.Second {
		t.Errorf("30 starts at 10/s with a burst of 10 took %s, want about 2s", span)
	}
	// GCRA's bound: in any window of length w, at most limit + w/T starts
	// (T = 100ms), plus one for the clock's rounding.
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			if n, w := j-i+1, starts[j].Sub(starts[i]); float64(n) > 10+1+float64(w)/float64(100*time.Millisecond) {
				for k, s := range starts {
					t.Logf("start %d at +%s", k, s.Sub(starts[0]))
				}
				t.Fatalf("%d starts within %s, more than 10 + %s/100ms + 1", n, w, w)
			}
		}
	}
	if waits < 15 {
		t.Errorf("%d attempts waited for their turn, want at least 15", waits)
	}
	// The other key is not held back by the first one's queue.
	os, _ := readyTimes(t, st, other)
	for _, o := range os {
		if o.Sub(starts[0]) > time.Second {
			t.Errorf("a run of another key started %s after the first key's first", o.Sub(starts[0]))
		}
	}
}

// readyTimes returns the turns the runs' attempts were given, as their
// logs record them: a wait's deadline, else the node-ready's time (the
// decision's time, which the turn was taken at); and how many waits for a
// rate limit's turn the logs record. The node-ready after a wait comes
// when its timer fires: message schedules fire on a tick (about 250ms), so
// the readies after waits come in small batches, at the rate over time.
func readyTimes(t *testing.T, st events.Store, runs []string) ([]time.Time, int) {
	t.Helper()
	var out []time.Time
	waits := 0
	for _, r := range runs {
		evs, err := st.Read(context.Background(), r, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var turn time.Time
		for _, e := range evs {
			switch e.Type {
			case events.NodeReady:
				if turn.IsZero() {
					turn = e.Time
				}
			case events.NodeWaiting:
				if p, err := e.Payload(); err == nil && p.(*events.NodeWaitingData).For == "rate" {
					waits++
					turn = *p.(*events.NodeWaitingData).Deadline
				}
			}
		}
		out = append(out, turn)
	}
	return out, waits
}

// A node that meets a 429 holds its whole key back for the Retry-After:
// the first attempt of a run says RateLimited with 1.5s; every other run
// of the key, readied after that, starts no sooner than 1.5s after it.
func TestRateLimitedBacksOffTheKey(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	w, err := worker.New(st, worker.WithName("w429"), worker.WithConcurrency(16))
	if err != nil {
		t.Fatal(err)
	}
	var said atomic.Bool
	var saidAt atomic.Int64
	w.Handle("quota", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		if !said.Swap(true) {
			saidAt.Store(time.Now().UnixNano())
			return nil, worker.RateLimited("429 from the API", 1500*time.Millisecond)
		}
		return &worker.Result{Output: map[string]any{"ok": true}}, nil
	}))
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	g := anyTypeGraph(t, `
name: quota
nodes:
  - {id: call, type: quota, rate: {limit: 100, per: 1s, key: "invocation.tenant"}, retry: {maxAttempts: 3, initialInterval: 10ms, jitter: 0}}
edges: [{from: START, to: call}, {from: call, to: END}]
`)
	first := startFor(t, st, g, "acme", 1)
	waitFailedOnce(t, st, first[0])
	later := startFor(t, st, g, "acme", 5)
	waitEnded(t, st, append(first, later...), 60*time.Second)
	starts, _ := readyTimes(t, st, later)
	back := time.Unix(0, saidAt.Load())
	for _, s := range starts {
		if s.Before(back.Add(1400 * time.Millisecond)) {
			t.Errorf("a run of the key started %s after the 429, within its Retry-After of 1.5s", s.Sub(back))
		}
	}
}

// waitFailedOnce waits until the run's node has failed once.
func waitFailedOnce(t *testing.T, st events.Store, run string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs, _ := st.Read(context.Background(), run, 0, 0)
		for _, e := range evs {
			if e.Type == events.NodeFailed {
				time.Sleep(100 * time.Millisecond) // the coordinator folds it
				return
			}
		}
		// Polls: the failure is read from the log, which this loop re-reads.
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the node never failed")
}

// Sixty runs of one key with max 2, over two coordinators that own
// different partitions: past a line's cap (2×2+16 in the entry) the
// waiters park in keys of their own (internal/flow, park.go) and are
// moved back in as slots change hands. Parking is seen in the bucket;
// never more than two hold a slot, every run completes once, and no
// slot, waiter or parked key is left.
func TestParkedWaitersAcrossPartitions(t *testing.T) {
	st, _, _ := spreadPair(t)
	ctx := t.Context()
	js := eventlog.JetStream(st)
	g := mustGraph(t, fmt.Sprintf(limitedGraph, "20ms", "10s"))
	runs := startFor(t, st, g, "acme", 60)
	kv, err := js.KeyValue(ctx, flow.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	parked := false
	for deadline := time.Now().Add(10 * time.Second); !parked && time.Now().Before(deadline); {
		if keys, err := kv.ListKeysFiltered(ctx, "q.>"); err == nil {
			for range keys.Keys() {
				parked = true
			}
		}
		// Polls: the parked keys come and go as the runs are decided.
		time.Sleep(20 * time.Millisecond)
	}
	if !parked {
		t.Fatal("no waiter was parked")
	}
	waitEnded(t, st, runs, 90*time.Second)
	checkExactlyOnce(t, st, runs, 1)
	checkLimit(t, st, runs, "acme")
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		left = left[:0]
		if keys, err := kv.ListKeysFiltered(ctx, "q.>"); err == nil {
			for k := range keys.Keys() {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			return
		}
		// Polls: a refill deletes the keys it moved in after its write.
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("parked keys left: %v", left)
}
