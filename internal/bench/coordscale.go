package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
)

// coordPartitions is the partition count of the coordinator figures.
const coordPartitions = 8

// runCoordscale measures the coordinator scale-out: the same workload
// (CoordRuns runs of a CoordNodes-node noop chain) decided by 1, 2 and 4
// cmd/coordinator processes on the same server, -partitions 8, with the
// workers in this process (CoordWorkers workers at TputWorkerConc each).
// The processes are started, and their partitions balanced (read from the
// leases bucket), before the runs are appended, so the figure is the
// steady state, not the handover at start.
//
// Rows per process count: decided events per second (the sustained rate
// of the decision events' stored times, as for throughput); the CPU
// seconds per 1,000 decided events summed over the coordinator processes
// (/proc utime+stime, from just before the runs are appended to the last
// run's end); and reloads (runs folded from the log) plus optimistic
// concurrency conflicts per 1,000 decided events, from the counters each
// process logs when it stops. The floor of the 2- and 4-process rows is
// the 1-process figure: the rate should grow (on a machine with cores to
// spare) and the CPU per event stay flat.
func runCoordscale(ctx context.Context, e *env) ([]Result, error) {
	bin, err := e.binary(ctx, "cmd/coordinator")
	if err != nil {
		return nil, err
	}
	s := e.sizes
	g, err := chainGraph("coordscale", "noop", s.CoordNodes, nil)
	if err != nil {
		return nil, err
	}
	var rows []Result
	var baseRate, baseCPU float64
	for i, k := range s.CoordProcs {
		m, err := e.coordscaleWith(ctx, bin, k, func(ctx context.Context, stream string) error {
			if _, err := startRuns(ctx, e.js, g, s.CoordRuns); err != nil {
				return err
			}
			_, err := waitRuns(ctx, e.js, stream, s.CoordRuns, time.Minute+time.Duration(s.CoordRuns*s.CoordNodes)*10*time.Millisecond)
			return err
		})
		if err != nil {
			return rows, fmt.Errorf("%d coordinators: %w", k, err)
		}
		// Per decision event in the log (the processes' own count was a
		// few short of it in some runs).
		dec := float64(max(m.logged, 1))
		cpuPer := m.cpu.Seconds() / dec * 1000
		churn := float64(m.stats.Reloads+m.stats.Conflicts) / dec * 1000
		name := fmt.Sprintf("coordinators %d", k)
		notes := fmt.Sprintf("%d runs × %d noop nodes, -partitions %d, %d in-process worker(s) at concurrency %d; %d decisions (%d in the log), %.2f CPU-s over the coordinators; wall clock %.0f decisions/s",
			s.CoordRuns, s.CoordNodes, coordPartitions, s.CoordWorkers, s.TputWorkerConc, m.stats.Decisions, m.logged, m.cpu.Seconds(), m.wall)
		churnNotes := fmt.Sprintf("reloads %d (%.2f per 1,000), conflicts %d (%.2f per 1,000), reorders %d, handed back %d, errors %d",
			m.stats.Reloads, float64(m.stats.Reloads)/dec*1000, m.stats.Conflicts, float64(m.stats.Conflicts)/dec*1000, m.stats.Reorders, m.stats.HandedBack, m.stats.Errors)
		if i == 0 {
			baseRate, baseCPU = m.rate, cpuPer
			rows = append(rows,
				row(name+": decided events/s", m.rate, "events/s", 0, nil, notes),
				row(name+": CPU per 1,000 decided events", cpuPer, "CPU-s", 0, nil, "utime+stime of the coordinator processes"),
			)
		} else {
			rows = append(rows,
				row(name+": decided events/s", m.rate, "events/s", baseRate, nil, notes+fmt.Sprintf("; floor: %d process(es)", s.CoordProcs[0])),
				row(name+": CPU per 1,000 decided events", cpuPer, "CPU-s", baseCPU, ratioAtMost(1.5),
					fmt.Sprintf("utime+stime summed over the processes; floor: %d process(es); flat is ratio ≈ 1", s.CoordProcs[0])),
			)
		}
		rows = append(rows, row(name+": reloads+conflicts per 1,000 decided events", churn, "per 1k", 0, valueAtMost(5), churnNotes))
	}
	return rows, nil
}

