package coordinator_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// A run limit's cancel-oldest strategy across coordinators: the runs of
// one key are owned by coordinators of different partitions, so the
// coordinator that admits a new run cancels a run another one owns.

// startOwned starts a run of g for tenant whose id falls in a partition
// owned accepts (of parts).
func startOwned(t *testing.T, st events.Store, g *graph.Graph, tenant string, parts int, owned func(p int) bool) string {
	t.Helper()
	run := events.NewRunID()
	for !owned(eventlog.PartitionOf(run, parts)) {
		run = events.NewRunID()
	}
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Invocation: []byte(fmt.Sprintf(`{"tenant":%q}`, tenant)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, 0, e); err != nil {
		t.Fatal(err)
	}
	return run
}

// heldBy is the ownership test of the partitions h holds now.
func heldBy(h *coordinator.Coordinator) func(p int) bool {
	ps := h.Partitions()
	return func(p int) bool { return slices.Contains(ps, p) }
}

// successorRe reads the run an eviction names in its cancellation.
var successorRe = regexp.MustCompile(`strategy cancel-oldest\): run (\S+) takes this run's slot`)

// checkEvicted checks that run was cancelled by the run limit for key
// acme, and returns the run its cancellation names as its successor.
func checkEvicted(t *testing.T, run string, s *projection.State) string {
	t.Helper()
	if s.Status != projection.RunCancelled || s.Cancel == nil || s.Cancel.By != "flow" ||
		!strings.Contains(s.Cancel.Reason, `concurrency limit "runlimited" is full for key "acme" (max 2 runs; strategy cancel-oldest)`) {
		t.Fatalf("run %s: %s %+v, want cancelled by the run limit", run, s.Status, s.Cancel)
	}
	m := successorRe.FindStringSubmatch(s.Cancel.Reason)
	if m == nil {
		t.Fatalf("run %s: the cancellation %q names no successor", run, s.Cancel.Reason)
	}
	return m[1]
}

// Two coordinators, each owning half the partitions: the two runs
// holding key acme are owned one by each, and each new run is owned by
// the coordinator that does not own the oldest holder. Each new run has
// the oldest holder cancelled (by the other coordinator, whose run it
// is), the cancellation naming the new run, and takes its slot; then a
// burst of runs alternately owned races for the key. Never more than
// two runs of the key in progress (from the log), every run ends, no
// slot is left.
func TestRunLimitCancelOldestAcrossPartitions(t *testing.T) {
	st, a, b := spreadPair(t)
	byA, byB := heldBy(a.c), heldBy(b.c)
	long := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "60s"))
	// The new runs last long enough that the second finds the first
	// still holding its slot, so that the oldest is old[1].
	short := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "3s"))

	old := []string{startOwned(t, st, long, "acme", pairParts, byA)}
	waitRunning(t, st, old[0])
	old = append(old, startOwned(t, st, long, "acme", pairParts, byB))
	waitRunning(t, st, old[1])
	// old[0] (a's) is the oldest: a run of b's evicts it; then old[1]
	// (b's) is, and a run of a's evicts it.
	var newer []string
	for i, owner := range []func(int) bool{byB, byA} {
		r := startOwned(t, st, short, "acme", pairParts, owner)
		newer = append(newer, r)
		s := waitEnded(t, st, []string{old[i]}, 30*time.Second)[old[i]]
		if got := checkEvicted(t, old[i], s); got != r {
			t.Fatalf("oldest run %s: cancelled for %s, want %s", old[i], got, r)
		}
	}
	for r, s := range waitEnded(t, st, newer, 30*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("new run %s: %s %+v, want completed", r, s.Status, s.Error)
		}
	}

	// A burst: eight runs of 1s started at once, owners alternating.
	burstG := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "1s"))
	var burst []string
	for i := range 8 {
		burst = append(burst, startOwned(t, st, burstG, "acme", pairParts, []func(int) bool{byA, byB}[i%2]))
	}
	checkBurst(t, st, burst)
	all := slices.Concat(old, newer, burst)
	checkRunPeak(t, st, all, 2, "acme")
	waitNoSlots(t, st)
}

