package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// runLimitGraph's runs sleep in one node; at most 2 runs of a tenant are
// in progress at once, by strategy.
const runLimitGraph = `
name: runlimited
concurrency: {max: 2, key: "invocation.tenant", strategy: %s}
nodes:
  - {id: work, type: sleep, config: {duration: %s}, timeout: 120s, retry: {maxAttempts: 1}}
edges:
  - {from: START, to: work}
  - {from: work, to: END}
`

// peakRuns reads the runs' logs and returns, per key of the run limit,
// the most runs in progress at once in the stream's order (from a run's
// first node-ready, which records that it entered, to its end: the slot
// is taken before the first and given back after the second), and how
// many runs waited for their slot.
func peakRuns(t *testing.T, st events.Store, runs []string) (map[string]int, int) {
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
		key := string(projection.Fold(evs[:1]).Invocation)
		in := false
		for _, e := range evs {
			switch {
			case e.Type == events.NodeWaiting:
				if p, _ := e.Payload(); p.(*events.NodeWaitingData).Node == graph.Start {
					waits++
				}
			case e.Type == events.NodeReady && !in:
				in = true
				marks = append(marks, mark{e.Seq, key, +1})
			case e.Type.Terminal() && in:
				marks = append(marks, mark{e.Seq, key, -1})
			}
		}
	}
	slices.SortFunc(marks, func(a, b mark) int {
		if a.seq != b.seq {
			return int(a.seq) - int(b.seq)
		}
		return a.delta - b.delta
	})
	cur, peak := map[string]int{}, map[string]int{}
	for _, m := range marks {
		cur[m.key] += m.delta
		peak[m.key] = max(peak[m.key], cur[m.key])
	}
	return peak, waits
}

// checkRunPeak checks that at most (and, bound, exactly) max runs of
// each tenant were in progress at once, that some waited, and that no
// slot is left.
func checkRunPeak(t *testing.T, st events.Store, runs []string, max int, tenants ...string) {
	t.Helper()
	peak, waits := peakRuns(t, st, runs)
	for _, tenant := range tenants {
		if k := fmt.Sprintf(`{"tenant":%q}`, tenant); peak[k] != max {
			t.Errorf("tenant %q: at most %d runs in progress at once, want exactly the limit, %d (%v)", tenant, peak[k], max, peak)
		}
	}
	if waits == 0 {
		t.Error("no run waited for its slot: the limit never bound")
	}
	waitNoSlots(t, st)
}

// queue: ten runs of one tenant and four of another, max 2: every run
// completes, never more than two of a tenant in progress, the others
// waited before their first node (START waiting for its slot), and no
// slot is left.
func TestRunLimitQueue(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, fmt.Sprintf(runLimitGraph, "queue", "150ms"))
	runs := startFor(t, st, g, "acme", 10)
	runs = append(runs, startFor(t, st, g, "globex", 4)...)
	for _, s := range waitEnded(t, st, runs, 90*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s %s %+v", s.RunID, s.Status, s.Error)
		}
	}
	checkExactlyOnce(t, st, runs, 1)
	checkRunPeak(t, st, runs, 2, "acme", "globex")
}

// The same across two coordinators owning different partitions, which
// race for the last slot of the key: one compare-and-set state for both.
func TestRunLimitAcrossPartitions(t *testing.T) {
	st, a, _ := spreadPair(t)
	g := mustGraph(t, fmt.Sprintf(runLimitGraph, "queue", "100ms"))
	runs := startFor(t, st, g, "acme", 16)
	waitEnded(t, st, runs, 90*time.Second)
	checkExactlyOnce(t, st, runs, 1)
	owners := map[bool]int{}
	for _, r := range runs {
		owners[slices.Contains(a.c.Partitions(), eventlog.PartitionOf(r, pairParts))]++
	}
	if owners[true] == 0 || owners[false] == 0 {
		t.Fatalf("the runs were not spread over both coordinators: %v", owners)
	}
	checkRunPeak(t, st, runs, 2, "acme")
}

