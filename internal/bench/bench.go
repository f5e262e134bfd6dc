package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// ErrUsage is wrapped by errors about the command line; main exits with
// status 2 on them.
var ErrUsage = errors.New("usage")

// Sizes are the workload sizes of every figure.
type Sizes struct {
	HopNodes       int // sequential noop nodes of the hop-latency chain
	TputRuns       int // concurrent runs of the throughput figure
	TputNodes      int // noop nodes per throughput run
	TputWorkerConc int // the one worker's concurrency (engine and floor)
	FanItems       int // items of the fan-out map
	ReplayEvents   int // events in the replayed history
	MemRuns        int // runs waiting on a human node
	ScaleRuns      int // runs of the scale-out figure
	ScaleNodes     int // sleep nodes per scale-out run
	ScaleConc      int // each worker process's -concurrency
	ScaleSleep     time.Duration
	ScaleWorkers   []int // worker process counts; the first is the base
	CoordRuns      int   // runs of the coordinator scale-out figure
	CoordNodes     int   // noop nodes per coordinator scale-out run
	CoordWorkers   int   // in-process workers of the coordinator figures
	CoordProcs     []int // coordinator process counts; the first is the base
	FailoverKills  int   // partition owners killed in the failover figure
	FailoverRate   int   // runs started per second during the failover figure
	StartsBurst    int   // messages of the trigger burst (starts figure)
	StartsFires    int   // schedule fires timed (starts figure)
	FlowFairBig    int   // runs of the big key (flow figure: fairness)
	FlowRuns       int   // runs with and without a limit that never binds
	FlowRounds     int   // rounds of each, alternated
	FlowRateWindow time.Duration
	AgentRuns      int // agent runs, one after the other (agent figure)
}

// FullSizes are the sizes the issue asks for.
func FullSizes() Sizes {
	return Sizes{
		HopNodes: 200, TputRuns: 2000, TputNodes: 10, TputWorkerConc: 64,
		FanItems: 10000, ReplayEvents: 1_000_000, MemRuns: 100_000,
		ScaleRuns: 400, ScaleNodes: 10, ScaleConc: 8, ScaleSleep: 20 * time.Millisecond,
		ScaleWorkers: []int{1, 2, 4},
		CoordRuns:    1000, CoordNodes: 10, CoordWorkers: 2, CoordProcs: []int{1, 2, 4},
		FailoverKills: 20, FailoverRate: 40,
		StartsBurst: 10000, StartsFires: 30,
		FlowFairBig: 10000, FlowRuns: 1000, FlowRounds: 3, FlowRateWindow: time.Minute,
		AgentRuns: 100,
	}
}

// QuickSizes finish every figure in about a minute in total.
func QuickSizes() Sizes {
	return Sizes{
		HopNodes: 50, TputRuns: 200, TputNodes: 10, TputWorkerConc: 64,
		FanItems: 1000, ReplayEvents: 100_000, MemRuns: 10_000,
		ScaleRuns: 160, ScaleNodes: 5, ScaleConc: 8, ScaleSleep: 20 * time.Millisecond,
		ScaleWorkers: []int{1, 2, 4},
		CoordRuns:    200, CoordNodes: 10, CoordWorkers: 2, CoordProcs: []int{1, 2, 4},
		FailoverKills: 3, FailoverRate: 40,
		StartsBurst: 2000, StartsFires: 5,
		FlowFairBig: 500, FlowRuns: 300, FlowRounds: 2, FlowRateWindow: 10 * time.Second,
		AgentRuns: 20,
	}
}

// Config is the harness's configuration.
type Config struct {
	Out        string // JSON results file
	Quick      bool
	NATS       string // external server URL; empty: embedded
	Only       string // run one figure
	CPUProfile string // directory for CPU profiles, one per figure phase
	MemProfile string // directory for heap profiles, one per figure
	// Storage is the streams' storage, "file" (default) or "memory".
	Storage string
	Sizes   Sizes

	// syncAlways starts the embedded server with sync_interval: always
	// (the durable figures' own server).
	syncAlways bool
}

// figure is one measured figure: it returns its rows.
type figure struct {
	name string
	run  func(ctx context.Context, e *env) ([]Result, error)
}

var figures = []figure{
	{"hop", runHop},
	{"throughput", runThroughput},
	{"fanout", runFanout},
	{"replay", runReplay},
	{"memory", runMemory},
	{"scaleout", runScaleout},
	{"coordscale", runCoordscale},
	{"failover", runFailover},
	{"hop-durable", durable(runHop)},
	{"throughput-durable", durable(runThroughput)},
	{"retention", runRetention},
	{"local", runLocal},
	{"typescript", runTypeScript},
	{"starts", runStarts},
	{"flow", runFlow},
	{"agent", runAgent},
	{"sealed", runSealed},
}

