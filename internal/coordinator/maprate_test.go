package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// mapRatedGraph maps over items, each item taking a turn of the node's
// rate limit, 10 a second.
const mapRatedGraph = `
name: maprated
nodes:
  - {id: each, type: echo, retry: {maxAttempts: 1}, map: {over: "state.items"}, rate: {limit: 10, per: 1s}}
edges:
  - {from: START, to: each}
  - {from: each, to: END}
`

// itemTimes reads a run's log and returns, each sorted, the turns of
// the rate limit its map items were given (a node-ready's rate turn when
// the turn came before it, else the node-ready's time: the decision's),
// the node-readies' times, and the node-invokings' times (the workers
// starting them), with the spread of the workers' lags (the most an
// item's invoking came after its ready, less the least).
func itemTimes(t *testing.T, st events.Store, run string) (turns, readies, invokings []time.Time, spread time.Duration) {
	t.Helper()
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]time.Time{}
	var lags []time.Duration
	for _, e := range evs {
		p, err := e.Payload()
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeReadyData:
			if d.Item == nil {
				continue
			}
			if d.Rate == nil || d.Rate.Limit != "maprated/each" {
				t.Fatalf("item %s readied without its rate limit: %+v", d.Key(), d.Rate)
			}
			turn := e.Time
			if d.Rate.Turn != nil {
				if d.Rate.Turn.After(e.Time) {
					t.Fatalf("item %s readied at %s, before its turn %s", d.Key(), e.Time, d.Rate.Turn)
				}
				turn = *d.Rate.Turn
			}
			turns = append(turns, turn)
			readies = append(readies, e.Time)
			ready[d.Key()] = e.Time
		case *events.NodeInvokingData:
			if d.Item != nil {
				invokings = append(invokings, e.Time)
				lags = append(lags, e.Time.Sub(ready[d.Key()]))
			}
		}
	}
	for _, l := range [][]time.Time{turns, readies, invokings} {
		slices.SortFunc(l, time.Time.Compare)
	}
	if len(lags) > 0 {
		spread = slices.Max(lags) - slices.Min(lags)
	}
	return turns, readies, invokings, spread
}

// checkGCRA fails when more starts fall in a window than a rate limit of
// limit per per lets in: GCRA's bound, burst (the limit) + (w+slack)/T
// (T = per/limit) + 1 for the clock's rounding, in any window of length
// w; slack is how much the starts may have been bunched after their
// turns.
func checkGCRA(t *testing.T, what string, starts []time.Time, limit, burst int, per, slack time.Duration) {
	t.Helper()
	T := per / time.Duration(limit)
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			if n, w := j-i+1, starts[j].Sub(starts[i]); float64(n) > float64(burst)+1+float64(w+slack)/float64(T) {
				for k, s := range starts {
					t.Logf("%s %d at +%s", what, k, s.Sub(starts[0]))
				}
				t.Fatalf("%s: %d within %s, more than %d + (%s+%s)/%s + 1", what, n, w, burst, w, slack, T)
			}
		}
	}
}

// A map of 50 items under a rate limit of 10 a second: the items take
// turns one by one, so they start over at least 4s (10 at once, then one
// every 100ms), never faster than the limit in any window (from the
// log's node-readies and node-invokings); every item runs once and the
// run completes.
func TestMapItemsTakeTheirNodesRate(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, mapRatedGraph)
	items := make([]string, 50)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Input: []byte(`{"items":[` + strings.Join(items, ",") + `]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, run, 0, e); err != nil {
		t.Fatal(err)
	}
	s := waitEnded(t, st, []string{run}, 90*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s %+v", s.Status, s.Error)
	}
	if ns := s.Nodes["each"]; ns == nil || len(ns.Items) != 50 {
		t.Fatalf("the map node: %+v", ns)
	}
	turns, readies, invokings, spread := itemTimes(t, st, run)
	if len(turns) != 50 || len(invokings) != 50 {
		t.Fatalf("%d items readied and %d invoked, want each of the 50 once", len(turns), len(invokings))
	}
	span := turns[49].Sub(turns[0])
	t.Logf("50 items at 10/s: turns over %s, readied over %s, invoked over %s (the workers' lags spread over %s)",
		span, readies[49].Sub(readies[0]), invokings[49].Sub(invokings[0]), spread)
	if span < 3900*time.Millisecond || span > 30*time.Second {
		t.Errorf("50 items at 10/s with a burst of 10 were given turns over %s, want about 4s", span)
	}
	// The turns keep GCRA's bound exactly. A wake that comes late readies
	// the items whose turns came at once, at most the limit (the turns
	// taken ahead), while the key's burst comes back: the readies keep
	// the bound with twice the burst; the invokings too, but for the
	// workers' lags, which bunch them by up to their spread.
	checkGCRA(t, "turn", turns, 10, 10, time.Second, 0)
	checkGCRA(t, "ready", readies, 10, 20, time.Second, 0)
	checkGCRA(t, "invoking", invokings, 10, 20, time.Second, spread)
	waitNoSlots(t, st)
}

// startItems starts a run of g with input {"items": items}.
func startItems(t *testing.T, st events.Store, g *graph.Graph, items string) string {
	t.Helper()
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Input: []byte(`{"items":` + items + `}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, 0, e); err != nil {
		t.Fatal(err)
	}
	return run
}

