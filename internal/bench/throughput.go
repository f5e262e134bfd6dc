package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// runThroughput measures figure 2: a burst of concurrent runs of a noop
// chain, one coordinator and one worker (both in this process, each on its
// own connection). The run-started events are in the log before either
// starts, so all runs are in flight at once.
//
// The headline row, "burst wall clock", is what a user who starts the
// batch waits for: nodes over the time from the coordinator's start to the
// last run's completed event, beside the floor's own wall clock (its roles'
// start to its last completed message) measured in the same run. The
// "throughput" row is the sustained rate of node outcomes: invoked events
// between the 10th and 90th percentile of their stored times (ramp up and
// down left out). The notes count what a burst must not cause: runs the
// coordinator re-read from the log and events it handed back.
//
// Target (issue 30): both rows ≥ 0.6 of the floor, for 2,000 and for
// 10,000 runs, and in durable mode. Measured on the shared 2-core machine
// (2026-11-27, go run ./cmd/weftbench -only throughput [-runs 10000];
// -only throughput-durable; load average in brackets), wall clock ratio /
// sustained ratio:
//
//	2,000 runs, before (main c558ccf): 0.36 / 0.38 [9], 0.37 / 0.43 [17], 0.26 / 0.29 [11], 0.43 / 0.43 [11]
//	2,000 runs, after:                 0.30 / 0.32 [14], 0.44 / 0.54 [17], 0.40 / 0.47 [14-18], 0.27 / 0.31 [11], 0.26 / 0.29 [11]
//	10,000 runs: before 0.15 / 0.16 (once, earlier); after 0.56 / 0.62 [16-19]
//	durable, 2,000 runs: before 0.94 / 0.82 (once, earlier); after 0.90 / 0.91 [16-9]
//
// (The last two of each were run back to back, before and after in
// turn: the engine's wall clock rose, 867 → 1,356 and 1,406 → 1,470
// nodes/s, and the floor's more, as it decides at the coordinator's
// shards, 32 → 128.) Re-reads and hand-backs were 0 in every one. Missed at 2,000 runs and
// for the wall clock at 10,000: under this load the ratio is about the
// floor's CPU per node over Weft's (0.17 against 0.48-0.51 CPU-ms, pprof
// of the engine phase), which the changes (the worker's ack and checks
// off its slots, 128 coordinator shards, ended notices in place of a
// stream-info request per stale item) did not lower; they removed the
// waits (a 10,000-run burst's items all waited over 2 s and each paid
// the read).
//
// CPU per node, later that night (the decider's settled steps and one
// encoding per activation, Slot and Parse without fmt, State.Waits, shared
// header values; main 4509f98 against branch cpu, alternated, nine pairs,
// load 3.6-8, pprof's samples of the engine phase over its 20,000 nodes):
// 0.412-0.475 against 0.411-0.487 CPU-ms (floor 0.144-0.215): no change
// the noise lets one see. The cuts were each a few percent of the
// coordinator's share (about 30% of the process: the worker about 20%,
// the server and the GC the rest), and the wall-clock ratio swung
// 0.24-0.80 with the floor (3,150-9,576 nodes/s) under the other
// engineers' load. Missed: the ratio wants the CPU per node about halved.
//
// The floor is the same number of runs and nodes through flow: the
// messages the engine writes and reads per node, at the same concurrency
// (the same worker concurrency, as many coordinator shards as the
// coordinator's, floorShards), with no engine
// logic. The engine's message mix per node, counted from its log, is in
// the notes.
func runThroughput(ctx context.Context, e *env) ([]Result, error) {
	runs, nodes, conc := e.sizes.TputRuns, e.sizes.TputNodes, e.sizes.TputWorkerConc
	g, err := chainGraph("throughput", "noop", nodes, nil)
	if err != nil {
		return nil, err
	}
	total := runs * nodes
	timeout := time.Minute + time.Duration(total)*10*time.Millisecond
	eng, err := e.engineFlow(ctx, g, runs, conc, timeout)
	if err != nil {
		return nil, err
	}
	if eng.partial != "" {
		fl, ftput, err := e.floorFlow(ctx, flow{runs: runs, steps: nodes, width: 1, workerConc: conc, shards: floorShards, body: 460}, total, timeout)
		if err != nil || fl == nil {
			return []Result{
				row("burst wall clock", eng.tput, "nodes/s", 0, ratioAtLeast(0.6), eng.partial),
				row("throughput", eng.tput, "nodes/s", 0, ratioAtLeast(0.6), eng.partial),
			}, err
		}
		return []Result{
			row("burst wall clock", eng.tput, "nodes/s", float64(total)/fl.elapsed().Seconds(), ratioAtLeast(0.6), eng.partial+"; value: invoked nodes / elapsed"),
			row("throughput", eng.tput, "nodes/s", ftput, ratioAtLeast(0.6), eng.partial+"; value: invoked nodes / elapsed"),
		}, nil
	}
	fl, ftput, err := e.floorFlow(ctx, flow{runs: runs, steps: nodes, width: 1, workerConc: conc, shards: floorShards, body: floorBody(eng.avgSize)}, total, timeout)
	if err != nil {
		return nil, err
	}
	wall, fwall := float64(total)/eng.elapsed.Seconds(), float64(total)/fl.elapsed().Seconds()
	burst := fmt.Sprintf("%d runs × %d noop nodes, worker concurrency %d: %.2f s from the coordinator's start to the last run completed (floor %.2f s); sustained %.0f nodes/s (floor %.0f); %s",
		runs, nodes, conc, eng.elapsed.Seconds(), fl.elapsed().Seconds(), eng.tput, ftput, eng.intake())
	notes := fmt.Sprintf("%d runs × %d noop nodes, worker concurrency %d; wall clock %.0f nodes/s (floor %.0f); engine log per node: %s; %s; %s",
		runs, nodes, conc, wall, fwall, eng.mixPerNode(total), eng.intake(), eng.phases)
	return []Result{
		row("burst wall clock", wall, "nodes/s", fwall, ratioAtLeast(0.6), burst),
		row("throughput", eng.tput, "nodes/s", ftput, ratioAtLeast(0.6), notes),
	}, nil
}

