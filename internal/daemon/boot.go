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
	// Targets are the daemon's connections, validated: one without
	// namespaces, one per namespace served (and, for a worker, per
	// queue, each with its own credentials) with them.
	Targets []natsconn.Config
	// Level is the log level.
	Level slog.Level
	// HTTP is where /metrics, /healthz and /readyz are served; "" serves
	// nothing.
	HTTP string
	// Usage is wrapped by errors about the configuration (the daemon's
	// ErrUsage).
	Usage error
	// Ready is the check /readyz answers with, over all the connections
	// (the daemon's body records what it needs through Env).
	Ready func(context.Context) error
	// Stopped is logged when ctx ends before a store is open
	// ("stopped before the worker was ready").
	Stopped string
}

// Env is what Boot hands the daemon's body, once per connection.
type Env struct {
	Log *slog.Logger
	// Index is the connection's index in Spec.Targets; Target its
	// configuration.
	Index  int
	Target natsconn.Config
	Conn   *nats.Conn
	Store  events.Store
}

// Boot sets a daemon up: the JSON logger on stderr with trace ids, the
// telemetry the OTEL_* variables configure (Prometheus too with HTTP), the
// HTTP server, and for each target a NATS connection that waits for a
// server that is not up yet like a lost one, the key ring events' data is
// sealed with (-encrypt-keys, WEFT_ENCRYPT_KEYS), and the events store (its
// set-up retried as natsconn.Config.OpenStore does). Then it runs body
// once per target, at once, until they return; the first to fail stops the
// others, and its error (naming the namespace) is Boot's. A stop (ctx
// ended) before a store is open is a clean stop.
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
	// The key ring is the process's, like its credentials: every
	// target's configuration names the same one.
	if len(sp.Targets) > 0 {
		if err := sp.Targets[0].UseKeys(log); err != nil {
			return fmt.Errorf("%w: %v", sp.Usage, err)
		}
	}

	if sp.HTTP != "" {
		addr, _ := telemetry.HTTPAddr(sp.HTTP)
		srv, err := telemetry.Serve(ctx, addr, reg, sp.Ready, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	if len(sp.Targets) == 1 {
		return serve(ctx, log, sp, 0, body)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(sp.Targets))
	for i, t := range sp.Targets {
		go func() {
			err := serve(ctx, log, sp, i, body)
			if err != nil {
				err = fmt.Errorf("namespace %s: %w", t.Namespace, err)
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range sp.Targets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// serve connects target i, opens its store and runs body over it.
func serve(ctx context.Context, log *slog.Logger, sp Spec, i int, body func(ctx context.Context, env Env) error) error {
	t := sp.Targets[i]
	if t.Namespace != "" {
		log = log.With(logattr.Namespace, t.Namespace)
	}
	nc, err := t.Connect("", nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := t.OpenStore(ctx, nc, log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info(sp.Stopped, logattr.Error, err)
			return nil
		}
		return err
	}
	if i == 0 {
		// Loudly, once: a server as shipped before authorization was on
		// lets anyone delete the stream.
		if w := t.AnonymousAccess(ctx, ""); w != "" {
			log.Warn("UNSAFE: "+w, logattr.NATS, natsconn.ConnectedURL(nc))
		}
	}
	return body(ctx, Env{Log: log, Index: i, Target: t, Conn: nc, Store: store})
}