func figureNames() []string {
	var out []string
	for _, f := range figures {
		out = append(out, f.name)
	}
	return out
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Only != "" && !slices.Contains(figureNames(), c.Only) {
		errs = append(errs, fmt.Errorf("-only: %q is not a figure (%s)", c.Only, strings.Join(figureNames(), ", ")))
	}
	if c.Storage != "file" && c.Storage != "memory" {
		errs = append(errs, fmt.Errorf("-storage: want file or memory, got %q", c.Storage))
	}
	if c.Out == "" {
		errs = append(errs, errors.New("-o: must not be empty"))
	}
	if c.NATS != "" && !strings.Contains(c.NATS, "127.0.0.1") && !strings.Contains(c.NATS, "localhost") {
		errs = append(errs, fmt.Errorf("-nats: %q: the benchmark talks to 127.0.0.1 only", c.NATS))
	}
	return errors.Join(errs...)
}

// Run parses args, runs the figures and writes the table to stdout and the
// JSON results to the -o file. Progress goes to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if kind := os.Getenv(childEnv); kind != "" {
		return runChild(ctx, kind, args, os.Stdin, stdout)
	}
	cfg := Config{}
	fs := flag.NewFlagSet("weftbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Out, "o", filepath.Join("bench", "results.json"), "JSON results file")
	fs.BoolVar(&cfg.Quick, "quick", false, "sizes that finish in about a minute in total")
	fs.StringVar(&cfg.NATS, "nats", "", "external NATS server URL on 127.0.0.1 (default: an embedded server with file storage in a temp dir)")
	fs.StringVar(&cfg.Only, "only", "", "run one figure: "+strings.Join(figureNames(), ", "))
	fs.StringVar(&cfg.Storage, "storage", "file", "storage of every stream, engine and floor: file or memory")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write CPU profiles (FIGURE.cpu.pprof for the engine, FIGURE-floor.cpu.pprof for the floor) to this directory")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write heap profiles (FIGURE.mem.pprof, after the engine phase) to this directory")
	encrypt := fs.Bool("encrypt", false, "seal events' data under a random key (encryption at rest): run the figures with and without it to compare")
	burst := fs.Int("runs", 0, "runs of the throughput figures' burst (default 2000, 200 with -quick): -only throughput -runs 10000 is the 10,000-run burst")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *encrypt {
		if err := useBenchKey(); err != nil {
			return err
		}
	}
	if *burst < 0 {
		return fmt.Errorf("%w: -runs: want a positive number of runs, got %d", ErrUsage, *burst)
	}
	cfg.Sizes = FullSizes()
	if cfg.Quick {
		cfg.Sizes = QuickSizes()
	}
	if *burst > 0 {
		cfg.Sizes.TputRuns = *burst
	}
	results, err := Measure(ctx, cfg, stderr)
	if len(results) > 0 {
		WriteTable(stdout, results)
		if werr := WriteJSON(cfg.Out, results); werr != nil {
			err = errors.Join(err, werr)
		} else {
			fmt.Fprintf(stderr, "results written to %s\n", cfg.Out)
		}
	}
	return err
}

// useBenchKey seals this process's events (and, through
// WEFT_ENCRYPT_KEYS, its children's) under a random key of its own.
func useBenchKey() error {
	k, err := events.NewKey("bench")
	if err != nil {
		return err
	}
	ring := events.KeyRing{k}
	if err := events.UseKeys(ring); err != nil {
		return err
	}
	return os.Setenv(events.EnvEncryptKeys, strings.Join(strings.Split(strings.TrimSpace(ring.Text()), "\n")[1:], ","))
}

// Measure runs the configured figures and returns their rows. A figure
// that fails is reported and the others still run.
func Measure(ctx context.Context, cfg Config, progress io.Writer) ([]Result, error) {
	for _, dir := range []string{cfg.CPUProfile, cfg.MemProfile} {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
		}
	}
	e, err := newEnv(ctx, cfg, progress)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var results []Result
	var errs []error
	for _, f := range figures {
		if cfg.Only != "" && f.name != cfg.Only {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		e.figure = f.name
		e.logf("running")
		rows, err := f.run(ctx, e)
		results = append(results, rows...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			e.logf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
			continue
		}
		e.logf("done in %s", time.Since(start).Round(time.Millisecond))
	}
	return results, errors.Join(errs...)
}

// profile runs fn under the CPU profiler when profiling is on, writing
// FIGURE[-phase].cpu.pprof, and writes the heap profile after the engine
// phase.
func (e *env) profile(phase string, fn func() error) error {
	name := e.figure
	if phase != "" {
		name += "-" + phase
	}
	if e.cfg.CPUProfile != "" {
		f, err := os.Create(filepath.Join(e.cfg.CPUProfile, name+".cpu.pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	err := fn()
	if e.cfg.MemProfile != "" && phase == "" {
		runtime.GC()
		f, ferr := os.Create(filepath.Join(e.cfg.MemProfile, name+".mem.pprof"))
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		defer f.Close()
		err = errors.Join(err, pprof.WriteHeapProfile(f))
	}
	return err
}
