package cli_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestRunAndStatusPrintTheTraceID: with tracing on (OTEL_* pointing at a
// receiver in the test), 'weft run' prints the run's trace id and has
// exported its spans before it returns; 'weft status' prints the same id.
func TestRunAndStatusPrintTheTraceID(t *testing.T) {
	var exports atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			exports.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	orig := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(orig) })

	url, _ := engine(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+l.Addr().String())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000") // only a flush exports

	r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Ada"}`, "-wait")
	if r.code != 0 {
		t.Fatalf("weft run: exit %d: %s", r.code, r.stderr)
	}
	m := regexp.MustCompile(`(?m)^trace ([0-9a-f]{32})$`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("weft run printed no trace id: stderr %q", r.stderr)
	}
	if exports.Load() == 0 {
		t.Error("weft run returned without exporting its spans")
	}
	run := strings.Fields(r.stdout)[0]
	s := weft(t, "status", run, "-nats", url)
	if s.code != 0 || !strings.Contains(s.stdout, "trace "+m[1]) {
		t.Errorf("weft status: exit %d, want trace %s in:\n%s", s.code, m[1], s.stdout)
	}
}

// TestDevServesMetricsAndHealth: 'weft dev -http' serves /metrics,
// /healthz and /readyz, ready once its engine is.
func TestDevServesMetricsAndHealth(t *testing.T) {
	orig := otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetMeterProvider(orig) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testkit.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"dev", "-port", "-1", "-data", t.TempDir(), "-http", "127.0.0.1:0", "-ui", "off"}, strings.NewReader(""), out, io.Discard)
	}()
	re := regexp.MustCompile(`metrics and health at http://(\S+) `)
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("weft dev stopped: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("weft dev never said where it serves:\n%s", out.String())
		}
	}
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "weft_coordinator_conflicts_total"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, want 200 with %q:\n%s", path, resp.StatusCode, want, b)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("weft dev: %v", err)
	}
}
