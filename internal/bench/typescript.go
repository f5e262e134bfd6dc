package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/tsbuild"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
)

// runTypeScript measures the "typescript" figure: the TypeScript SDK's
// worker beside the Go SDK's, and both beside the raw JetStream floor, on
// the same server in the same run. Each worker is a process of its own
// serving the queue default, with this process's coordinator: the Go one
// is cmd/nodeworker (its built-in noop), the TypeScript one the SDK's
// dist/bench/worker.js (a noop done as the Go one does it), run by node;
// the SDK is built first when its build is missing or stale (package
// tsbuild).
//
//   - Hop latency: the hop figure's chain (Sizes.HopNodes noop nodes) run
//     twice with each worker, alternating (Go, TypeScript, TypeScript,
//     Go) so that a noisy moment does not fall on one side only, each run
//     on a fresh stream and after one unmeasured chain in the same worker
//     process (the steady hop: a Node worker's first items run before V8
//     compiled its hot path); the hops of both runs are pooled. Its floor
//     is the hop figure's floor chain.
//   - Throughput: the throughput figure's runs (Sizes.TputRuns ×
//     Sizes.TputNodes noop nodes, all started before the coordinator and
//     the worker), at the same worker concurrency; the sustained rate of
//     invoked events. Its floor is the throughput figure's floor flow.
//
// The rows give each worker against the floor, and the TypeScript worker
// against the Go one (the floor column holds the Go worker's figure): the
// issue's target is a hop p50 within 1.3× of the Go worker's.
//
// With -cpuprofile, node writes the TypeScript worker's CPU profiles
// (--cpu-prof, *.cpuprofile for Chrome's or VS Code's profiler) to the
// same directory.
//
// Size: a benchmark script, read top to bottom (build the SDK, start both
// fleets, measure, report rows).
func runTypeScript(ctx context.Context, e *env) ([]Result, error) {
	goBin, err := e.binary(ctx, "cmd/nodeworker")
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	root, node, err := tsbuild.SDK(bctx, nil)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("the TypeScript worker: %w", err)
	}
	script := filepath.Join(root, tsbuild.BenchWorker)
	floorScript := filepath.Join(root, tsbuild.NodeFloor)
	startGo := func(conc int) startWorkerFunc {
		return func(ctx context.Context, stream string) (func(), error) {
			return e.workerProc(ctx, stream, goBin, "-nats", e.url, "-stream", stream, "-storage", e.cfg.Storage,
				"-concurrency", strconv.Itoa(conc), "-log-level", "error", "-name", "go-bench", "-drain-timeout", "5s")
		}
	}
	startNode := func(script string, conc int, phase string) startWorkerFunc {
		return func(ctx context.Context, stream string) (func(), error) {
			var args []string
			if e.cfg.CPUProfile != "" {
				args = append(args, "--cpu-prof", "--cpu-prof-dir", e.cfg.CPUProfile, "--cpu-prof-name", fmt.Sprintf("%s-%s.%s.cpuprofile", e.figure, phase, stream))
			}
			args = append(args, script, "-nats", e.url, "-stream", stream, "-concurrency", strconv.Itoa(conc), "-name", "ts-bench")
			return e.workerProc(ctx, stream, node, args...)
		}
	}
	startTS := func(conc int, phase string) startWorkerFunc { return startNode(script, conc, phase) }
	startFloor := func(conc int, phase string) startWorkerFunc { return startNode(floorScript, conc, "nodefloor-"+phase) }

	// Hop latency.
	n := e.sizes.HopNodes
	g, err := chainGraph("tshop", "noop", n, nil)
	if err != nil {
		return nil, err
	}
	timeout := time.Minute + time.Duration(n)*100*time.Millisecond
	var goHops, tsHops, nfHops, goCoord, tsCoord, nfCoord, goPick, tsPick, nfPick []time.Duration
	avgSize := 0
	for i, side := range []string{"go", "ts", "nodefloor", "nodefloor", "ts", "go"} {
		var start startWorkerFunc
		switch side {
		case "go":
			start = startGo(16)
		case "ts":
			start = startTS(16, "hop")
		default:
			start = startFloor(16, "hop")
		}
		ch, err := e.chainWith(ctx, g, n, timeout, side+"-hop-"+strconv.Itoa(i), start)
		if err != nil {
			return nil, fmt.Errorf("hop chain, %s worker: %w", side, err)
		}
		switch side {
		case "go":
			goHops = append(goHops, ch.hops...)
			goCoord, goPick = append(goCoord, ch.coord...), append(goPick, ch.pickup...)
			avgSize = ch.avgSize
		case "ts":
			tsHops = append(tsHops, ch.hops...)
			tsCoord, tsPick = append(tsCoord, ch.coord...), append(tsPick, ch.pickup...)
		default:
			nfHops = append(nfHops, ch.hops...)
			nfCoord, nfPick = append(nfCoord, ch.coord...), append(nfPick, ch.pickup...)
		}
	}
	var fhops []time.Duration
	err = e.profile("floor-hop", func() error {
		fl, err := e.runFloor(ctx, flow{runs: 1, steps: n, width: 1, workerConc: 16, shards: floorShards, body: floorBody(avgSize)}, timeout)
		if fl != nil {
			defer e.dropStream(fl.stream)
		}
		if err != nil {
			return err
		}
		fch, err := e.floorHops(ctx, fl, n)
		if err == nil {
			fhops = fch.hops
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("floor chain: %w", err)
	}

	// Throughput.
	runs, nodes, conc := e.sizes.TputRuns, e.sizes.TputNodes, e.sizes.TputWorkerConc
	tg, err := chainGraph("tstput", "noop", nodes, nil)
	if err != nil {
		return nil, err
	}
	total := runs * nodes
	ttimeout := time.Minute + time.Duration(total)*10*time.Millisecond
	goRun, err := e.engineFlowWith(ctx, "WEFT_TSTPUT", tg, runs, ttimeout, "go-throughput", startGo(conc))
	if err != nil {
		return nil, fmt.Errorf("throughput, go worker: %w", err)
	}
	tsRun, err := e.engineFlowWith(ctx, "WEFT_TSTPUT", tg, runs, ttimeout, "ts-throughput", startTS(conc, "throughput"))
	if err != nil {
		return nil, fmt.Errorf("throughput, typescript worker: %w", err)
	}
	nfRun, err := e.engineFlowWith(ctx, "WEFT_TSTPUT", tg, runs, ttimeout, "nodefloor-throughput", startFloor(conc, "throughput"))
	if err != nil {
		return nil, fmt.Errorf("throughput, node floor: %w", err)
	}
	if goRun.partial != "" || tsRun.partial != "" || nfRun.partial != "" {
		return nil, fmt.Errorf("throughput: go worker: %s; typescript worker: %s; node floor: %s", or(goRun.partial, "done"), or(tsRun.partial, "done"), or(nfRun.partial, "done"))
	}
	_, ftput, err := e.floorFlow(ctx, flow{runs: runs, steps: nodes, width: 1, workerConc: conc, shards: floorShards, body: floorBody(goRun.avgSize)}, total, ttimeout)
	if err != nil {
		return nil, err
	}

	f50, f99 := pct(fhops, 50), pct(fhops, 99)
	g50, g99 := pct(goHops, 50), pct(goHops, 99)
	t50, t99 := pct(tsHops, 50), pct(tsHops, 99)
	n50 := pct(nfHops, 50)
	hopNotes := fmt.Sprintf("%d-node noop chain, twice per worker (go, ts, node floor, node floor, ts, go), %d hops each, each after one unmeasured chain in the same worker process (warm-up); each worker a process of its own (cmd/nodeworker; node %s; node %s), the coordinator in weftbench; floor: the hop figure's floor chain", n, len(tsHops), tsbuild.BenchWorker, tsbuild.NodeFloor)
	return []Result{
		row("typescript worker hop latency p50", ms(t50), "ms", ms(f50), nil, hopNotes),
		row("typescript worker hop latency p99", ms(t99), "ms", ms(f99), nil, "TypeScript: "+split(tsCoord, tsPick)),
		row("go worker process hop latency p50", ms(g50), "ms", ms(f50), nil, "Go: "+split(goCoord, goPick)),
		row("go worker process hop latency p99", ms(g99), "ms", ms(f99), nil, ""),
		row("typescript / go hop latency p50", ms(t50), "ms", ms(g50), ratioAtMost(1.3), "floor column: the Go worker's p50 in the same run"),
		row("typescript / go hop latency p99", ms(t99), "ms", ms(g99), nil, "floor column: the Go worker's p99 in the same run"),
		row("node floor hop latency p50", ms(n50), "ms", ms(f50), nil, "the least a Node worker does per item on nats.js (no checks, span, run start, timers or slots); "+split(nfCoord, nfPick)),
		row("typescript / node floor hop latency p50", ms(t50), "ms", ms(n50), nil, "the SDK's own share; floor column: the node floor's p50"),
		row("typescript worker throughput", tsRun.tput, "nodes/s", ftput, nil,
			fmt.Sprintf("%d runs × %d noop nodes, worker concurrency %d; %s", runs, nodes, conc, tsRun.phases)),
		row("go worker process throughput", goRun.tput, "nodes/s", ftput, nil, goRun.phases),
		row("typescript / go throughput", tsRun.tput, "nodes/s", goRun.tput, nil, "floor column: the Go worker's throughput in the same run"),
		row("node floor throughput", nfRun.tput, "nodes/s", ftput, nil, nfRun.phases),
		row("typescript / node floor throughput", tsRun.tput, "nodes/s", nfRun.tput, nil, "the SDK's own share; floor column: the node floor's throughput"),
	}, nil
}

// chainWith runs the chain g on a fresh stream with this process's
// coordinator and the worker start starts, after one unmeasured run of
// the same chain: a worker serves for days, and the figure is its steady
// hop, not its first items' (a Node worker's first hundreds of items run
// before V8 has compiled its hot path; every side gets the same warm-up).
func (e *env) chainWith(ctx context.Context, g *graph.Graph, n int, timeout time.Duration, phase string, start startWorkerFunc) (*chainRun, error) {
	stream := e.name("WEFT_TSHOP")
	defer e.dropStream(stream)
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		return nil, err
	}
	defer coord.stop()
	stop, err := start(ctx, stream)
	if err != nil {
		return nil, err
	}
	defer stop()
	if _, err := e.runChain(ctx, stream, st, g, n, timeout, "", 0); err != nil {
		return nil, fmt.Errorf("warm-up chain: %w", err)
	}
	return e.runChain(ctx, stream, st, g, n, timeout, phase, 1)
}

// workerProc spawns a worker process of the queue default on stream and
// waits until it pulls (a pull request of it is waiting on the queue's
// consumer, or the consumer delivered work already), so that the figure
// does not time its start.
func (e *env) workerProc(ctx context.Context, stream, bin string, args ...string) (func(), error) {
	p, err := e.spawn(bin, args...)
	if err != nil {
		return nil, err
	}
	stop := func() {
		if err := p.stop(); err != nil {
			e.logf("stopping worker %s: %v", filepath.Base(bin), err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := e.js.Consumer(ctx, stream, workqueue.QueueConsumer(worker.DefaultQueue))
		if err == nil {
			if info := c.CachedInfo(); info.NumWaiting >= 1 || info.Delivered.Consumer > 0 {
				return stop, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, fmt.Errorf("worker %s did not pull within a minute", filepath.Base(bin))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
