package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/bench"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// The flow-control figures, at sizes a shared machine takes in a minute:
// WEFT_FLOW_BENCH=1 go test -run TestFlowFigures -v ./internal/coordinator
// (not in make test: it measures, it does not check).
func TestFlowFigures(t *testing.T) {
	if os.Getenv("WEFT_FLOW_BENCH") == "" {
		t.Skip("WEFT_FLOW_BENCH=1 to measure")
	}
	t.Run("fairness", flowFairness)
	t.Run("nonbinding", flowNonBinding)
	t.Run("rate", flowRate)
}

func flowEnv(t *testing.T) events.Store {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	return st
}

// startFair starts n runs of g with a fairness key in one burst of
// asynchronous publishes, as 'make bench' does: the coordinator gets them
// all at once, not at the pace of one append after the other.
func startFair(t *testing.T, st events.Store, g *graph.Graph, fairness string, n int) []string {
	js := eventlog.JetStream(st)
	var runs []string
	var acks []jetstream.PubAckFuture
	for range n {
		run := events.NewRunID()
		e, _ := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
			Invocation: json.RawMessage(`{}`), FairnessKey: fairness})
		m, err := eventlog.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		runs, acks = append(runs, run), append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(time.Minute):
			t.Fatal("a run's start was not acknowledged in a minute")
		}
	}
	return runs
}

func span(states map[string]*projection.State, runs []string) time.Duration {
	var first, last time.Time
	for _, r := range runs {
		s := states[r]
		if first.IsZero() || s.StartedAt.Before(first) {
			first = *s.StartedAt
		}
		if s.EndedAt.After(last) {
			last = *s.EndedAt
		}
	}
	return last.Sub(first)
}

const fairGraph = `
name: fair
nodes:
  - {id: work, type: sleep, config: {duration: 20ms}, concurrency: {max: 8}}
edges: [{from: START, to: work}, {from: work, to: END}]
`

// Two fairness keys behind one limit of 8: 1,000 runs of "big" and 10 of
// "small" started at once (big first); the small key's runs complete
// within how long of their time alone?
func flowFairness(t *testing.T) {
	st := flowEnv(t)
	g := mustGraph(t, fairGraph)
	alone := startFair(t, st, g, "small", 10)
	aloneT := span(waitEnded(t, st, alone, time.Minute), alone)
	big := startFair(t, st, g, "big", 1000)
	small := startFair(t, st, g, "small", 10)
	states := waitEnded(t, st, small, 5*time.Minute)
	smallT := span(states, small)
	bigStates := waitEnded(t, st, big, 5*time.Minute)
	ph, err := bench.Phases(t.Context(), st, small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fairness: small key alone %s; beside 1,000 runs of another key %s (%.2fx); the big key's 1,000 runs %s; the small key's runs beside it, at most: %s",
		aloneT.Round(time.Millisecond), smallT.Round(time.Millisecond), float64(smallT)/float64(aloneT), span(bigStates, big).Round(time.Millisecond), ph)
}

// A limit that never binds (max 1000 over 300 runs): throughput with and
// without it.
func flowNonBinding(t *testing.T) {
	measure := func(src string) time.Duration {
		st := flowEnv(t)
		runs := startFor(t, st, mustGraph(t, src), "k", 300)
		return span(waitEnded(t, st, runs, 5*time.Minute), runs)
	}
	plain := measure(`
name: plain
nodes: [{id: work, type: echo}]
edges: [{from: START, to: work}, {from: work, to: END}]
`)
	limited := measure(`
name: limited
nodes: [{id: work, type: echo, concurrency: {max: 1000, key: "invocation.tenant"}}]
edges: [{from: START, to: work}, {from: work, to: END}]
`)
	t.Logf("non-binding limit: 300 runs in %s without, %s with (%.0f vs %.0f runs/s, cost %.1f%%)",
		plain.Round(time.Millisecond), limited.Round(time.Millisecond), 300/plain.Seconds(), 300/limited.Seconds(), 100*(limited.Seconds()-plain.Seconds())/plain.Seconds())
}

// A rate limit of 100/s over 1,000 runs started at once: the turns the
// log records, per second, after the first second's burst.
func flowRate(t *testing.T) {
	st := flowEnv(t)
	g := mustGraph(t, `
name: rated
nodes: [{id: call, type: echo, rate: {limit: 100, per: 1s, key: "invocation.tenant"}}]
edges: [{from: START, to: call}, {from: call, to: END}]
`)
	runs := startFor(t, st, g, "k", 1000)
	waitEnded(t, st, runs, 5*time.Minute)
	turns, _ := readyTimes(t, st, runs)
	slices.SortFunc(turns, func(a, b time.Time) int { return a.Compare(b) })
	// After the burst of 100, 900 turns at 100/s: 9s.
	steady := turns[100:]
	d := steady[len(steady)-1].Sub(steady[0])
	rate := float64(len(steady)-1) / d.Seconds()
	worst := 0
	for i := range steady {
		j := i
		for j < len(steady) && steady[j].Sub(steady[i]) < time.Second {
			j++
		}
		worst = max(worst, j-i)
	}
	t.Logf("rate limit 100/s: %d turns after the burst over %s: %.2f/s (%+.2f%%); most turns in any 1s window %d",
		len(steady), d.Round(time.Millisecond), rate, 100*(rate-100)/100, worst)
}
