package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestDaemonsServeMetricsAndHealth starts the coordinator and the worker
// daemons with -http (WEFT_HTTP) before their NATS server is up: both are
// alive and not ready; once the server is up they turn ready, run a graph,
// and their /metrics (Prometheus text format) shows the series the
// README documents.
func TestDaemonsServeMetricsAndHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the daemons")
	}
	bin := buildDaemons(t)
	port := freePort(t)
	env := []string{
		fmt.Sprintf("WEFT_NATS_URL=nats://127.0.0.1:%d", port),
		"WEFT_HTTP=127.0.0.1:0",
		"WEFT_DRAIN_TIMEOUT=5s",
	}
	coord := startDaemon(t, filepath.Join(bin, "coordinator"), env)
	work := startDaemon(t, filepath.Join(bin, "nodeworker"), env)
	caddr, waddr := servedAt(t, coord), servedAt(t, work)

	for _, addr := range []string{caddr, waddr} {
		if code, body := get(t, addr, "/healthz"); code != http.StatusOK {
			t.Errorf("%s/healthz before NATS: %d %s, want 200", addr, code, body)
		}
		if code, body := get(t, addr, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected") {
			t.Errorf("%s/readyz before NATS: %d %q, want 503 not connected", addr, code, body)
		}
	}

	srv, err := embedded.Start(embedded.Config{StoreDir: t.TempDir(), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(srv) })
	_, store := testkit.StoreOn(t, srv)
	for _, addr := range []string{caddr, waddr} {
		waitReady(t, addr)
	}
	startAndWait(t, store, loadGraph(t, "testdata/branch-retry-join.yaml"))

	want := map[string][]string{
		caddr: {
			`weft_runs_started_total{`,
			`weft_runs_ended_total{`, `weft_run_status="completed"`,
			`weft_decisions_total{`, `weft_event_type="node.ready"`,
			`weft_coordinator_conflicts_total`,
			`weft_redeliveries_total{`,
			`weft_node_retries_total{`,
			`weft_coordinator_lag{`,
		},
		waddr: {
			`weft_node_duration_seconds_bucket{`, `weft_node_type="echo"`,
			`weft_node_queue_wait_seconds_bucket{`,
			`weft_queue_depth{`, `weft_queue="default"`,
			`weft_queue_oldest_age_seconds{`,
			`weft_redeliveries_total{`,
		},
	}
	for addr, series := range want {
		code, body := get(t, addr, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s/metrics: %d", addr, code)
		}
		for _, s := range series {
			if !strings.Contains(body, s) {
				t.Errorf("%s/metrics has no %s", addr, s)
			}
		}
		if t.Failed() {
			t.Logf("%s/metrics:\n%s", addr, body)
		}
	}
	coord.stop(t)
	work.stop(t)
	if t.Failed() {
		t.Logf("coordinator:\n%s\nworker:\n%s", coord.out.String(), work.out.String())
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var servingRE = regexp.MustCompile(`"msg":"serving metrics and health","addr":"([^"]+)"`)

// servedAt waits for the daemon's log line saying where it serves.
func servedAt(t *testing.T, d *daemon) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := servingRE.FindStringSubmatch(d.out.String()); m != nil {
			return m[1]
		}
		select {
		case <-deadline:
			t.Fatalf("%s never said where it serves:\n%s", d.cmd.Path, d.out.String())
		case <-tick.C:
		}
	}
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := get(t, addr, "/readyz")
		if code == http.StatusOK {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s/readyz never ready: %d %s", addr, code, body)
		case <-tick.C:
		}
	}
}
