package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/internal/telemetry"
)

func TestHTTPAddr(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: ":9090", want: "127.0.0.1:9090"},
		{in: "127.0.0.1:9090", want: "127.0.0.1:9090"},
		{in: "0.0.0.0:9090", want: "0.0.0.0:9090"},
		{in: "9090", wantErr: true},
		{in: "localhost", wantErr: true},
	}
	for _, tt := range tests {
		got, err := telemetry.HTTPAddr(tt.in)
		if tt.wantErr {
			if !errors.Is(err, telemetry.ErrHTTPAddr) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("HTTPAddr(%q) = %q, %v; want an error naming it", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("HTTPAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestServeReadiness: /readyz follows the ready function, /healthz does
// not, and the server stops with its context.
func TestServeReadiness(t *testing.T) {
	var notReady atomic.Pointer[string]
	why := "no NATS yet"
	notReady.Store(&why)
	ready := func(context.Context) error {
		if p := notReady.Load(); p != nil {
			return errors.New(*p)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := telemetry.Serve(ctx, "127.0.0.1:0", prometheus.NewRegistry(), ready, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, srv.Addr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, why) {
		t.Errorf("/readyz not ready: %d %q", code, body)
	}
	if code, _ := get(t, srv.Addr(), "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	notReady.Store(nil)
	if code, _ := get(t, srv.Addr(), "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz ready: %d", code)
	}
	if code, _ := get(t, srv.Addr(), "/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}
	cancel()
	srv.Close()
	if _, err := http.Get("http://" + srv.Addr() + "/healthz"); err == nil {
		t.Error("the server still answers after its context ended")
	}
}
