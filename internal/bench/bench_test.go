package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	}
}

func TestFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, engines and worker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := Config{Out: filepath.Join(dir, "results.json"), Storage: "memory", Sizes: tinySizes(), CPUProfile: filepath.Join(dir, "prof")}
	results, err := Measure(ctx, cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"hop latency p50": true, "throughput": true, "fan-out time to completion": true,
		"replay (read+decode+fold)": true, "coordinator memory per waiting run (cache 10000)": true,
		"scale-out 2 worker(s)": true, "coordinators 2: decided events/s": true,
		"coordinators 2: CPU per 1,000 decided events": true, "failover p50": true, "failover max": true,
		"hop latency p50 (durable)": true, "throughput (durable)": true,
	}
	for _, r := range results {
		delete(want, r.Name)
		if r.Value <= 0 && r.Name != "coordinator memory per waiting run (cache 10000)" && !strings.Contains(r.Name, "per 1,000") {
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
