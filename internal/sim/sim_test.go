package sim

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

var (
	flagSeed   = flag.Int64("seed", -1, "replay this one seed")
	flagSeeds  = flag.Int("seeds", 0, "run this many seeds, from -first, and report (make sim)")
	flagFirst  = flag.Uint64("first", 1, "the first seed -seeds runs")
	flagFaults = flag.String("faults", "", `fault classes: "all", "none" or a comma-separated list (default: every class not in knownFailing)`)
	flagRuns   = flag.Int("runs", 0, "runs per seed (default 6)")
	flagKnown  = flag.Bool("known", false, "check that every knownFailing entry still fails with its seed (make sim-known)")
	flagGraphs = flag.String("graphs", "", "comma-separated graphs to run (default: with -faults, all; without, every graph not in knownFailing)")
)

// shortSeeds is the budget of the test that runs in make test.
const shortSeeds = 15

// knownFailing lists the fault classes (and graphs, "graph:<name>") under
// which the production code breaks an invariant today, with what breaks
// and a seed that shows it under that class alone (make sim-known replays
// them all). The test in make test leaves them out, and only them; take an
// entry out once the production code handles it. The entry "none" is a
// divergence that shows without any fault, in about one seed in 300: it
// skips nothing (the short test's seeds do not hit it), it is here so that
// make sim-known keeps showing it.
var knownFailing = []struct {
	what   string
	reason string
	seed   uint64
	graphs string // the graphs the seed shows it with ("": the short test's)
}{
	{"none", "cache differs from the log without any fault: a run.failed decided from a state that lacks a node-invoking appended just before it (worker events are appended without the concurrency check); the cache applies run.failed first and passes the invoking over, the fold counts it", 107, ""},
	{"append-slow", "stranded retry: the retry timer is scheduled before its retry-scheduled decision and fires while the slow append is under way; the log has timer.fired before retry.scheduled, the fold passes the timer over, and the coordinator (whose cache took the timer) readies attempt 2 of a node the log says is still retrying", 1, ""},
	{"schedule-fail", "stranded retry: the schedule is stored but its ack is lost; the event is handled again, the re-schedule is de-duplicated away (same id), the timer has already fired before retry.scheduled landed, so the node stays retrying and the run never ends", 31, ""},
	{"crash-coordinator", "stranded retry: a coordinator dies between scheduling the retry timer and appending retry.scheduled; the timer fires first, the fold passes it over, the re-schedule is de-duplicated, the run never ends", 7, ""},
	{"stall-worker", "late outcome: a stalled worker's failure of attempt 1 (delivery 1) lands after delivery 2 failed and the retry was scheduled; the fold takes it because a retrying node counts as live (projection current())", 19, ""},
	{"append-fail", "cache differs from the log: the coordinator applies its decision (here run.failed) before a timer.fired that precedes it in the log (notices, worker and client events are appended without the concurrency check), so the cache has the node retrying and the fold retry_due", 43, ""},
	{"cancel", "cache differs from the log: a node-ready decided without the cancel request that precedes it, then run.cancelled applied in the cache before the worker's node-invoking that precedes it in the log; the cache passes the invoking over (the run ended), the fold counts it", 4, ""},
	{"junk", "cache differs from the log (the ordering divergence of append-fail and cancel, made frequent by the conflicts junk on decision subjects causes): run.failed applied in the cache before a node-invoking that precedes it in the log", 5, ""},
	{"signal-dup", "a retried signal is applied twice: signals get a new random id per send, so the retry of the answer to a human node's first wait is buffered and answers its next wait (shown with -graphs=review, the human node in a loop)", 1, "review"},
	{"graph:review", "a human node's deadline timers (one per activation of the loop) stay scheduled after the run completed (timers outlive their run)", 1, "review"},
	{"graph:human", "a human node's deadline timer stays scheduled after the run completed on a signal (timers outlive their run; only run failure and cancellation drop timers); also seed 16 -faults=signal-dup: the cache applies node-waiting before the signal that precedes it in the log, so the node ends at the signal's time instead of the waiting's", 2, "human"},
}

func known(what string) bool {
	for _, k := range knownFailing {
		if k.what == what {
			return true
		}
	}
	return false
}

// config is the configuration the flags say: the short test's (every
// fault class and graph not known to fail) unless -faults or -graphs say
// otherwise.
func config(t *testing.T) Config {
	t.Helper()
	cfg := Config{Runs: *flagRuns, Faults: FaultSet{}}
	if *flagFaults == "" {
		for _, f := range AllFaults {
			if !known(string(f)) {
				cfg.Faults[f] = true
			}
		}
	} else {
		fs, err := ParseFaults(*flagFaults)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults = fs
	}
	switch {
	case *flagGraphs != "":
		cfg.Graphs = strings.Split(*flagGraphs, ",")
	case *flagFaults == "":
		gs, err := graphs()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if !known("graph:" + g.name) {
				cfg.Graphs = append(cfg.Graphs, g.name)
			}
		}
	}
	return cfg
}

