package telemetry_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestRunTraceAcrossProcesses runs the test graph with the coordinator and
// the worker daemons as separate processes talking through JetStream, each
// exporting over OTLP to a collector in the test (the coordinator over
// HTTP, the worker over gRPC), and checks the run's span tree and metrics.
func TestRunTraceAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the daemons")
	}
	bin := buildDaemons(t)
	col := startCollector(t)
	srv, store := testkit.Store(t)
	rec := installTracing(t) // the client's spans, in this process

	base := []string{
		"WEFT_NATS_URL=" + srv.ClientURL(),
		"WEFT_LOG_LEVEL=debug",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_METRICS_EXPORTER=otlp",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_METRIC_EXPORT_INTERVAL=300",
	}
	coord := startDaemon(t, filepath.Join(bin, "coordinator"), append(base,
		"OTEL_EXPORTER_OTLP_PROTOCOL="+telemetry.ProtocolHTTP,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+col.HTTPEndpoint,
	))
	work := startDaemon(t, filepath.Join(bin, "nodeworker"), append(base,
		"OTEL_EXPORTER_OTLP_PROTOCOL="+telemetry.ProtocolGRPC,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+col.GRPCEndpoint,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"WEFT_DRAIN_TIMEOUT=5s",
	))

	caller := startAndWait(t, store, loadGraph(t, "testdata/branch-retry-join.yaml"))
	// Stopping flushes what the daemons still hold.
	coord.stop(t)
	work.stop(t)

	spans := col.Spans()
	for _, ro := range rec.Ended() {
		spans = append(spans, fromReadOnly(ro, "test"))
	}
	for _, s := range spans {
		want := ""
		switch {
		case strings.HasPrefix(s.Name, "node "):
			want = "weft-nodeworker"
		case strings.HasPrefix(s.Name, "process ") || s.Name == "send decisions":
			want = "weft-coordinator"
		}
		if want != "" && s.Service != want {
			t.Errorf("span %s: want it exported by %s", s, want)
		}
	}
	checkRunTrace(t, spans, caller)

	for service, names := range map[string][]string{
		"weft-coordinator": {telemetry.MetricRunsStarted, telemetry.MetricRunsCompleted, telemetry.MetricRunsInFlight, telemetry.MetricRetries, telemetry.MetricCoordinatorLag},
		"weft-nodeworker":  {telemetry.MetricNodeDuration, telemetry.MetricQueueWait, telemetry.MetricNodeFailures},
	} {
		got := col.Metrics(service)
		for _, name := range names {
			if !got[name] {
				t.Errorf("%s exported no metric %s; have %v", service, name, got)
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("coordinator output:\n%s", coord.out.String())
		t.Logf("worker output:\n%s", work.out.String())
	}
}

// buildDaemons builds cmd/coordinator and cmd/nodeworker.
func buildDaemons(t *testing.T) string {
	t.Helper()
	return testkit.Build(t, "github.com/weft-dev/weft/cmd/coordinator", "github.com/weft-dev/weft/cmd/nodeworker")
}

type daemon struct {
	cmd  *exec.Cmd
	out  *testkit.Buffer
	done chan struct{}
	once sync.Once
}

// startDaemon starts a daemon with env added to a clean environment (none
// of the test's own OTEL_* or WEFT_* variables).
func startDaemon(t *testing.T, path string, env []string) *daemon {
	t.Helper()
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "WEFT_") {
			clean = append(clean, kv)
		}
	}
	d := &daemon{cmd: exec.Command(path), out: &testkit.Buffer{}, done: make(chan struct{})}
	d.cmd.Env = append(clean, env...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop asks the daemon to stop, and kills it if it does not within 15s.
func (d *daemon) stop(t *testing.T) {
	d.once.Do(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop on SIGTERM; killed", d.cmd.Path)
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}
