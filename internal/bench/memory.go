package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/pkg/graph"
)

// defaultCache is the coordinator's default cache size (coordinator.New).
const defaultCache = 10000

// memWave is how many runs the memory figure starts at a time.
const memWave = 1000

// runMemory measures figure 5: the coordinator's memory per run waiting on
// a human node. The coordinator runs alone in a child process (this
// program re-executed as a child coordinator, see runChild), so that the
// embedded server, the harness and its client buffers are not counted. The
// child reports HeapInuse after two GCs, and VmRSS after returning freed
// memory to the OS, once before the runs start and once after every run
// is waiting (its run-started and waiting events handled: the routing from
// START is written with the waiting event). The figure
// is the HeapInuse delta per run; the RSS delta is in the notes.
//
// The coordinator's LRU cache bounds its memory by design: with the default
// cache (10,000 runs) a run that falls out costs nothing until its next
// event. So the figure is given twice: with the default cache, and with a
// cache big enough to hold every waiting run, which shows what one cached
// run costs.
//
// This figure's stream is on memory storage whatever -storage says: the
// coordinator's memory does not depend on it, and on file storage every
// decision batch costs the server a temporary file store (see
// bench/README.md), which would make starting 100,000 runs take many
// minutes.
func runMemory(ctx context.Context, e *env) ([]Result, error) {
	n := e.sizes.MemRuns
	g, err := graph.New("approval").
		Node("approve", graph.TypeHuman).
		Edge(graph.Start, "approve").Edge("approve", graph.End).
		Build()
	if err != nil {
		return nil, err
	}
	var rows []Result
	caches := []int{defaultCache, n + 1000}
	if n <= defaultCache {
		caches = caches[:1] // the default cache holds every run already
	}
	for _, cache := range caches {
		r, err := e.memoryWith(ctx, g, n, cache)
		if err != nil {
			return rows, fmt.Errorf("cache %d: %w", cache, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Size: a benchmark script, read top to bottom (set up, load, measure,
// report rows).
func (e *env) memoryWith(ctx context.Context, g *graph.Graph, n, cache int) (Result, error) {
	stream := e.name("WEFT_MEM")
	defer e.dropStream(stream)
	if _, err := openStore(ctx, e.js, stream, jetstream.MemoryStorage); err != nil {
		return Result{}, err
	}
	c, err := e.startChild(stream, cache, true)
	if err != nil {
		return Result{}, err
	}
	defer c.stop()
	// Let the child connect and create its consumer before the baseline.
	var base childStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		if base, err = c.mem(); err != nil {
			return Result{}, err
		}
		if ci, cerr := e.js.Consumer(ctx, stream, coordinator.ConsumerName("coordinator", 0)); cerr == nil && ci.CachedInfo() != nil {
			break
		}
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("the child coordinator did not create its consumer in 30s")
		}
	}
	if base, err = c.mem(); err != nil {
		return Result{}, err
	}
	// Runs start in waves the coordinator keeps up with: an overloaded
	// coordinator sees redeliveries, which make it re-read every cached run
	// (see the notes of the throughput figure), and this figure is about
	// memory, not overload.
	t0 := time.Now()
	deadline = time.Now().Add(time.Minute + time.Duration(n)*6*time.Millisecond)
	var after childStats
	for started := 0; started < n; {
		wave := min(memWave, n-started)
		if _, err := startRuns(ctx, e.js, g, wave); err != nil {
			return Result{}, err
		}
		started += wave
		// Each run is one event handled: its run-started (the waiting,
		// which carries the routing from START, is the coordinator's own).
		want := int64(eventsPerWaitingRun * started)
		for {
			if after, err = c.stats(); err != nil {
				return Result{}, err
			}
			if after.Processed >= want {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return Result{}, fmt.Errorf("the coordinator handled %d of %d events", after.Processed, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if after, err = c.mem(); err != nil {
		return Result{}, err
	}
	want := int64(eventsPerWaitingRun * n)
	took := time.Since(t0)
	if after.Processed > want+int64(n/100) || after.Errors > 0 {
		e.logf("cache %d: processed %d events (want %d), %d errors", cache, after.Processed, want, after.Errors)
	}
	per := (float64(after.HeapInuse) - float64(base.HeapInuse)) / float64(n)
	rss := (float64(after.RSS) - float64(base.RSS)) / float64(n)
	name := fmt.Sprintf("coordinator memory per waiting run (cache %d)", cache)
	notes := fmt.Sprintf("%d runs waiting on a human node; child-process coordinator, HeapInuse after GC %.1f → %.1f MiB; VmRSS delta %.0f B/run (%.1f → %.1f MiB); %d reloads; all waiting after %s",
		n, mib(base.HeapInuse), mib(after.HeapInuse), rss, mib(base.RSS), mib(after.RSS), after.Reloads, took.Round(time.Millisecond))
	return row(name, per, "B/run", 0, valueAtMost(4096), notes), nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// eventsPerWaitingRun is what the coordinator handles per run before the
// run waits on its human node: its run-started (the node-waiting is its
// own decision, not delivered back to it: internal/coordinator lanes.go).
const eventsPerWaitingRun = 1
