package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// The durable-wait figures: N runs (10,000 unless WEFT_WAIT_RUNS says)
// wait at once on a wait node, with no worker running at all, and a
// coordinator in a child process (the memory figure's, runChild) reports
// its heap after GC before the runs, with every run waiting, and after
// every wait ended and every run completed; once with the default cache
// (10,000 runs: every waiting run cached) and once with a cache of 1,000
// (the cache bounds the coordinator's memory, whatever N; WEFT_WAIT_CACHE
// measures one cache size only):
//
//	WEFT_WAIT_BENCH=1 go test -run TestWaitFigures -v -timeout 30m ./internal/bench
//
// Not in make test: it measures, and checks only that no run ever made
// work for a worker and every run completed once its wait ended.
func TestWaitFigures(t *testing.T) {
	if os.Getenv("WEFT_WAIT_BENCH") == "" {
		t.Skip("WEFT_WAIT_BENCH=1 to measure")
	}
	n := 10000
	if v := os.Getenv("WEFT_WAIT_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("WEFT_WAIT_RUNS=%q: want a number of runs", v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	e, err := newEnv(ctx, Config{Storage: "memory", Sizes: tinySizes()}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.figure = "wait"
	caches := []int{defaultCache, 1000}
	if v := os.Getenv("WEFT_WAIT_CACHE"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			t.Fatalf("WEFT_WAIT_CACHE=%q: want a cache size", v)
		}
		caches = []int{c}
	}
	for _, cache := range caches {
		t.Run(fmt.Sprintf("cache%d", cache), func(t *testing.T) { waitFigure(ctx, t, e, n, cache) })
	}
}

func waitFigure(ctx context.Context, t *testing.T, e *env, n, cache int) {
	stream := e.name("WEFT_WAIT")
	defer e.dropStream(stream)
	if _, err := openStore(ctx, e.js, stream, jetstream.MemoryStorage); err != nil {
		t.Fatal(err)
	}
	st, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	count := func(filter string) uint64 {
		t.Helper()
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for _, c := range info.State.Subjects {
			total += c
		}
		return total
	}
	c, err := e.startChild(stream, cache, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Polling the server: the child creates its consumer when it is up.
		time.Sleep(500 * time.Millisecond)
		if ci, cerr := e.js.Consumer(ctx, stream, coordinator.ConsumerName("coordinator", 0)); cerr == nil && ci.CachedInfo() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child coordinator did not create its consumer in 30s")
		}
	}
	base, err := c.mem()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New("waits").
		Node("w", graph.TypeWait, graph.Config(map[string]string{"until": "state.until"})).
		Edge(graph.Start, "w").Edge("w", graph.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	// Every run waits until the same time, far enough ahead for all of
	// them to be waiting before it (starting takes a few ms a run on a
	// shared machine).
	until := time.Now().Add(30*time.Second + time.Duration(n)*6*time.Millisecond)
	t0 := time.Now()
	var waiting childStats
	for started := 0; started < n; {
		wave := min(memWave, n-started)
		if err := startWaiting(ctx, e.js, g, wave, until); err != nil {
			t.Fatal(err)
		}
		started += wave
		want := int64(eventsPerWaitingRun * started)
		for {
			if waiting, err = c.stats(); err != nil {
				t.Fatal(err)
			}
			if waiting.Processed >= want {
				break
			}
			if time.Now().After(until) {
				t.Fatalf("the coordinator handled %d of %d events before the runs' wait was to end: the machine is too slow for %d runs", waiting.Processed, want, n)
			}
			time.Sleep(100 * time.Millisecond) // polling the child's counters
		}
	}
	allWaiting := time.Since(t0)
	if waiting, err = c.mem(); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(until) {
		t.Fatalf("measured after the wait was to end; the machine is too slow for %d runs", n)
	}
	timers := count(eventlog.KindFilter(events.NodeWaiting))
	ready := count(eventlog.KindFilter(events.NodeReady))
	for time.Now().Before(until) || count(eventlog.KindFilter(events.RunCompleted)) < uint64(n) {
		if time.Now().After(until.Add(5 * time.Minute)) {
			t.Fatalf("%d of %d runs completed 5 minutes after their wait ended", count(eventlog.KindFilter(events.RunCompleted)), n)
		}
		time.Sleep(500 * time.Millisecond) // polling the stream
	}
	drained := time.Since(until)
	ended, err := c.mem()
	if err != nil {
		t.Fatal(err)
	}
	if ready != 0 || count(eventlog.KindFilter(events.NodeReady)) != 0 {
		t.Fatalf("%d work items: a wait node must make no work for a worker", ready)
	}
	fired := count(eventlog.KindFilter(events.TimerFired))
	per := (float64(waiting.HeapInuse) - float64(base.HeapInuse)) / float64(n)
	t.Logf("%d runs waiting at once on a wait node, no worker running, cache %d, child-process coordinator:", n, cache)
	t.Logf("  HeapInuse after GC: %.1f MiB before the runs, %.1f MiB with all %d waiting (%+.0f B a run), %.1f MiB once all ended",
		mib(base.HeapInuse), mib(waiting.HeapInuse), n, per, mib(ended.HeapInuse))
	t.Logf("  VmRSS: %.1f → %.1f → %.1f MiB; %d reloads, %d errors", mib(base.RSS), mib(waiting.RSS), mib(ended.RSS), ended.Reloads, ended.Errors)
	t.Logf("  %d node-waiting events, %d timers fired, 0 work items; all waiting %s after the first start; all %d completed %s after the wait's end",
		timers, fired, allWaiting.Round(time.Millisecond), n, drained.Round(time.Millisecond))
}

// startWaiting starts n runs of g whose input says until when to wait.
func startWaiting(ctx context.Context, js jetstream.JetStream, g *graph.Graph, n int, until time.Time) error {
	msgs := make([]*nats.Msg, 0, n)
	for range n {
		run := events.NewRunID()
		e, err := startedEvent(run, g, json.RawMessage(fmt.Sprintf(`{"until":%q}`, until.UTC().Format(time.RFC3339Nano))))
		if err != nil {
			return err
		}
		m, err := eventlog.Encode(e)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	return publishAll(ctx, js, msgs)
}
