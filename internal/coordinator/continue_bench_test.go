package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// The continue-as-new figures: an entity loop of WEFT_CAN_BENCH steps (1
// means 1,000,000), 1,000 steps a link, each step a local transform, on
// one in-process coordinator and an embedded server:
//
//	WEFT_CAN_BENCH=100000 go test -run TestContinueAsNewFigures -v -timeout 2h ./internal/coordinator
//
// It reports steps per second, the largest link history (events), and
// the process's heap (the coordinator and the embedded server together)
// after a GC at every tenth of the way: bounded links and a flat heap are
// what continue-as-new is for. Not in make test: it measures.
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
	_, st := natstest.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
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
	links, maxEvents, maxBytes := 0, 0, int64(0)
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
			t.Logf("%7d steps  %4d links  %6.0f steps/s  largest link %d events  heap %5.1f MiB", min(done, steps), links,
				float64(min(done, steps))/el.Seconds(), maxEvents, float64(heap())/(1<<20))
			nextMark += steps / 10
		}
		last, cur = s, s.ContinuedAs
	}
	el := time.Since(begin)
	if got := string(last.Vars["i"]); got != strconv.Itoa(steps) {
		t.Fatalf("the chain ended at i = %s, want %d", got, steps)
	}
	t.Logf("FIGURE continue-as-new: %d steps in %d links of %d in %s: %.0f steps/s; largest link history %d events, %d payload bytes; coordinator: %d continued, cache reloads %d",
		steps, links, perLink, el.Round(time.Second), float64(steps)/el.Seconds(), maxEvents, maxBytes, c.Stats().Continued, c.Stats().Reloads)
	if steps < 1_000_000 {
		t.Logf("FIGURE extrapolated to 1,000,000 steps at this rate: %s", time.Duration(float64(time.Second)*1e6/(float64(steps)/el.Seconds())).Round(time.Second))
	}
}

// waitLink waits for one link of a chain to end, polling its history.
func waitLink(t *testing.T, st events.Store, run string, timeout time.Duration) *projection.State {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err == nil {
			if s := projection.Fold(evs); s.Status.Ended() {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s did not end in %s", run, timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling the log: the link runs meanwhile
	}
}
