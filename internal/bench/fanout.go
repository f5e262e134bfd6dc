package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// runFanout measures figure 3: one run whose noop node maps over N items
// (map.over "lists.range(N)", no concurrency cap) and a join node after it.
// The figure is the time from the stored run-started to the stored
// run-completed.
//
// The floor publishes and consumes the same messages through flow: one
// run, one step of width N (N ready, N invoking, N invoked, the routed
// and completed ends), measured from the moment its roles start to the
// stored completed message.
//
// Size: a benchmark script, read top to bottom (set up, measure, report
// rows).
func runFanout(ctx context.Context, e *env) ([]Result, error) {
	n := e.sizes.FanItems
	g, err := graph.New("fanout").
		Node("fan", "noop", graph.Map(fmt.Sprintf("lists.range(%d)", n), 0)).
		Node("join", "noop").
		Edge(graph.Start, "fan").Edge("fan", "join").Edge("join", graph.End).
		Build()
	if err != nil {
		return nil, err
	}
	stream, st, done, err := e.engineOn(ctx, "WEFT_FAN", e.sizes.TputWorkerConc)
	if err != nil {
		return nil, err
	}
	defer done()
	timeout := time.Minute + time.Duration(n)*20*time.Millisecond

	run := events.NewRunID()
	var started, ended time.Time
	err = e.profile("", func() error {
		ev, err := startedEvent(run, g, nil)
		if err != nil {
			return err
		}
		if _, err := st.Append(ctx, run, 0, ev); err != nil {
			return err
		}
		ends, err := waitRuns(ctx, e.js, stream, 1, timeout)
		if err != nil {
			return err
		}
		ended = ends[0].at
		s, err := collect(ctx, e.js, stream, []string{eventlog.KindFilter(events.RunStarted)}, 1, time.Minute)
		if err != nil {
			return err
		}
		started = s[0].at
		return nil
	})
	if err != nil {
		return nil, err
	}
	elapsed := ended.Sub(started)
	msgs, bytes, err := e.streamBytes(ctx, stream)
	if err != nil {
		return nil, err
	}
	mix, err := logMix(ctx, e.js, stream, eventlog.AllEvents, int(msgs))
	if err != nil {
		return nil, err
	}
	fl, _, err := e.floorFlow(ctx, flow{runs: 1, steps: 1, width: n, workerConc: e.sizes.TputWorkerConc, shards: floorShards, body: floorBody(int(bytes / max(msgs, 1)))}, n, timeout)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, k := range []string{"ready", "invoking", "invoked", "routed", "waiting"} {
		parts = append(parts, fmt.Sprintf("%s %d", k, mix[k]))
	}
	notes := fmt.Sprintf("%d items, worker concurrency %d; %.0f items/s (floor %.0f); engine log %d events (%s), avg %d B",
		n, e.sizes.TputWorkerConc, float64(n)/elapsed.Seconds(), float64(n)/fl.elapsed().Seconds(), msgs, strings.Join(parts, ", "), bytes/max(msgs, 1))
	return []Result{row("fan-out time to completion", elapsed.Seconds(), "s", fl.elapsed().Seconds(), nil, notes)}, nil
}
