package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// runHop measures figure 1: a sequential chain of noop nodes. A hop is
// from the stored time of node i's invoked event to the stored time of node
// i+1's invoking event: the worker's outcome reaches the coordinator, which
// appends routed and ready; the ready reaches the worker, which appends
// invoking. Both ends are stamped by the server's clock when it stored the
// message (message metadata), so no client clock is involved.
//
// The floor is the same pattern with no engine logic (see flow): one run
// of the same number of width-1 steps, its hop measured the same way, from
// the stored invoked of step i to the stored invoking of step i+1. Per node
// is the steady cycle: (last invoked − first invoked) / (nodes − 1).
//
// Engine and floor run twice each, alternating (engine, floor, floor,
// engine: the engine's second chain on the same stream, coordinator and
// worker), and each side's hops are pooled, so that a noisy moment on a
// shared machine does not fall on one side only.
func runHop(ctx context.Context, e *env) ([]Result, error) {
	n := e.sizes.HopNodes
	g, err := chainGraph("hop", "noop", n, nil)
	if err != nil {
		return nil, err
	}
	stream, st, done, err := e.engineOn(ctx, "WEFT_HOP", 16)
	if err != nil {
		return nil, err
	}
	defer done()
	timeout := time.Minute + time.Duration(n)*100*time.Millisecond
	ch, err := e.runChain(ctx, stream, st, g, n, timeout, "", 0)
	if err != nil {
		return nil, err
	}
	fch, err := e.floorChain(ctx, n, ch.avgSize, timeout, "floor")
	if err != nil {
		return nil, err
	}
	fch2, err := e.floorChain(ctx, n, ch.avgSize, timeout, "floor-2")
	if err != nil {
		return nil, err
	}
	ch2, err := e.runChain(ctx, stream, st, g, n, timeout, "2", 1)
	if err != nil {
		return nil, fmt.Errorf("second chain: %w", err)
	}
	ch.pool(ch2)
	fch.pool(fch2)
	p50, p99 := pct(ch.hops, 50), pct(ch.hops, 99)
	f50, f99 := pct(fch.hops, 50), pct(fch.hops, 99)
	notes := fmt.Sprintf("%d-node chain, run twice (engine, floor, floor, engine), %d hops pooled per side; server-stored times (invoked i → invoking i+1); engine wrote %d events per run (%.1f per node, avg %d B)", n, len(ch.hops), ch.events, float64(ch.events)/float64(n), ch.avgSize)
	return []Result{
		row("hop latency p50", ms(p50), "ms", ms(f50), ratioAtMost(1.5), notes),
		row("hop latency p99", ms(p99), "ms", ms(f99), ratioAtMost(2), "engine: "+split(ch.coord, ch.pickup)+"; floor: "+split(fch.coord, fch.pickup)),
		row("time per chain node", ms(ch.perNode), "ms", ms(fch.perNode), nil, "(last invoked − first invoked) / (nodes − 1), the mean of the two runs; floor: same over the floor chains"),
	}, nil
}

// floorChain runs the floor's chain of n steps (messages of the engine's
// average size avg) under the profiler as phase, and measures its hops.
func (e *env) floorChain(ctx context.Context, n, avg int, timeout time.Duration, phase string) (*chainRun, error) {
	var fl *floorRun
	err := e.profile(phase, func() error {
		var err error
		fl, err = e.runFloor(ctx, flow{runs: 1, steps: n, width: 1, workerConc: 16, shards: floorShards, body: floorBody(avg)}, timeout)
		return err
	})
	if fl != nil {
		defer e.dropStream(fl.stream)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", phase, err)
	}
	fch, err := e.floorHops(ctx, fl, n)
	if err != nil {
		return nil, fmt.Errorf("%s chain: %w", phase, err)
	}
	return fch, nil
}

// chainRun is one measured run of a chain graph.
type chainRun struct {
	hops    []time.Duration // invoked of node i → invoking of node i+1
	perNode time.Duration
	coord   []time.Duration // invoked of node i → ready of node i+1 (the coordinator's share)
	pickup  []time.Duration // ready of node i+1 → its invoking (the worker's share)
	events  int             // the run's events
	avgSize int             // their average size, headers included
}

// pool adds the hops of another run of the same chain to ch's; the time
// per node becomes the mean of the two.
func (ch *chainRun) pool(o *chainRun) {
	ch.hops = append(ch.hops, o.hops...)
	ch.coord = append(ch.coord, o.coord...)
	ch.pickup = append(ch.pickup, o.pickup...)
	ch.perNode = (ch.perNode + o.perNode) / 2
}

