package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// runFlow measures the flow-control figures of issue 28, each against a
// floor measured in the same run:
//
//   - fairness: 10 runs of a fairness key behind a concurrency limit of 8
//     (a 20ms sleep node), alone, then started at once with
//     Sizes.FlowFairBig runs of another key (the big key's first
//     fairLead published first, so that it holds every slot, then the
//     rest of its burst and the small key's runs by two clients
//     together); the small key's span (its first start to its last end)
//     beside the big key over its span alone. Target ≤ 2.
//   - non-binding limit: Sizes.FlowRuns runs of an echo node, with a
//     concurrency limit by key that never binds (max 1,000, one key)
//     and without, alternated Sizes.FlowRounds times each; runs per
//     second (first start to last end), the best round of each. Target:
//     the ratio ≥ 0.91 (the limit costs ≤ 10%).
//   - rate: runs of an echo node under a rate limit of 100/s, started at
//     120/s for Sizes.FlowRateWindow plus a second; the node-ready
//     events' stored times after the first second's burst of 100: the
//     rate achieved over the configured 100. Target: within 5%.
func runFlow(ctx context.Context, e *env) ([]Result, error) {
	fair, err := flowFairness(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("fairness: %w", err)
	}
	nb, err := flowNonBinding(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("non-binding limit: %w", err)
	}
	rate, err := flowRate(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("rate: %w", err)
	}
	return []Result{fair, nb, rate}, nil
}

// flowPhase is a coordinator and a worker on a fresh stream.
type flowPhase struct {
	stream string
	stop   func()
}

func (e *env) flowPhase(ctx context.Context, prefix string) (*flowPhase, error) {
	stream := e.name(prefix)
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		return nil, err
	}
	w, err := e.startWorker(ctx, stream, 64)
	if err != nil {
		coord.stop()
		return nil, err
	}
	return &flowPhase{stream: stream, stop: func() { w.stop(); coord.stop(); e.dropStream(stream) }}, nil
}

// startKeyed appends n run-started events of g with a fairness key
// (asynchronous publishes) and returns the run ids.
func startKeyed(ctx context.Context, e *env, stream string, g *graph.Graph, fairness string, n int) ([]string, error) {
	runs := make([]string, 0, n)
	msgs := make([]*nats.Msg, 0, n)
	for i := range n {
		run := events.NewRunID()
		ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "weftbench",
			Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Invocation: json.RawMessage(`{"tenant":"k"}`), FairnessKey: fairness,
		})
		if err != nil {
			return nil, err
		}
		m, err := eventlog.Encode(ev)
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		msgs = append(msgs, m)
	}
	return runs, publishAll(ctx, e.js, msgs)
}

// runSpan is the span of runs from the first one's start to the last
// one's end, from their logs.
func runSpan(ctx context.Context, st events.Store, runs []string) (time.Duration, error) {
	var first, last time.Time
	for _, r := range runs {
		evs, err := st.Read(ctx, r, 0, 0)
		if err != nil {
			return 0, err
		}
		s := projection.Fold(evs)
		if s.StartedAt == nil || s.EndedAt == nil || s.Status != projection.RunCompleted {
			return 0, fmt.Errorf("run %s did not complete (%s)", r, s.Status)
		}
		if first.IsZero() || s.StartedAt.Before(first) {
			first = *s.StartedAt
		}
		if s.EndedAt.After(last) {
			last = *s.EndedAt
		}
	}
	return last.Sub(first), nil
}

// Phases splits runs' time, the longest of each: from the start to the
// first decision about the node (the coordinator's intake), from there to
// the node's ready (the wait for a slot), from there to the end. The
// fairness row's notes carry it, and so does the coordinator's
// TestFlowFigures.
func Phases(ctx context.Context, st events.Store, runs []string) (string, error) {
	var intake, slot, woken, rest, outcome time.Duration
	for _, r := range runs {
		evs, err := st.Read(ctx, r, 0, 0)
		if err != nil {
			return "", err
		}
		var started, decided, wake, ready, invoked, ended time.Time
		for _, e := range evs {
			switch {
			case e.Type == events.RunStarted:
				started = e.Time
			case (e.Type == events.NodeWaiting || e.Type == events.NodeReady) && decided.IsZero():
				decided = e.Time
			case e.Type == events.TimerFired && ready.IsZero():
				wake = e.Time // the slot's wake (the last before the node was made ready)
			}
			if e.Type == events.NodeReady && ready.IsZero() {
				ready = e.Time
			}
			if e.Type == events.NodeInvoked {
				invoked = e.Time
			}
			if e.Type == events.RunCompleted {
				ended = e.Time
			}
		}
		outcome = max(outcome, ended.Sub(invoked))
		intake, slot, rest = max(intake, decided.Sub(started)), max(slot, ready.Sub(decided)), max(rest, ended.Sub(ready))
		if !wake.IsZero() {
			woken = max(woken, ready.Sub(wake))
		}
	}
	return fmt.Sprintf("intake %s, slot wait %s (of which wake to ready %s), ready to end %s (of which outcome to end %s)",
		intake.Round(time.Millisecond), slot.Round(time.Millisecond), woken.Round(time.Millisecond), rest.Round(time.Millisecond), outcome.Round(time.Millisecond)), nil
}