// A map item that meets a 429 holds its whole key back for the
// Retry-After, as a node's attempt does: the first item's first attempt
// says RateLimited with 1.5s; its retry (10ms later by its policy) and
// the items of a run started after it are readied no sooner than 1.5s
// after it.
func TestRateLimitedItemBacksOffTheKey(t *testing.T) {
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
name: quotamap
nodes:
  - {id: each, type: quota, map: {over: "state.items", concurrency: 1}, rate: {limit: 100, per: 1s},
     retry: {maxAttempts: 3, initialInterval: 10ms, jitter: 0}}
edges: [{from: START, to: each}, {from: each, to: END}]
`)
	first := startItems(t, st, g, `[1, 2]`)
	waitFailedOnce(t, st, first)
	later := startItems(t, st, g, `[3, 4]`)
	back := time.Unix(0, saidAt.Load())
	for r, s := range waitEnded(t, st, []string{first, later}, 60*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %+v", r, s.Status, s.Error)
		}
	}
	for _, r := range []string{first, later} {
		evs, err := st.Read(ctx, r, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type != events.NodeReady || !e.Time.After(back) {
				continue
			}
			if e.Time.Before(back.Add(1400 * time.Millisecond)) {
				d := mustPayloadT(t, e).(*events.NodeReadyData)
				t.Errorf("item %s attempt %d readied %s after the 429, within its Retry-After of 1.5s", d.Key(), d.Attempt, e.Time.Sub(back))
			}
		}
	}
}

func mustPayloadT(t *testing.T, e *events.Event) events.Payload {
	t.Helper()
	p, err := e.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A coordinator stopped while a map's items wait for their turns, and
// another started a second later: the wakes already scheduled, and the
// turns remembered in the limit's key, carry the items on; the run
// completes, every item once, and the turns in the log keep GCRA's bound.
func TestMapItemTurnsSurviveACoordinatorStop(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	actx, stopA := context.WithCancel(ctx)
	a := coordinator.New(st, coordinator.WithLogger(quiet()))
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(actx) })
	t.Cleanup(func() { stopA(); wg.Wait() })
	g := mustGraph(t, strings.Replace(mapRatedGraph, "limit: 10", "limit: 5", 1))
	items := make([]string, 20)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	run := startItems(t, st, g, "["+strings.Join(items, ",")+"]")
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _ := st.Read(ctx, run, 0, 0)
		n := 0
		for _, e := range evs {
			if e.Type == events.NodeReady {
				n++
			}
		}
		if n >= 8 {
			break // the burst of 5 and some turns after it
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d items readied", n)
		}
		// Polls: the readies are events of the run, read afresh.
		time.Sleep(20 * time.Millisecond)
	}
	stopA()
	wg.Wait()
	// Stopped for a second: wakes come due meanwhile, with no coordinator.
	time.Sleep(time.Second)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	s := waitEnded(t, st, []string{run}, 60*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s %+v", s.Status, s.Error)
	}
	turns, _, invokings, _ := itemTimes(t, st, run)
	if len(turns) != 20 || len(invokings) != 20 {
		t.Fatalf("%d items readied and %d invoked, want each of the 20 once", len(turns), len(invokings))
	}
	checkGCRA(t, "turn", turns, 5, 5, time.Second, 0)
}