// floorShards is the floor's coordinator concurrency: the coordinator's
// own (coordinator.DefaultShards), so that both decide as many runs at
// once.
const floorShards = coordinator.DefaultShards

// engineRun is a finished engine workload.
type engineRun struct {
	stream  string
	tput    float64 // sustained nodes/s
	elapsed time.Duration
	avgSize int
	mix     map[string]int
	msgs    uint64
	stats   coordinator.Stats
	partial string // set when the runs did not all complete in time
	phases  string // where a node's time goes
}

// intake says what the coordinator's intake cost: runs re-read from the
// log, events handed back (both 0 for a burst the server paces), stale
// decisions refused and transient errors.
func (r *engineRun) intake() string {
	return fmt.Sprintf("coordinator re-read %d runs from the log, handed back %d events, %d conflicts, %d errors",
		r.stats.Reloads, r.stats.HandedBack, r.stats.Conflicts, r.stats.Errors)
}

func (r *engineRun) mixPerNode(nodes int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.mix)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(r.mix[k])/float64(nodes)))
	}
	return fmt.Sprintf("%.2f events (%s)", float64(r.msgs)/float64(nodes), strings.Join(parts, ", "))
}

// engineFlow appends runs of g, then starts a coordinator and a worker and
// waits for every run to complete.
func (e *env) engineFlow(ctx context.Context, g *graph.Graph, runs, conc int, timeout time.Duration) (*engineRun, error) {
	return e.engineFlowWith(ctx, "WEFT_TPUT", g, runs, timeout, "", func(ctx context.Context, stream string) (func(), error) {
		work, err := e.startWorker(ctx, stream, conc)
		if err != nil {
			return nil, err
		}
		return work.stop, nil
	})
}

// startWorkerFunc starts a worker of the queue default on stream and
// returns what stops it.
type startWorkerFunc func(ctx context.Context, stream string) (stop func(), err error)