// fairLead is how many of the big key's runs are published before the
// small key's start, beside the rest of the big key's burst.
const fairLead = 1000

const flowFairGraph = `
name: bench-fair
nodes:
  - {id: work, type: sleep, config: {duration: 20ms}, concurrency: {max: 8}}
edges: [{from: START, to: work}, {from: work, to: END}]
`

// flowFairness is the fairness row (runFlow).
func flowFairness(ctx context.Context, e *env) (Result, error) {
	g, err := graph.Parse([]byte(flowFairGraph), "bench-fair", graph.AllowAnyType())
	if err != nil {
		return Result{}, err
	}
	var phases string // the small key's worst run, beside the big key
	measure := func(big int) (time.Duration, time.Duration, error) {
		p, err := e.flowPhase(ctx, "WEFT_FAIR")
		if err != nil {
			return 0, 0, err
		}
		defer p.stop()
		st, err := e.openStore(ctx, e.js, p.stream)
		if err != nil {
			return 0, 0, err
		}
		bigRuns, small, err := startAtOnce(ctx, e, p.stream, g, big)
		if err != nil {
			return 0, 0, err
		}
		if _, err := waitRuns(ctx, e.js, p.stream, big+10, 2*time.Minute+time.Duration(big)*100*time.Millisecond); err != nil {
			return 0, 0, err
		}
		smallT, err := runSpan(ctx, st, small)
		if err != nil || big == 0 {
			return smallT, 0, err
		}
		if phases, err = Phases(ctx, st, small); err != nil {
			return 0, 0, err
		}
		bigT, err := runSpan(ctx, st, bigRuns)
		return smallT, bigT, err
	}
	var alone, beside, bigT time.Duration
	err = e.profile("floor", func() (err error) {
		alone, _, err = measure(0)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	err = e.profile("", func() (err error) {
		beside, bigT, err = measure(e.sizes.FlowFairBig)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	notes := fmt.Sprintf("%d runs of key \"big\" and 10 of key \"small\" started at once (the big key's first %d published, then the rest of its burst and the small key's 10 by two clients together), a sleep(20ms) node under concurrency {max: 8}, one worker at 64; small key's first start → last end; floor: the same 10 runs alone; the big key's runs took %s; the small key's runs beside it, the longest of each: %s",
		e.sizes.FlowFairBig, min(e.sizes.FlowFairBig, fairLead), bigT.Round(time.Millisecond), phases)
	return row("flow: fairness, small key beside a big one", ms(beside), "ms", ms(alone), ratioAtMost(2), notes), nil
}

// startAtOnce starts big runs of fairness key "big" and 10 of "small"
// at once: the big key's burst goes first and holds every slot; the small
// key's 10 start while the rest of it is still being published (two
// clients together).
func startAtOnce(ctx context.Context, e *env, stream string, g *graph.Graph, big int) ([]string, []string, error) {
	lead := min(big, fairLead)
	bigRuns, err := startKeyed(ctx, e, stream, g, "big", lead)
	if err != nil {
		return nil, nil, err
	}
	var rest []string
	var restErr error
	published := make(chan struct{})
	go func() {
		defer close(published)
		rest, restErr = startKeyed(ctx, e, stream, g, "big", big-lead)
	}()
	small, err := startKeyed(ctx, e, stream, g, "small", 10)
	<-published
	if err = errors.Join(err, restErr); err != nil {
		return nil, nil, err
	}
	return append(bigRuns, rest...), small, nil
}

// flowNonBinding is the non-binding limit's row (runFlow).
func flowNonBinding(ctx context.Context, e *env) (Result, error) {
	plain, err := flowGraph("bench-plain", `[{id: work, type: echo}]`)
	if err != nil {
		return Result{}, err
	}
	limited, err := flowGraph("bench-limited", `[{id: work, type: echo, concurrency: {max: 1000, key: "invocation.tenant"}}]`)
	if err != nil {
		return Result{}, err
	}
	n := e.sizes.FlowRuns
	measure := func(g *graph.Graph) (float64, error) {
		p, err := e.flowPhase(ctx, "WEFT_NB")
		if err != nil {
			return 0, err
		}
		defer p.stop()
		st, err := e.openStore(ctx, e.js, p.stream)
		if err != nil {
			return 0, err
		}
		runs, err := startKeyed(ctx, e, p.stream, g, "", n)
		if err != nil {
			return 0, err
		}
		if _, err := waitRuns(ctx, e.js, p.stream, n, 2*time.Minute+time.Duration(n)*10*time.Millisecond); err != nil {
			return 0, err
		}
		d, err := runSpan(ctx, st, runs)
		return float64(n) / d.Seconds(), err
	}
	var with, without []float64
	for range e.sizes.FlowRounds {
		err = e.profile("floor", func() error {
			r, err := measure(plain)
			without = append(without, r)
			return err
		})
		if err != nil {
			return Result{}, err
		}
		err = e.profile("", func() error {
			r, err := measure(limited)
			with = append(with, r)
			return err
		})
		if err != nil {
			return Result{}, err
		}
	}
	notes := fmt.Sprintf("%d runs of one echo node, one coordinator, one worker at 64, started in one publish burst; runs/s from the first start to the last end, the best of %d rounds each, alternated (with: %s; without: %s); with: concurrency {max: 1000, key: invocation.tenant}, every run the same key, which never binds",
		n, e.sizes.FlowRounds, rates(with), rates(without))
	return row("flow: throughput under a limit that never binds", slices.Max(with), "runs/s", slices.Max(without), ratioAtLeast(0.91), notes), nil
}

func rates(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.0f", x)
	}
	return out
}

// flowRate is the rate limit's row (runFlow).
func flowRate(ctx context.Context, e *env) (Result, error) {
	g, err := flowGraph("bench-rated", `[{id: work, type: echo, rate: {limit: 100, per: 1s, key: "invocation.tenant"}}]`)
	if err != nil {
		return Result{}, err
	}
	p, err := e.flowPhase(ctx, "WEFT_RATE")
	if err != nil {
		return Result{}, err
	}
	defer p.stop()
	window := e.sizes.FlowRateWindow
	// Started at 120/s (12 every 100ms) for the window and a second: the
	// limit binds throughout, and fewer turns wait than the key's bound
	// (flow.MaxWaiters).
	ticks := int((window + time.Second) / (100 * time.Millisecond))
	err = e.profile("", func() error {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for range ticks {
			if _, err := startKeyed(ctx, e, p.stream, g, "", 12); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		_, err := waitRuns(ctx, e.js, p.stream, 12*ticks, 2*time.Minute+window)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	readies, err := collect(ctx, e.js, p.stream, []string{eventlog.KindFilter(events.NodeReady)}, 12*ticks, time.Minute)
	if err != nil {
		return Result{}, err
	}
	steady, d, achieved, worst := steadyRate(readies, 100)
	notes := fmt.Sprintf("rate: {limit: 100, per: 1s} on an echo node, one key; %d runs started at 120/s; the stored times of the node-ready events after the first 100 (the burst): %d over %s, their rate the slope of their count over time; most in any 1s window %d; floor: the configured 100/s",
		12*ticks, steady, d.Round(time.Millisecond), worst)
	return row("flow: rate limit 100/s, achieved", achieved, "/s", 100, ratioWithin(0.05), notes), nil
}

// flowGraph is START → the one node → END.
func flowGraph(name, nodes string) (*graph.Graph, error) {
	src := "name: " + name + "\nnodes: " + nodes + "\nedges: [{from: START, to: work}, {from: work, to: END}]\n"
	return graph.Parse([]byte(src), name, graph.AllowAnyType())
}

// steadyRate is the rate of stamps after the first burst ones, in
// stored-time order: how many, over what span, per second (the slope of
// their count over their times, least squares: a late first or last one,
// a timer that fired late, does not tilt it as first-to-last would), and
// the most in any one-second window.
func steadyRate(stamps []stamp, burst int) (int, time.Duration, float64, int) {
	ts := make([]time.Time, len(stamps))
	for i, s := range stamps {
		ts[i] = s.at
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	if len(ts) < burst+2 {
		return 0, 0, 0, 0
	}
	steady := ts[burst:]
	d := steady[len(steady)-1].Sub(steady[0])
	worst := 0
	for i := range steady {
		j := i
		for j < len(steady) && steady[j].Sub(steady[i]) < time.Second {
			j++
		}
		worst = max(worst, j-i)
	}
	return len(steady), d, slope(steady), worst
}

// slope is the least-squares slope of i over ts[i], per second.
func slope(ts []time.Time) float64 {
	n := float64(len(ts))
	var sx, sy, sxx, sxy float64
	for i, t := range ts {
		x, y := t.Sub(ts[0]).Seconds(), float64(i)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	if den := n*sxx - sx*sx; den > 0 {
		return (n*sxy - sx*sy) / den
	}
	return 0
}