// coordMeasure is one process count's measurement.
type coordMeasure struct {
	rate  float64 // sustained decided events/s
	wall  float64 // decisions / wall clock
	cpu   time.Duration
	stats coordinator.Stats // summed over the processes
	// logged is the number of decision events in the log, which the
	// processes' count should match.
	logged int
}

// coordscaleWith starts k coordinator processes and a worker on a fresh
// stream, waits until the partitions are balanced, runs fn, and measures.
//
// Size: a benchmark script, read top to bottom (set up, load, measure,
// report rows); split, its steps would hide the order the figures depend
// on.
func (e *env) coordscaleWith(ctx context.Context, bin string, k int, fn func(ctx context.Context, stream string) error) (*coordMeasure, error) {
	stream := e.name("WEFT_COORD")
	defer e.dropStream(stream)
	if _, err := e.openStore(ctx, e.js, stream); err != nil {
		return nil, err
	}
	if err := e.freshLeases(ctx); err != nil {
		return nil, err
	}
	var procs []*coordProc
	stopAll := func() (coordinator.Stats, error) {
		var sum coordinator.Stats
		var errs []error
		for _, p := range procs {
			st, err := p.stop()
			errs = append(errs, err)
			sum.Processed += st.Processed
			sum.Decisions += st.Decisions
			sum.Conflicts += st.Conflicts
			sum.Reloads += st.Reloads
			sum.Reorders += st.Reorders
			sum.HandedBack += st.HandedBack
			sum.Errors += st.Errors
		}
		procs = nil
		return sum, errors.Join(errs...)
	}
	defer func() { _, _ = stopAll() }()
	for range k {
		p, err := e.spawnCoordinator(bin, e.coordArgs(stream, coordPartitions, 5*time.Second))
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	for range e.sizes.CoordWorkers {
		w, err := e.startWorker(ctx, stream, e.sizes.TputWorkerConc)
		if err != nil {
			return nil, err
		}
		defer w.stop()
	}
	if err := e.waitBalanced(ctx, procs, coordPartitions, time.Minute); err != nil {
		return nil, err
	}
	cpuOf := func() (time.Duration, error) {
		var sum time.Duration
		for _, p := range procs {
			c, err := p.cpu()
			if err != nil {
				return 0, err
			}
			sum += c
		}
		return sum, nil
	}
	cpu0, err := cpuOf()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := e.profile(fmt.Sprint(k), func() error { return fn(ctx, stream) }); err != nil {
		return nil, err
	}
	wall := time.Since(t0)
	cpu1, err := cpuOf()
	if err != nil {
		return nil, err
	}
	stats, err := stopAll()
	if err != nil {
		return nil, err
	}
	// The whole log, filtered here (a wildcard filter on sparse subjects
	// costs the server a scan per batch).
	log, err := collectAll(ctx, e.js, stream, []string{eventlog.AllEvents}, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	decided := slices.DeleteFunc(log, func(s stamp) bool { return !eventlog.IsDecision(s.subject) })
	return &coordMeasure{rate: sustained(decided), wall: float64(stats.Decisions) / wall.Seconds(), cpu: cpu1 - cpu0, stats: stats, logged: len(decided)}, nil
}

// collectAll reads every message stored on subjects now and returns their
// stamps.
func collectAll(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, timeout time.Duration) ([]stamp, error) {
	var out []stamp
	err := watch(ctx, js, stream, subjects, timeout, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		out = append(out, stamp{subject: m.Subject(), node: m.Headers().Get("ce-nodeid"), at: meta.Timestamp, seq: meta.Sequence.Stream})
		return meta.NumPending > 0
	})
	return out, err
}