// engineFlowWith is engineFlow on a stream named after prefix, with the
// worker startWorker starts, profiled as phase.
func (e *env) engineFlowWith(ctx context.Context, prefix string, g *graph.Graph, runs int, timeout time.Duration, phase string, startWorker startWorkerFunc) (*engineRun, error) {
	stream := e.name(prefix)
	defer e.dropStream(stream)
	if _, err := e.openStore(ctx, e.js, stream); err != nil {
		return nil, err
	}
	if _, err := startRuns(ctx, e.js, g, runs); err != nil {
		return nil, err
	}
	r := &engineRun{stream: stream}
	var t0 time.Time
	var ends []stamp
	err := e.profile(phase, func() error {
		t0 = time.Now()
		coord, err := e.startCoordinator(ctx, stream)
		if err != nil {
			return err
		}
		defer coord.stop()
		stop, err := startWorker(ctx, stream)
		if err != nil {
			return err
		}
		defer stop()
		ends, err = waitRuns(ctx, e.js, stream, runs, timeout)
		r.stats = coord.coord.Stats()
		return err
	})
	nodes := len(g.Nodes()) * runs
	if err != nil {
		// Report what was done when time ran out, as a failing figure.
		invoked, _ := collect(ctx, e.js, stream, []string{eventlog.KindFilter(events.NodeInvoked)}, nodes, 10*time.Second)
		r.tput = float64(len(invoked)) / time.Since(t0).Seconds()
		r.partial = fmt.Sprintf("DID NOT FINISH in %s: %d of %d runs completed, %d of %d nodes (%v); coordinator: %d events handled, %d runs re-read from the log, %d events handed back, %d errors",
			timeout, len(ends), runs, len(invoked), nodes, err, r.stats.Processed, r.stats.Reloads, r.stats.HandedBack, r.stats.Errors)
		return r, nil
	}
	r.elapsed = last(ends).Sub(t0)
	invoked, err := collect(ctx, e.js, stream, []string{eventlog.KindFilter(events.NodeInvoked)}, nodes, time.Minute)
	if err != nil {
		return nil, err
	}
	r.tput = sustained(invoked)
	msgs, bytes, err := e.streamBytes(ctx, stream)
	if err != nil {
		return nil, err
	}
	r.msgs = msgs
	r.avgSize = int(bytes / max(msgs, 1))
	if r.mix, err = logMix(ctx, e.js, stream, eventlog.AllEvents, int(msgs)); err != nil {
		return nil, err
	}
	if r.phases, err = e.phases(ctx, stream, len(g.Nodes())); err != nil {
		r.phases = "phases not measured: " + err.Error()
	}
	return r, nil
}

// floorFlow runs the floor flow and returns it with its sustained rate of
// invoked messages.
func (e *env) floorFlow(ctx context.Context, f flow, invokedWant int, timeout time.Duration) (*floorRun, float64, error) {
	var fl *floorRun
	err := e.profile("floor", func() error {
		var err error
		fl, err = e.runFloor(ctx, f, timeout)
		return err
	})
	if fl != nil {
		defer e.dropStream(fl.stream)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("floor: %w", err)
	}
	invoked, err := collect(ctx, e.js, fl.stream, []string{fl.prefix + ".*.invoked"}, invokedWant, time.Minute)
	if err != nil {
		return nil, 0, err
	}
	return fl, sustained(invoked), nil
}

// phases splits the engine's time per node, from the stored times of its
// log: median ready → invoking (the work item's wait in its queue and the
// worker's start), invoking → invoked (the worker's execution and append)
// and invoked → the next node's ready (the coordinator's share).
//
// Size: one pass over the timeline's events, one case per phase boundary.
func (e *env) phases(ctx context.Context, stream string, nodes int) (string, error) {
	// The whole log, filtered here: a consumer with wildcard filters on
	// sparse subjects costs the server a scan per batch.
	log, err := collectAll(ctx, e.js, stream, []string{eventlog.AllEvents}, 2*time.Minute)
	if err != nil {
		return "", err
	}
	type key struct{ run, node string }
	ready, invoking, invoked := map[key]time.Time{}, map[key]time.Time{}, map[key]time.Time{}
	for _, s := range log {
		run, _ := eventlog.RunOf(s.subject)
		k := key{run, s.node}
		switch {
		case strings.Contains(s.subject, ".d.ready."):
			ready[k] = s.at
		case strings.HasSuffix(s.subject, ".invoking"):
			invoking[k] = s.at
		case strings.HasSuffix(s.subject, ".invoked"):
			invoked[k] = s.at
		}
	}
	var queue, exec, coord []time.Duration
	for k, r := range ready {
		if t, ok := invoking[k]; ok {
			queue = append(queue, t.Sub(r))
		}
	}
	for k, t := range invoking {
		if d, ok := invoked[k]; ok {
			exec = append(exec, d.Sub(t))
		}
	}
	for k, d := range invoked {
		i, err := strconv.Atoi(strings.TrimPrefix(k.node, "n"))
		if err != nil || i+1 >= nodes {
			continue
		}
		if r, ok := ready[key{k.run, nodeID(i + 1)}]; ok {
			coord = append(coord, r.Sub(d))
		}
	}
	if len(queue) == 0 || len(exec) == 0 || len(coord) == 0 {
		return "", fmt.Errorf("no phases in the log (%d messages)", len(log))
	}
	return fmt.Sprintf("median per node: ready → invoking %.2f ms, invoking → invoked %.2f ms, invoked → next ready %.2f ms",
		ms(pct(queue, 50)), ms(pct(exec, 50)), ms(pct(coord, 50))), nil
}