// waitRunning waits until the run's work node is running (its slot held).
func waitRunning(t *testing.T, st events.Store, run string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _ := st.Read(context.Background(), run, 0, 0)
		if ns := projection.Fold(evs).Nodes["work"]; ns != nil && ns.Status == projection.NodeRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: work is not running", run)
		}
		// Polls: the node's start is an event of the run, read afresh.
		time.Sleep(50 * time.Millisecond)
	}
}

// cancel-newest: with two runs of a key in progress, new runs of it are
// cancelled at once, the reason naming the limit and the key; the two
// complete and no slot is left.
func TestRunLimitCancelNewest(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-newest", "3s"))
	first := startFor(t, st, g, "acme", 2)
	for _, r := range first {
		waitRunning(t, st, r)
	}
	newest := startFor(t, st, g, "acme", 3)
	for r, s := range waitEnded(t, st, newest, 30*time.Second) {
		if s.Status != projection.RunCancelled || s.Cancel == nil || s.Cancel.By != "flow" ||
			!strings.Contains(s.Cancel.Reason, `concurrency limit "runlimited" is full for key "acme" (max 2 runs; strategy cancel-newest)`) {
			t.Fatalf("run %s: %s %+v, want cancelled by the limit", r, s.Status, s.Cancel)
		}
		if s.Nodes["work"] != nil {
			t.Fatalf("run %s: a cancelled newest run started its node", r)
		}
	}
	for r, s := range waitEnded(t, st, first, 30*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s, want completed", r, s.Status)
		}
	}
	waitNoSlots(t, st)
}

// cancel-oldest: a new run over the limit has the oldest run of its key
// cancelled (the reason naming the limit, key and the new run) and takes
// its slot; the next new run has the next oldest cancelled. Never more
// than two in progress; no slot left.
func TestRunLimitCancelOldest(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	long := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "60s"))
	short := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "300ms"))
	var old []string
	for range 2 {
		r := startFor(t, st, long, "acme", 1)[0]
		waitRunning(t, st, r)
		old = append(old, r)
	}
	var newer []string
	for i := range 2 {
		r := startFor(t, st, short, "acme", 1)[0]
		newer = append(newer, r)
		s := waitEnded(t, st, []string{old[i]}, 30*time.Second)[old[i]]
		want := fmt.Sprintf(`concurrency limit "runlimited" is full for key "acme" (max 2 runs; strategy cancel-oldest): run %s takes this run's slot`, r)
		if s.Status != projection.RunCancelled || s.Cancel == nil || s.Cancel.By != "flow" || !strings.Contains(s.Cancel.Reason, want) {
			t.Fatalf("oldest run %s: %s %+v, want cancelled for %s", old[i], s.Status, s.Cancel, r)
		}
	}
	for r, s := range waitEnded(t, st, newer, 30*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("new run %s: %s %+v, want completed", r, s.Status, s.Error)
		}
	}
	checkRunPeak(t, st, append(old, newer...), 2, "acme")
}

// endsGraph's runs hold their slot 2s, then end as mode says
// (invocation.mode): complete, fail, hang (until cancelled or
// terminated) or continue as new once; one slot per tenant.
const endsGraph = `
name: ends
concurrency: {max: 1, key: "invocation.tenant"}
nodes:
  - {id: hold, type: sleep, config: {duration: 2s}}
  - {id: pick, type: transform, config: {set: {i: "has(state.i) ? state.i + 1 : 1"}}}
  - {id: ok, type: sleep, config: {duration: 50ms}}
  - {id: bad, type: fail, config: {message: "no", retryable: false}}
  - {id: hang, type: sleep, config: {duration: 120s}, timeout: 180s}
edges:
  - {from: START, to: hold}
  - {from: hold, to: pick}
  - {from: pick, to: ok, when: "invocation.mode == 'complete' || (invocation.mode == 'continue' && state.i >= 2)"}
  - {from: pick, to: bad, when: "invocation.mode == 'fail'"}
  - {from: pick, to: hang, when: "invocation.mode == 'cancel' || invocation.mode == 'terminate'"}
  - {from: pick, to: CONTINUE, when: "invocation.mode == 'continue' && state.i < 2"}
  - {from: ok, to: END}
  - {from: bad, to: END}
  - {from: hang, to: END}
`