// runChain starts one run of the chain g (n nodes) on stream, where a
// coordinator and a worker already run and ended runs ended before it
// (nothing is written meanwhile), waits for it to complete (under the
// profiler, as phase), and measures its hops from the stored times of its
// log.
func (e *env) runChain(ctx context.Context, stream string, st events.Store, g *graph.Graph, n int, timeout time.Duration, phase string, ended int) (*chainRun, error) {
	before, _, err := e.streamBytes(ctx, stream)
	if err != nil {
		return nil, err
	}
	run := events.NewRunID()
	err = e.profile(phase, func() error {
		ev, err := startedEvent(run, g, nil)
		if err != nil {
			return err
		}
		if _, err := st.Append(ctx, run, 0, ev); err != nil {
			return err
		}
		_, err = waitRuns(ctx, e.js, stream, ended+1, timeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	msgs, _, err := e.streamBytes(ctx, stream)
	if err != nil {
		return nil, err
	}
	log, err := collect(ctx, e.js, stream, []string{eventlog.RunFilter(run)}, int(msgs-before), time.Minute)
	if err != nil {
		return nil, err
	}
	invoked, invoking, ready := map[int]time.Time{}, map[int]time.Time{}, map[int]time.Time{}
	size := 0
	for _, s := range log {
		size += s.size
		i, err := strconv.Atoi(strings.TrimPrefix(s.node, "n"))
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(s.subject, ".invoked"):
			invoked[i] = s.at
		case strings.HasSuffix(s.subject, ".invoking"):
			invoking[i] = s.at
		case strings.Contains(s.subject, ".d.ready."):
			ready[i] = s.at
		}
	}
	hops, perNode, err := hopStats(n, invoked, invoking)
	if err != nil {
		return nil, fmt.Errorf("engine chain: %w", err)
	}
	ch := &chainRun{hops: hops, perNode: perNode, events: len(log), avgSize: size / max(len(log), 1)}
	ch.coord, ch.pickup = splitHops(n, invoked, ready, invoking)
	return ch, nil
}

// splitHops splits the hops of a chain of n nodes at node i+1's ready:
// invoked i → ready i+1 (the coordinator's share) and ready i+1 →
// invoking i+1 (the worker's).
func splitHops(n int, invoked, ready, invoking map[int]time.Time) (coord, pickup []time.Duration) {
	for i := 0; i+1 < n; i++ {
		if r, ok := ready[i+1]; ok {
			coord = append(coord, r.Sub(invoked[i]))
			pickup = append(pickup, invoking[i+1].Sub(r))
		}
	}
	return coord, pickup
}

// split says how a chain's hops split, by medians: the coordinator's
// share (invoked i → ready i+1) and the worker's (ready i+1 → invoking i+1).
func split(coord, pickup []time.Duration) string {
	if len(coord) == 0 || len(pickup) == 0 {
		return "no node-ready times"
	}
	return fmt.Sprintf("median invoked → next ready %.3f ms, ready → invoking %.3f ms", ms(pct(coord, 50)), ms(pct(pickup, 50)))
}

// floorHops measures the hops of a floor chain of n steps as runChain
// does the engine's (hops, per node and their split; no events or sizes).
func (e *env) floorHops(ctx context.Context, fl *floorRun, n int) (*chainRun, error) {
	fmsgs, _, err := e.streamBytes(ctx, fl.stream)
	if err != nil {
		return nil, err
	}
	flog, err := collect(ctx, e.js, fl.stream, []string{fl.prefix + ".>"}, int(fmsgs), time.Minute)
	if err != nil {
		return nil, err
	}
	finvoked, fready, finvoking := map[int]time.Time{}, map[int]time.Time{}, map[int]time.Time{}
	for _, s := range flog {
		step, err := strconv.Atoi(s.step)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(s.subject, ".invoked"):
			finvoked[step] = s.at
		case strings.HasSuffix(s.subject, ".invoking"):
			finvoking[step] = s.at
		case strings.HasSuffix(s.subject, ".ready"):
			fready[step] = s.at
		}
	}
	hops, perNode, err := hopStats(n, finvoked, finvoking)
	if err != nil {
		return nil, err
	}
	ch := &chainRun{hops: hops, perNode: perNode}
	ch.coord, ch.pickup = splitHops(n, finvoked, fready, finvoking)
	return ch, nil
}

// hopStats returns the hop latencies (invoked of i to invoking of i+1) and
// the steady time per node.
func hopStats(n int, invoked, invoking map[int]time.Time) ([]time.Duration, time.Duration, error) {
	var hops []time.Duration
	for i := 0; i+1 < n; i++ {
		a, ok1 := invoked[i]
		b, ok2 := invoking[i+1]
		if !ok1 || !ok2 {
			return nil, 0, fmt.Errorf("node %d or %d has no invoked/invoking event", i, i+1)
		}
		hops = append(hops, b.Sub(a))
	}
	if len(hops) == 0 {
		return nil, 0, fmt.Errorf("a chain of %d nodes has no hops", n)
	}
	per := invoked[n-1].Sub(invoked[0]) / time.Duration(n-1)
	return hops, per, nil
}

// pct is the p-th percentile (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// floorBody is the body size that gives floor messages the engine's
// average size (the floor's own headers and subject take about 100 bytes).
func floorBody(avg int) int { return max(avg-100, 16) }
