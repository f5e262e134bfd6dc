package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act as the memory figure's child
// coordinator, as the weftbench binary does.
func TestMain(m *testing.M) {
	if kind := os.Getenv(childEnv); kind != "" {
		if err := runChild(context.Background(), kind, os.Args[1:], os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinySizes keep every figure to a second or so.
func tinySizes() Sizes {
	return Sizes{
		HopNodes: 6, TputRuns: 10, TputNodes: 3, TputWorkerConc: 8,
		FanItems: 30, ReplayEvents: 1000, MemRuns: 200,
		ScaleRuns: 8, ScaleNodes: 2, ScaleConc: 4, ScaleSleep: 5 * time.Millisecond,
		ScaleWorkers: []int{1, 2},
		CoordRuns:    10, CoordNodes: 3, CoordWorkers: 1, CoordProcs: []int{1, 2},
		FailoverKills: 1, FailoverRate: 20,
		StartsBurst: 50, StartsFires: 2,
		AgentRuns: 3,
	}
}

// restartAtOnce has the retention figure restart its server on its store
// right after the writes, rather than past the stream's 2-minute
// de-duplication window: the tests check the restart, not the figure.
func restartAtOnce(t *testing.T) { t.Setenv("WEFTBENCH_RETENTION_RESTART", "now") }

// TestAgentFigure: the agent figure runs its agents to completion (three
// steps each) against the fake model and reports a turn slower than the
// model's own answer, by a positive overhead.
func TestAgentFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Out: filepath.Join(t.TempDir(), "results.json"), Storage: "memory", Sizes: tinySizes(), Only: "agent"}
	results, err := Measure(ctx, cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range results {
		got[r.Name] = r
	}
	turn, over := got["agent loop turn p50"], got["agent overhead per turn p50"]
	if turn.Floor == nil || *turn.Floor <= 0 || turn.Value <= *turn.Floor || over.Value <= 0 {
		t.Errorf("agent rows: %+v, %+v", turn, over)
	}
}

func TestFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, engines and worker processes")
	}
	restartAtOnce(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := Config{Out: filepath.Join(dir, "results.json"), Storage: "memory", Sizes: tinySizes(), CPUProfile: filepath.Join(dir, "prof")}
	results, err := Measure(ctx, cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"hop latency p50": true, "burst wall clock": true, "throughput": true, "fan-out time to completion": true,
		"replay (read+decode+fold)": true, "coordinator memory per waiting run (cache 10000)": true,
		"scale-out 2 worker(s)": true, "coordinators 2: decided events/s": true,
		"coordinators 2: CPU per 1,000 decided events": true, "failover p50": true, "failover max": true,
		"hop latency p50 (durable)": true, "local step p50": true, "throughput (durable)": true, "burst wall clock (durable)": true,
		"typescript / go hop latency p50": true, "typescript / node floor hop latency p50": true, "typescript / go throughput": true,
		"runs started/s from a trigger burst": true, "schedule fire → run start p50": true,
		"agent loop turn p50": true, "agent overhead per turn p50": true,
	}
	for _, r := range results {
		delete(want, r.Name)
		if r.Value <= 0 && r.Name != "coordinator memory per waiting run (cache 10000)" && !strings.Contains(r.Name, "per 1,000") && !strings.HasPrefix(r.Name, "retention: stream subjects after") {
			t.Errorf("%s = %v %s", r.Name, r.Value, r.Unit)
		}
		if r.Floor != nil && *r.Floor <= 0 {
			t.Errorf("%s: floor %v", r.Name, *r.Floor)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing rows: %v", want)
	}
	if err := WriteJSON(cfg.Out, results); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "prof", "hop.cpu.pprof")); err != nil {
		t.Errorf("no hop profile: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"defaults", Config{Out: "x.json", Storage: "file"}, false},
		{"unknown figure", Config{Out: "x.json", Storage: "file", Only: "nope"}, true},
		{"remote server", Config{Out: "x.json", Storage: "file", NATS: "nats://10.0.0.1:4222"}, true},
		{"bad storage", Config{Out: "x.json", Storage: "disk"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
	if err := Run(context.Background(), []string{"-only", "nope"}, os.Stdout, os.Stderr); !errors.Is(err, ErrUsage) {
		t.Fatalf("Run(-only nope) = %v, want ErrUsage", err)
	}
}

func TestRow(t *testing.T) {
	r := row("x", 3, "ms", 2, ratioAtMost(2), "")
	if *r.Ratio != 1.5 || !*r.Pass || r.Target != "ratio ≤ 2" {
		t.Fatalf("row = %+v", r)
	}
	r = row("y", 5000, "B/run", 0, valueAtMost(4096), "")
	if r.Floor != nil || *r.Pass {
		t.Fatalf("row = %+v", r)
	}
}

// testWriter sends progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// TestAnonMem checks the split of a process's anonymous memory against
// the kernel's total for it (RssAnon), on this test's own process.
func TestAnonMem(t *testing.T) {
	heap, offHeap, data, err := anonMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, _ := strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			total = kb << 10
		}
	}
	sum := heap + offHeap + data
	if heap == 0 || total == 0 || float64(sum) < 0.8*float64(total) || float64(sum) > 1.2*float64(total) {
		t.Errorf("heap arenas %d + outside the heap %d + data %d = %d bytes, RssAnon %d", heap, offHeap, data, sum, total)
	}
}

// TestRetentionFigure runs the retention figure at a tiny size: a
// nats-server process of its own (built from the module), ended runs
// written, listed, archived, purged, restored and read back.
func TestRetentionFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a nats-server process")
	}
	restartAtOnce(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sizes := tinySizes()
	sizes.MemRuns = 30
	e, err := newEnv(ctx, Config{Storage: "file", Sizes: sizes}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.figure = "retention"
	results, err := runRetention(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range results {
		got[r.Name] = r
	}
	for _, name := range []string{
		"retention: RSS of the server that wrote 30 runs, before its restart",
		"retention: server RSS with 30 ended runs", "retention: server RSS after removing 30 runs",
		"weft list -status failed p50 (30 runs in the read model)",
		"restore rate, directory (put back live)", "restore rate, Object Store (put back live)",
		"archive rate, directory (archive + purge)", "archived read rate, Object Store (read + fold)",
	} {
		if r, ok := got[name]; !ok || r.Value <= 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if r := got["retention: stream subjects with 30 ended runs"]; r.Value != 120 {
		t.Errorf("subjects with 30 runs of 4 subjects: %v", r.Value)
	}
	if r := got["retention: stream subjects after removing 30 runs"]; r.Value != 0 || !*r.Pass {
		t.Errorf("subjects after removal: %+v", r)
	}
}