// startMode starts a run of g for tenant with invocation mode.
func startMode(t *testing.T, st events.Store, g *graph.Graph, tenant, mode string) string {
	t.Helper()
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Invocation: []byte(fmt.Sprintf(`{"tenant":%q,"mode":%q}`, tenant, mode)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, 0, e); err != nil {
		t.Fatal(err)
	}
	return run
}

// waitSlotWait waits until run waits, or waited, for its own slot (a
// node.waiting of START in its log); now says it must wait still.
func waitSlotWait(t *testing.T, st events.Store, run string, now bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _ := st.Read(context.Background(), run, 0, 0)
		s := projection.Fold(evs)
		ns := s.Nodes[graph.Start]
		if ns != nil && ns.Slot != nil && (!now || ns.Status == projection.NodeWaiting && s.Waiting()) {
			return
		}
		if time.Now().After(deadline) {
			for _, e := range evs {
				t.Logf("%d %s %.200s", e.Seq, e.Type, e.Data)
			}
			t.Fatalf("run %s does not wait for its slot", run)
		}
		// Polls: the wait is an event of the run, read afresh.
		time.Sleep(50 * time.Millisecond)
	}
}

// A run gives its slot back however it ends — completed, failed,
// cancelled, terminated, continued as new — and a run cancelled while it
// waits for one leaves the line: each tenant's second run, which waited,
// then completes, and no slot is left.
func TestRunSlotReleasedOnEveryEnd(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, endsGraph)
	want := map[string]projection.RunStatus{"complete": projection.RunCompleted, "fail": projection.RunFailed,
		"cancel": projection.RunCancelled, "terminate": projection.RunCancelled, "continue": projection.RunCompleted}
	firsts, seconds := map[string]string{}, map[string]string{}
	for mode := range want {
		firsts[mode] = startMode(t, st, g, mode, mode)
	}
	for mode := range want {
		waitRunningNode(t, st, firsts[mode], "hold")
		seconds[mode] = startMode(t, st, g, mode, "complete")
	}
	// A third run of one tenant, cancelled while it waits in line.
	waiting := startMode(t, st, g, "cancel", "complete")
	waitSlotWait(t, st, waiting, true)
	e, err := events.New(waiting, waiting+"-cancel", time.Now(), &events.RunCancelRequestedData{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, waiting, events.AnySeq, e); err != nil {
		t.Fatal(err)
	}
	if s := waitEnded(t, st, []string{waiting}, 30*time.Second)[waiting]; s.Status != projection.RunCancelled || s.Nodes["hold"] != nil {
		t.Fatalf("the run cancelled in line: %s, started %v", s.Status, s.Nodes["hold"] != nil)
	}
	for mode, second := range seconds {
		waitSlotWait(t, st, second, false)
		if mode == "cancel" || mode == "terminate" {
			r := firsts[mode]
			waitRunningNode(t, st, r, "hang")
			e, err := events.New(r, r+"-cancel", time.Now(), &events.RunCancelRequestedData{By: "test", Terminate: mode == "terminate"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Append(ctx, r, events.AnySeq, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for mode, r := range firsts {
		links := followChain(t, st, r, 60*time.Second)
		if s := links[len(links)-1]; s.Status != want[mode] || (mode == "continue") != (len(links) == 2) {
			t.Fatalf("%s: %d links, the last %s %+v, want %s", mode, len(links), s.Status, s.Error, want[mode])
		}
	}
	for mode, s := range waitEnded(t, st, slices.Collect(mapValues(seconds)), 60*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("second run %s: %s %+v, want completed after the first gave its slot back", mode, s.Status, s.Error)
		}
	}
	waitNoSlots(t, st)
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// waitRunningNode waits until the run's node is running.
func waitRunningNode(t *testing.T, st events.Store, run, node string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _ := st.Read(context.Background(), run, 0, 0)
		if ns := projection.Fold(evs).Nodes[node]; ns != nil && ns.Status == projection.NodeRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s is not running", run, node)
		}
		// Polls: the node's start is an event of the run, read afresh.
		time.Sleep(50 * time.Millisecond)
	}
}

// A coordinator stopped between taking a run's slot and appending what
// the grant leads to (its append of the first node-ready fails, then it
// is stopped) leaks nothing: the next coordinator decides the run again,
// finds the slot the run holds, and the run and the one waiting behind it
// complete, one at a time; no slot is left.
func TestRunSlotCoordinatorStoppedAfterTaking(t *testing.T) {
	_, base := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, base, "w1")
	faulty := testkit.NewFaultStore(base)
	failed := make(chan string, 16)
	faulty.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(run string, evs []*events.Event) error {
			for _, e := range evs {
				if e.Type == events.NodeReady {
					select {
					case failed <- run:
					default:
					}
					return errors.New("injected: the coordinator dies before its append")
				}
			}
			return nil
		}
	})
	a := coordinator.New(faulty, coordinator.WithLogger(quiet()))
	actx, stopA := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(actx) }()
	g := mustGraph(t, strings.Replace(fmt.Sprintf(runLimitGraph, "queue", "200ms"), "max: 2", "max: 1", 1))
	runs := startFor(t, base, g, "acme", 2)
	var took string
	select {
	case took = <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("the coordinator never tried to start a run")
	}
	stopA()
	<-done
	if !slices.Contains(runs, took) {
		t.Fatalf("the failed append was of run %s, not one of %v", took, runs)
	}
	// The slot was taken, and what it led to was not appended.
	l, err := flow.Open(ctx, eventlog.JetStream(base), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := l.Entries(ctx); err != nil || len(es) != 1 || len(es[0].Holders) != 1 || es[0].Holders[0].Run != took {
		t.Fatalf("bucket after the stop: %+v %v, want %s holding the slot", es, err, took)
	}
	runCoordinator(t, ctx, base, coordinator.WithLogger(quiet()))
	for r, s := range waitEnded(t, base, runs, 60*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %+v", r, s.Status, s.Error)
		}
	}
	checkExactlyOnce(t, base, runs, 1)
	if peak, _ := peakRuns(t, base, runs); peak[`{"tenant":"acme"}`] != 1 {
		t.Fatalf("runs in progress at once: %v, want 1", peak)
	}
	waitNoSlots(t, base)
}

