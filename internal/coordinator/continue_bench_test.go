package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// The continue-as-new figures: an entity loop of WEFT_CAN_BENCH steps (1
// means 1,000,000), 1,000 steps a link, each step a local transform, on
// one coordinator process (the real binary) and an embedded server:
//
//	WEFT_CAN_BENCH=100000 go test -run TestContinueAsNewFigures -v -timeout 2h ./internal/coordinator
//
// It reports steps per second, the largest link history (events), and at
// every tenth of the way the coordinator process's resident set (VmRSS)
// and the test process's heap after a GC (the embedded server's, mostly):
// bounded links and a flat coordinator are what continue-as-new is for.
// Not in make test: it measures.
func TestContinueAsNewFigures(t *testing.T) {
	v := os.Getenv("WEFT_CAN_BENCH")
	if v == "" {
		t.Skip("WEFT_CAN_BENCH=STEPS (1: 1,000,000) to measure")
	}
	steps, err := strconv.Atoi(v)
	if err != nil || steps < 1 {
		t.Fatalf("WEFT_CAN_BENCH=%q: want a number of steps", v)
	}
	if steps == 1 {
		steps = 1_000_000
	}
	const perLink = 1000
	srv, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	coord := spawn(t, srv, "coordinator")
	g := mustGraph(t, fmt.Sprintf(`
name: entity
maxIterations: %d
nodes:
  - {id: step, type: transform, config: {set: {i: "state.i + 1"}}}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.i %% %d != 0"}
  - {from: step, to: CONTINUE, when: "state.i %% %d == 0 && state.i < %d"}
  - {from: step, to: END, when: "state.i >= %d"}
`, perLink, perLink, perLink, steps, steps))
	begin := time.Now()
	run, err := client.New(st).Start(ctx, g, client.WithInput(map[string]any{"i": 0}))
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	links, maxEvents, maxBytes, maxRSS := 0, 0, int64(0), uint64(0)
	nextMark := steps / 10
	var last *projection.State
	for cur := run; cur != ""; {
		s := waitLink(t, st, cur, 10*time.Minute)
		links++
		maxEvents = max(maxEvents, s.Stats.Events+s.Stats.Refused)
		maxBytes = max(maxBytes, s.Stats.Bytes)
		if s.Status != projection.RunCompleted {
			t.Fatalf("link %d (%s): %s %+v", links, cur, s.Status, s.Error)
		}
		if done := links * perLink; done >= nextMark || s.ContinuedAs == "" {
			el := time.Since(begin)
			rss := rssOf(coord.cmd.Process.Pid)
			maxRSS = max(maxRSS, rss)
			t.Logf("%7d steps  %4d links  %6.0f steps/s  largest link %d events  coordinator VmRSS %5.1f MiB  test heap %5.1f MiB", min(done, steps), links,
				float64(min(done, steps))/el.Seconds(), maxEvents, float64(rss)/(1<<20), float64(heap())/(1<<20))
			nextMark += steps / 10
		}
		last, cur = s, s.ContinuedAs
	}
	el := time.Since(begin)
	if got := string(last.Vars["i"]); got != strconv.Itoa(steps) {
		t.Fatalf("the chain ended at i = %s, want %d", got, steps)
	}
	t.Logf("FIGURE continue-as-new: %d steps in %d links of %d in %s: %.0f steps/s; largest link history %d events, %d payload bytes; coordinator VmRSS at most %.1f MiB",
		steps, links, perLink, el.Round(time.Second), float64(steps)/el.Seconds(), maxEvents, maxBytes, float64(maxRSS)/(1<<20))
	if steps < 1_000_000 {
		t.Logf("FIGURE extrapolated to 1,000,000 steps at this rate: %s", time.Duration(float64(time.Second)*1e6/(float64(steps)/el.Seconds())).Round(time.Second))
	}
}

// waitLink waits for one link of a chain to end, folding its history as
// it grows (each poll reads only what is new).
func waitLink(t *testing.T, st events.Store, run string, timeout time.Duration) *projection.State {
	t.Helper()
	deadline := time.Now().Add(timeout)
	s := &projection.State{}
	for {
		evs, err := st.Read(context.Background(), run, s.LastSeq+1, 0)
		if err == nil {
			for _, e := range evs {
				_ = s.Apply(e)
			}
			if s.Status.Ended() {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s did not end in %s", run, timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling the log: the link runs meanwhile
	}
}

// rssOf is a process's resident set (VmRSS), in bytes.
func rssOf(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
