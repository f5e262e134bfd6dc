package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weft-dev/weft/internal/logattr"
)

// The endpoints Serve answers:
//
//	/metrics  the process's metrics in the Prometheus text format (the
//	          same instruments that OTLP exports; names in metrics.go,
//	          dots become underscores, counters end in _total, seconds
//	          in _seconds)
//	/healthz  200 while the process runs: a liveness probe
//	/readyz   200 when ready says so, 503 with its reason otherwise: a
//	          readiness probe (each daemon documents what it checks)
const (
	PathMetrics = "/metrics"
	PathHealth  = "/healthz"
	PathReady   = "/readyz"
)

// DefaultHTTPAddr is where a daemon's -http flag listens when given only
// a port: loopback, so that nothing is exposed by accident.
const DefaultHTTPAddr = "127.0.0.1:9090"

// ErrHTTPAddr is wrapped by errors about an -http address.
var ErrHTTPAddr = errors.New("http address")

// HTTPAddr checks an -http address ("host:port", or ":port" for
// loopback) and returns the address to listen on.
func HTTPAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%w %q: want host:port, e.g. %s: %v", ErrHTTPAddr, s, DefaultHTTPAddr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Server serves a daemon's metrics, health and readiness.
type Server struct {
	hs   *http.Server
	addr net.Addr
	done chan struct{}
}

// Serve listens on addr and serves the endpoints until ctx ends or Close.
// reg is what /metrics shows (give the same registry to Setup through
// WithPrometheus); ready answers /readyz: nil when ready, else why not.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, ready func(context.Context) error, log *slog.Logger) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics and health on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPromLogger{log}}))
	mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+PathReady, func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(rctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	s := &Server{
		hs:   &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: l.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("serving metrics and health", logattr.Error, err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	log.Info("serving metrics and health", logattr.Addr, s.addr.String(), logattr.Paths, PathMetrics+" "+PathHealth+" "+PathReady)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr.String() }

// Close stops the server, waiting at most a second for requests in flight.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.hs.Shutdown(ctx)
	<-s.done
}

// slogPromLogger sends promhttp's errors to the daemon's log.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) {
	l.log.Warn("serving metrics", logattr.Error, fmt.Sprint(v...))
}