// typeLimitedGraph limits every sleep node by its type, a limit shared
// by name (type/sleep) with every graph that limits the type.
const typeLimitedGraph = `
name: %s
limits: {types: {sleep: {concurrency: {max: 2}}}}
nodes:
  - {id: one, type: sleep, config: {duration: 100ms}, timeout: 30s}
  - {id: two, type: sleep, config: {duration: 100ms}, timeout: 30s}
edges:
  - {from: START, to: one}
  - {from: START, to: two}
  - {from: one, to: END}
  - {from: two, to: END}
`

// A limit by node type binds every node of the type in every graph that
// declares it: two graphs, two sleep nodes each, never more than two
// sleeping at once; every run completes and no slot is left.
func TestTypeLimitAcrossGraphs(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	a := mustGraph(t, fmt.Sprintf(typeLimitedGraph, "alpha"))
	b := mustGraph(t, fmt.Sprintf(typeLimitedGraph, "beta"))
	runs := append(startFor(t, st, a, "x", 4), startFor(t, st, b, "x", 4)...)
	waitEnded(t, st, runs, 90*time.Second)
	checkExactlyOnce(t, st, runs, 2)
	checkLimit(t, st, runs, "")
}

// mapLimitedGraph maps over items, each of a tenant: every item's
// attempt takes a slot of the node's limit by the item's tenant.
const mapLimitedGraph = `
name: maplimited
nodes:
  - {id: each, type: sleep, config: {duration: 150ms}, timeout: 30s, retry: {maxAttempts: 1},
     map: {over: "state.items"}, concurrency: {max: 2, key: "local.item.tenant"}}
edges:
  - {from: START, to: each}
  - {from: each, to: END}
`

