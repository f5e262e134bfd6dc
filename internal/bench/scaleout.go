package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

// runScaleout measures figure 6: I/O-bound nodes (sleep 20ms) run by 1, 2
// and 4 worker processes (cmd/nodeworker, built once and spawned, each with
// -concurrency so that its in-flight cap is the constraint), with one
// coordinator in this process. The figure is the sustained node rate (as
// for throughput) and its ratio to one worker. The first row's floor is the
// ideal rate of one worker, concurrency / sleep.
func runScaleout(ctx context.Context, e *env) ([]Result, error) {
	bin, err := e.binary(ctx, "cmd/nodeworker")
	if err != nil {
		return nil, err
	}
	s := e.sizes
	g, err := chainGraph("scaleout", "sleep", s.ScaleNodes, map[string]string{"duration": s.ScaleSleep.String()})
	if err != nil {
		return nil, err
	}
	ideal := float64(s.ScaleConc) / s.ScaleSleep.Seconds()
	var rows []Result
	var base float64
	for i, k := range s.ScaleWorkers {
		tput, err := e.scaleWith(ctx, bin, k, func(ctx context.Context, stream string) (float64, error) {
			if _, err := startRuns(ctx, e.js, g, s.ScaleRuns); err != nil {
				return 0, err
			}
			timeout := time.Minute + time.Duration(s.ScaleRuns*s.ScaleNodes)*s.ScaleSleep/time.Duration(s.ScaleConc)
			if _, err := waitRuns(ctx, e.js, stream, s.ScaleRuns, timeout); err != nil {
				return 0, err
			}
			invoked, err := collect(ctx, e.js, stream, []string{eventlog.KindFilter(events.NodeInvoked)}, s.ScaleRuns*s.ScaleNodes, time.Minute)
			if err != nil {
				return 0, err
			}
			return sustained(invoked), nil
		})
		if err != nil {
			return rows, fmt.Errorf("%d workers: %w", k, err)
		}
		name := fmt.Sprintf("scale-out %d worker(s)", k)
		if i == 0 {
			base = tput
			rows = append(rows, row(name, tput, "nodes/s", ideal*float64(k), nil,
				fmt.Sprintf("%d runs × %d sleep(%s) nodes, -concurrency %d per worker process; floor: the ideal rate, concurrency / sleep", s.ScaleRuns, s.ScaleNodes, s.ScaleSleep, s.ScaleConc)))
			continue
		}
		var t *target
		if k == 4 {
			t = ratioAtLeast(3.5)
		}
		rows = append(rows, row(name, tput, "nodes/s", base, t, fmt.Sprintf("floor: %d worker(s)' rate; ideal ratio %d", s.ScaleWorkers[0], k/s.ScaleWorkers[0])))
	}
	return rows, nil
}

// scaleWith runs k worker processes and an in-process coordinator on a
// fresh stream, waits until every worker pulls, and calls fn.
func (e *env) scaleWith(ctx context.Context, bin string, k int, fn func(ctx context.Context, stream string) (float64, error)) (float64, error) {
	stream := e.name("WEFT_SCALE")
	defer e.dropStream(stream)
	if _, err := e.openStore(ctx, e.js, stream); err != nil {
		return 0, err
	}
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		return 0, err
	}
	defer coord.stop()
	var procs []*proc
	defer func() {
		for _, p := range procs {
			if err := p.stop(); err != nil {
				e.logf("stopping a worker: %v", err)
			}
		}
	}()
	for i := range k {
		p, err := e.spawn(bin, "-nats", e.url, "-stream", stream, "-storage", e.cfg.Storage, "-concurrency", strconv.Itoa(e.sizes.ScaleConc),
			"-log-level", "error", "-name", "w"+strconv.Itoa(i), "-drain-timeout", "5s")
		if err != nil {
			return 0, err
		}
		procs = append(procs, p)
	}
	// Every worker has a pull request waiting: all are ready.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := e.js.Consumer(ctx, stream, workqueue.QueueConsumer(worker.DefaultQueue))
		if err == nil && c.CachedInfo().NumWaiting >= k {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("%d worker processes did not all start pulling in a minute", k)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var tput float64
	err = e.profile(strconv.Itoa(k), func() error {
		var err error
		tput, err = fn(ctx, stream)
		return err
	})
	return tput, err
}
