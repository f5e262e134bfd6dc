package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// Spec is what a daemon brings to Boot.
type Spec struct {
	// Service is the telemetry service name ("weft-coordinator").
	Service string
	// Component is the telemetry component (telemetry.ComponentWorker…).
	Component string
	// NATS is the connection and stream configuration, validated.
	NATS natsconn.Config
	// Level is the log level.
	Level slog.Level
	// HTTP is where /metrics, /healthz and /readyz are served; "" serves
	// nothing.
	HTTP string
	// Usage is wrapped by errors about the configuration (the daemon's
	// ErrUsage).
	Usage error
	// Ready, given the connection, returns the check /readyz answers with
	// (called once connected, with or without HTTP).
	Ready func(nc *nats.Conn) func(context.Context) error
	// Stopped is logged when ctx ends before the store is open
	// ("stopped before the worker was ready").
	Stopped string
}

// Env is what Boot hands the daemon's body.
type Env struct {
	Log   *slog.Logger
	Conn  *nats.Conn
	Store events.Store
}

// Boot sets a daemon up: the JSON logger on stderr with trace ids, the
// telemetry the OTEL_* variables configure (Prometheus too with HTTP), a
// NATS connection that waits for a server that is not up yet like a lost
// one, the HTTP server, and the events store (its set-up retried as
// natsconn.Config.OpenStore does). Then it runs body until it returns, and
// takes everything down. A stop (ctx ended) before the store is open is a
// clean stop.
func Boot(ctx context.Context, stderr io.Writer, sp Spec, body func(ctx context.Context, env Env) error) error {
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: sp.Level})))
	telemetry.LogErrors(log)
	var topts []telemetry.Option
	reg := prometheus.NewRegistry()
	if sp.HTTP != "" {
		topts = append(topts, telemetry.WithPrometheus(reg))
	}
	shutdown, err := telemetry.Setup(ctx, sp.Service, topts...)
	if err != nil {
		return fmt.Errorf("%w: %v", sp.Usage, err)
	}
	defer func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Warn("flushing telemetry", logattr.Error, err)
		}
	}()
	telemetry.Announce(ctx, sp.Component)

	nc, err := sp.NATS.Connect("", nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	ready := sp.Ready(nc)
	if sp.HTTP != "" {
		addr, _ := telemetry.HTTPAddr(sp.HTTP)
		srv, err := telemetry.Serve(ctx, addr, reg, ready, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	store, err := sp.NATS.OpenStore(ctx, nc, log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info(sp.Stopped, logattr.Error, err)
			return nil
		}
		return err
	}
	return body(ctx, Env{Log: log, Conn: nc, Store: store})
}