// A map node's items each take their node's limit: three runs of six
// items over two tenants, never more than two items of a tenant at once
// across the runs; every run completes and no slot is left.
func TestMapItemsTakeTheirNodesLimit(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, mapLimitedGraph)
	var runs []string
	for range 3 {
		run := events.NewRunID()
		e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
			Input: []byte(`{"items":[{"tenant":"a"},{"tenant":"b"},{"tenant":"a"},{"tenant":"a"},{"tenant":"b"},{"tenant":"a"}]}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, run, 0, e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for r, s := range waitEnded(t, st, runs, 90*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %+v", r, s.Status, s.Error)
		}
	}
	peak := itemPeak(t, st, runs)
	if peak["a"] != 2 || peak["b"] != 2 {
		t.Fatalf("items of a tenant at once: %v, want exactly the limit, 2, for a and b", peak)
	}
	waitNoSlots(t, st)
}

// itemPeak reads the runs' logs and returns, per key, the most map items
// that held a slot at once in the stream's order (from an item's
// node-ready to its outcome).
func itemPeak(t *testing.T, st events.Store, runs []string) map[string]int {
	t.Helper()
	type mark struct {
		seq   uint64
		key   string
		delta int
	}
	var marks []mark
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]string{}
		for _, e := range evs {
			p, err := e.Payload()
			if err != nil {
				continue
			}
			switch d := p.(type) {
			case *events.NodeReadyData:
				if d.Item != nil {
					if d.Slot == nil {
						t.Fatalf("run %s: item %s readied without a slot", run, d.Key())
					}
					held[fmt.Sprint(d.Key(), d.Attempt)] = d.Slot.Key
					marks = append(marks, mark{e.Seq, d.Slot.Key, +1})
				}
			case *events.NodeInvokedData:
				if k, ok := held[fmt.Sprint(d.Key(), d.Attempt)]; ok {
					marks = append(marks, mark{e.Seq, k, -1})
				}
			case *events.NodeFailedData:
				if k, ok := held[fmt.Sprint(d.Key(), d.Attempt)]; ok {
					marks = append(marks, mark{e.Seq, k, -1})
				}
			}
		}
	}
	slices.SortFunc(marks, func(a, b mark) int {
		if a.seq != b.seq {
			return int(a.seq) - int(b.seq)
		}
		return a.delta - b.delta
	})
	cur, peak := map[string]int{}, map[string]int{}
	for _, m := range marks {
		cur[m.key] += m.delta
		peak[m.key] = max(peak[m.key], cur[m.key])
	}
	return peak
}

// A run cancelled while its map items hold and wait for slots gives
// both back at once (not after the sweep's grace): nothing is left in the
// bucket.
func TestMapItemSlotsReleasedOnCancel(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, strings.NewReplacer("150ms", "60s", "max: 2", "max: 1").Replace(mapLimitedGraph))
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Input: []byte(`{"items":[{"tenant":"a"},{"tenant":"a"},{"tenant":"a"}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, run, 0, e); err != nil {
		t.Fatal(err)
	}
	l, err := flow.Open(ctx, eventlog.JetStream(st), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		es, _ := l.Entries(ctx)
		if len(es) == 1 && len(es[0].Holders) == 1 && len(es[0].Waiters) == 1 {
			break // one item holds, the next waits (the third is not asked yet)
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket %+v, want one item holding and one waiting", es)
		}
		// Polls: the bucket's changes are not watched here.
		time.Sleep(50 * time.Millisecond)
	}
	c, err := events.New(run, run+"-cancel", time.Now(), &events.RunCancelRequestedData{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, run, events.AnySeq, c); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, st, []string{run}, 30*time.Second)
	waitNoSlots(t, st)
}