// checkBurst waits for the burst's runs to end: each completed, or was
// cancelled by the limit naming as its successor another run of the
// burst (not necessarily a later one: the runs of the burst take their
// slots in the order they are decided, not started); some were cancelled
// (the limit bound).
func checkBurst(t *testing.T, st events.Store, burst []string) {
	t.Helper()
	cancelled := 0
	for r, s := range waitEnded(t, st, burst, 90*time.Second) {
		if s.Status == projection.RunCompleted {
			continue
		}
		cancelled++
		succ := checkEvicted(t, r, s)
		if succ == r || !slices.Contains(burst, succ) {
			t.Fatalf("run %s of the burst was cancelled for %s, not another run of the burst", r, succ)
		}
	}
	if cancelled == 0 {
		t.Fatal("no run of the burst was cancelled: the limit never bound")
	}
}

// runFlowCoordinator runs an in-process coordinator of parts partitions
// that sweeps the flow bucket every second, until the test ends.
func runFlowCoordinator(t *testing.T, st events.Store, parts int) *coordinator.Coordinator {
	t.Helper()
	c := coordinator.New(st, coordinator.WithPartitions(parts), coordinator.WithLeaseTTL(time.Second),
		coordinator.WithFlowSweep(time.Second), coordinator.WithLogger(quiet()))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// waitHolds waits until c holds exactly n partitions.
func waitHolds(t *testing.T, c *coordinator.Coordinator, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(c.Partitions()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator holds %v, want %d partitions", c.Partitions(), n)
		}
		// What a coordinator holds is its own state, which no event
		// announces: polled.
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCancelRequested waits until run's log has a cancellation request.
func waitCancelRequested(t *testing.T, st events.Store, run string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _ := st.Read(context.Background(), run, 0, 0)
		if slices.ContainsFunc(evs, func(e *events.Event) bool { return e.Type == events.RunCancelRequested }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s was never asked to cancel", run)
		}
		// Polls: the request is an event of the run, read afresh.
		time.Sleep(20 * time.Millisecond)
	}
}

// The same with one coordinator killed (no clean shutdown) mid-way: a
// coordinator process owns half the partitions and the two runs holding
// the key. It is frozen (SIGSTOP), two new runs owned by the in-process
// coordinator have them cancelled (the requests appended to the frozen
// one's runs), and it is killed (SIGKILL): the cancellations, the slots'
// release and the new runs' wake are left to the survivor once it takes
// the killed one's partitions over. Every run ends (the old cancelled
// naming their successors, the new completed), never more than two in
// progress, no slot left.
func TestRunLimitCancelOldestOwnerKilled(t *testing.T) {
	srv, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	const parts = 4
	a := runFlowCoordinator(t, st, parts)
	waitHolds(t, a, parts)
	p := spawn(t, srv, "coordinator", "-partitions", fmt.Sprint(parts), "-lease-ttl", "1s")
	waitHolds(t, a, parts/2)
	byA := heldBy(a)
	byP := func(p int) bool { return !byA(p) }
	long := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "60s"))
	short := mustGraph(t, fmt.Sprintf(runLimitGraph, "cancel-oldest", "500ms"))
	var old []string
	for range 2 {
		r := startOwned(t, st, long, "acme", parts, byP)
		waitRunning(t, st, r)
		old = append(old, r)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	newer := []string{startOwned(t, st, short, "acme", parts, byA), startOwned(t, st, short, "acme", parts, byA)}
	for _, r := range old {
		waitCancelRequested(t, st, r)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	var succ []string
	for r, s := range waitEnded(t, st, old, 60*time.Second) {
		succ = append(succ, checkEvicted(t, r, s))
	}
	// The new runs are decided concurrently: which evicts which is the
	// order their slots were asked for.
	if slices.Sort(succ); !slices.Equal(succ, slices.Sorted(slices.Values(newer))) {
		t.Fatalf("the old runs were cancelled for %v, want one for each new run %v", succ, newer)
	}
	for r, s := range waitEnded(t, st, newer, 60*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("new run %s: %s %+v, want completed", r, s.Status, s.Error)
		}
	}
	checkRunPeak(t, st, slices.Concat(old, newer), 2, "acme")
	waitNoSlots(t, st)
}