// TestSim runs the simulator: a fixed budget of seeds under every fault
// class the production code handles (make test), one seed (-seed, a
// replay), or a campaign of -seeds seeds (make sim).
func TestSim(t *testing.T) {
	cfg := config(t)
	switch {
	case *flagKnown:
		checkKnown(t, cfg.Graphs)
	case *flagSeed >= 0:
		cfg.Seed = uint64(*flagSeed)
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d steps, %d checks, %d/%d runs ended, %d events, %d effects, %v simulated", res.Seed, res.Steps, res.Checks, res.Ended, res.Runs, res.Events, res.Effects, res.SimTime)
		if res.Violation != nil {
			t.Fatal(res.Violation)
		}
	case *flagSeeds > 0:
		campaign(t, *flagFirst, *flagSeeds, cfg)
	default:
		for seed := uint64(1); seed <= shortSeeds; seed++ {
			cfg.Seed = seed
			res, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatal(res.Violation)
			}
		}
	}
}

// campaign runs seeds and reports each invariant that failed with the
// seeds that show it, and the rates.
func campaign(t *testing.T, first uint64, n int, cfg Config) {
	start := time.Now()
	type failure struct {
		seeds []uint64
		first string
	}
	failures := map[string]*failure{}
	var steps, checks, runs, ended int
	byKind := map[string]int{}
	for seed := first; seed < first+uint64(n); seed++ {
		cfg.Seed = seed
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		steps += res.Steps
		checks += res.Checks
		for k, n := range res.ChecksByKind {
			byKind[k] += n
		}
		runs += res.Runs
		ended += res.Ended
		if v := res.Violation; v != nil {
			f := failures[v.Invariant]
			if f == nil {
				f = &failure{first: v.Error()}
				failures[v.Invariant] = f
			}
			f.seeds = append(f.seeds, seed)
		}
	}
	elapsed := time.Since(start)
	perMin := func(x int) float64 { return float64(x) / elapsed.Minutes() }
	var b strings.Builder
	graphs := "all"
	if len(cfg.Graphs) > 0 {
		graphs = strings.Join(cfg.Graphs, ",")
	}
	fmt.Fprintf(&b, "sim: %d seeds (from %d) under faults %s, graphs %s, in %v\n", n, first, cfg.Faults, graphs, elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "sim: %.0f seeds/minute, %.0f invariant checks/minute, %.0f steps/minute; %d checks, %d steps; %d/%d runs ended\n",
		perMin(n), perMin(checks), perMin(steps), checks, steps, ended, runs)
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "sim:   %-46s %9d checks, %.0f/minute\n", k, byKind[k], perMin(byKind[k]))
	}
	names := make([]string, 0, len(failures))
	for k := range failures {
		names = append(names, k)
	}
	sort.Strings(names)
	failed := 0
	for _, k := range names {
		f := failures[k]
		failed += len(f.seeds)
		seeds := f.seeds
		if len(seeds) > 10 {
			seeds = seeds[:10]
		}
		fmt.Fprintf(&b, "sim: FAIL %q in %d seed(s), e.g. %v; the first:\n%s\n", k, len(f.seeds), seeds, f.first)
	}
	t.Log(b.String())
	if failed > 0 {
		t.Fatalf("%d of %d seeds broke an invariant", failed, n)
	}
}

// TestReplay checks that a seed replays exactly: the same steps, the same
// log byte for byte, the same verdict.
func TestReplay(t *testing.T) {
	fs, _ := ParseFaults("all")
	digest := func() (string, *Result) {
		s, err := newSim(Config{Seed: 7, Faults: fs})
		if err != nil {
			t.Fatal(err)
		}
		res := s.loop()
		return logDigest(s), res
	}
	d1, r1 := digest()
	d2, r2 := digest()
	if d1 != d2 || r1.Steps != r2.Steps || r1.Checks != r2.Checks || (r1.Violation == nil) != (r2.Violation == nil) {
		t.Fatalf("seed 7 did not replay: steps %d/%d, checks %d/%d, logs equal %v", r1.Steps, r2.Steps, r1.Checks, r2.Checks, d1 == d2)
	}
	if r1.Violation != nil && r1.Violation.Error() != r2.Violation.Error() {
		t.Fatalf("seed 7 failed differently:\n%v\n%v", r1.Violation, r2.Violation)
	}
}

// checkKnown replays each knownFailing entry's seed under its class alone
// (or its graph alone, without faults) and says what breaks; an entry
// whose seed breaks nothing any more is an error: take it out of the
// table, or find the seed that shows what is left.
func checkKnown(t *testing.T, shortGraphs []string) {
	for _, k := range knownFailing {
		cfg := Config{Seed: k.seed, Faults: FaultSet{}, Graphs: shortGraphs}
		if g, ok := strings.CutPrefix(k.what, "graph:"); ok {
			cfg.Graphs = []string{g}
		} else if k.what != "none" {
			cfg.Faults[Fault(k.what)] = true
		}
		if k.graphs != "" {
			cfg.Graphs = strings.Split(k.graphs, ",")
		}
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation == nil {
			t.Errorf("%s: seed %d breaks no invariant any more: take it out of knownFailing, or find a seed that shows what is left", k.what, k.seed)
			continue
		}
		v := res.Violation
		t.Logf("%s: still fails: make sim SEED=%d FAULTS=%s GRAPHS=%s\n    %s: %s", k.what, k.seed, cfg.Faults, strings.Join(cfg.Graphs, ","), v.Invariant, clip([]byte(v.Detail)))
	}
}
