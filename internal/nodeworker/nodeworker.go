// Package nodeworker is the worker daemon: through the daemons' shared
// bootstrap (internal/daemon) it connects to NATS, registers
// the built-in node executors (package builtin) and runs a worker (package
// worker) on the configured task queues until its context ends, then drains.
//
// It rides out outages: a server not yet up, a cluster electing its leaders,
// a lost server. Setting up the stream and the queue consumers is retried
// with capped exponential back-off (100ms doubling to 5s), each distinct
// error logged once with what it waits for; a worker that cannot start is
// set up and started again. It exits only on a configuration error (bad
// flags, a stream or consumer setting Weft cannot run with, named with the
// command that fixes it) or when its context ends. Existing queue
// consumers are used as they are: an -ack-wait that differs from a queue's
// is logged, never applied ('weft admin apply -ack-wait' changes it).
//
// Every flag has an environment variable (shown in -h); a flag given on the
// command line wins over the environment. Traces and metrics are exported
// as the standard OTEL_* variables say (package telemetry; off by default).
// With -http (WEFT_HTTP; off by default) it serves /metrics (Prometheus
// text format), /healthz and /readyz (see probe for what ready means).
//
// Namespaces: -namespace (WEFT_NAMESPACE) names the namespace it serves,
// whose credentials it connects with; -namespace a,b with -roles-dir DIR
// (the directory 'weft roles -namespaces' wrote) serves several, with one
// connection per namespace and queue, each with that queue's worker
// credentials in that namespace's account, and a worker of its own.
// -concurrency is per connection.
package nodeworker

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/daemon"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// ErrUsage is wrapped by errors about the command line and configuration;
// main exits with status 2 on them.
var ErrUsage = errors.New("usage")

// Config is the daemon's configuration.
type Config struct {
	NATS         natsconn.Config
	Queues       []string
	Concurrency  int
	Name         string
	AckWait      time.Duration // 0: keep the queue's (30s when created)
	DrainTimeout time.Duration
	LogLevel     string
	Executors    ExecutorConfig // executors.go
	// HTTP is where /metrics, /healthz and /readyz are served; "" serves
	// nothing (the default).
	HTTP string
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Queues) == 0 {
		errs = append(errs, errors.New("-queues: at least one queue"))
	}
	for _, q := range c.Queues {
		if !eventlog.ValidToken(q) {
			errs = append(errs, fmt.Errorf("-queues: %q is not a valid queue name (letters, digits, '-' and '_')", q))
		}
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("-concurrency: want at least 1, got %d", c.Concurrency))
	}
	if c.AckWait != 0 && c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("-ack-wait: want 0 (keep the queue's) or at least 1s, got %s", c.AckWait))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("-drain-timeout: want a positive duration, got %s", c.DrainTimeout))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if err := c.Executors.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.HTTP != "" {
		if _, err := telemetry.HTTPAddr(c.HTTP); err != nil {
			errs = append(errs, fmt.Errorf("-http: %w", err))
		}
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("-log-level: want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// envFlags maps the daemon's own flags to their environment variables.
var envFlags = map[string]string{
	"queues":        "WEFT_QUEUES",
	"concurrency":   "WEFT_CONCURRENCY",
	"name":          "WEFT_WORKER_NAME",
	"ack-wait":      "WEFT_ACK_WAIT",
	"drain-timeout": "WEFT_DRAIN_TIMEOUT",
	"log-level":     "WEFT_LOG_LEVEL",
	"http":          "WEFT_HTTP",
}

// parse reads the configuration from args and the environment.
func parse(args []string, stderr io.Writer) (*Config, error) {
	cfg := &Config{}
	fs := flag.NewFlagSet("nodeworker", flag.ContinueOnError)
	cfg.NATS.RegisterFlags(fs)
	queues := fs.String("queues", worker.DefaultQueue, "task queues to pull from, comma separated (env WEFT_QUEUES)")
	fs.IntVar(&cfg.Concurrency, "concurrency", worker.DefaultConcurrency, "nodes run at once (env WEFT_CONCURRENCY)")
	fs.StringVar(&cfg.Name, "name", "", "worker name in events (env WEFT_WORKER_NAME; default <hostname>-<pid>)")
	fs.DurationVar(&cfg.AckWait, "ack-wait", 0, "redeliver work after this long without a heartbeat, for queues this worker creates (default 30s); an existing queue keeps its own (env WEFT_ACK_WAIT)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", worker.DefaultDrainTimeout, "on shutdown, wait this long for running nodes (env WEFT_DRAIN_TIMEOUT)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error (env WEFT_LOG_LEVEL)")
	cfg.Executors.RegisterFlags(fs)
	fs.StringVar(&cfg.HTTP, "http", "", "serve /metrics, /healthz and /readyz on this address, e.g. "+telemetry.DefaultHTTPAddr+" (\":9090\" is loopback; default off) (env WEFT_HTTP)")
	if err := daemon.ParseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	if err := natsconn.ApplyEnv(fs, envFlags, executorEnv); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	for q := range strings.SplitSeq(*queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			cfg.Queues = append(cfg.Queues, q)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return cfg, nil
}

// Run runs the daemon until ctx ends. Errors about the command line wrap
// ErrUsage; -h prints the usage and returns nil.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	opts := []worker.Option{
		worker.WithConcurrency(cfg.Concurrency),
		worker.WithDrainTimeout(cfg.DrainTimeout),
	}
	if cfg.Name != "" {
		opts = append(opts, worker.WithName(cfg.Name))
	}
	if cfg.AckWait > 0 {
		opts = append(opts, worker.WithAckWait(cfg.AckWait))
	}

	cfg.NATS.Name = "weft-nodeworker"
	if cfg.Name != "" {
		cfg.NATS.Name += " " + cfg.Name
	}
	targets, err := cfg.targets()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	probes := make(probes, len(targets))
	natsTargets := make([]natsconn.Config, len(targets))
	for i, t := range targets {
		probes[i] = &probe{stream: t.nats.Stream, queues: t.queues}
		natsTargets[i] = t.nats
	}
	// One connection per namespace (and queue: each has its own worker
	// user), each with its own worker.
	level, _ := parseLevel(cfg.LogLevel)
	return daemon.Boot(ctx, stderr, daemon.Spec{
		Service: "weft-nodeworker", Component: telemetry.ComponentWorker,
		Targets: natsTargets, Level: level, HTTP: cfg.HTTP, Usage: ErrUsage,
		Ready:   probes.ready,
		Stopped: "stopped before the worker was ready",
	}, func(ctx context.Context, env daemon.Env) error {
		js, err := jetstream.New(env.Conn)
		if err != nil {
			return err
		}
		probes[env.Index].js.Store(&js)
		if len(targets) == 1 {
			// The queues' gauges (after Boot set telemetry up): with
			// several namespaces, the same queue names would be
			// observed once per namespace under one label.
			defer telemetry.ObserveQueues(probes[0].queueStats)()
		}
		return serve(ctx, env.Log, cfg, targets[env.Index], env.Store, opts)
	})
}

// target is one connection of the daemon: a namespace's account (or the
// deployment's, without namespaces) and the queues it serves there.
type target struct {
	nats   natsconn.Config
	queues []string
	// name is the worker's name when several of its connections serve
	// one namespace (one per queue), so that each announces itself.
	name string
}

// targets are the daemon's connections: one with its credentials for
// all its queues, or, with -roles-dir, one per namespace and queue, with
// that queue's worker credentials in that namespace.
func (c *Config) targets() ([]target, error) {
	if c.NATS.RolesDir == "" {
		ts, err := c.NATS.Targets(natsconn.RoleWorker, "")
		if err != nil {
			return nil, err
		}
		return []target{{nats: ts[0], queues: c.Queues}}, nil
	}
	var out []target
	for _, q := range c.Queues {
		ts, err := c.NATS.Targets(natsconn.RoleWorker, q)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			tg := target{nats: t, queues: []string{q}}
			if len(c.Queues) > 1 {
				tg.name = cmp.Or(c.Name, defaultName()) + "-" + q
			}
			out = append(out, tg)
		}
	}
	return out, nil
}

// defaultName is pkg/worker's default name: <host>-<pid>.
func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// serve runs a worker over one connection until ctx ends.
func serve(ctx context.Context, log *slog.Logger, cfg *Config, t target, store events.Store, opts []worker.Option) error {
	opts = append(slices.Clone(opts), worker.WithQueues(t.queues...), worker.WithLogger(log))
	if t.name != "" {
		opts = append(opts, worker.WithName(t.name))
	}
	log.Info("built-in executors configured", cfg.Executors.describe()...)
	var backoff setup.Backoff
	for {
		if err := ensureQueues(ctx, log, cfg, t.queues, store); err != nil {
			return setupError(ctx, log, err)
		}
		w, err := worker.New(store, opts...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUsage, err)
		}
		builtin.Register(w, cfg.Executors.options()...)
		err = w.Run(ctx)
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("running worker: %w", err)
			}
			return nil
		}
		// The worker could not start (a queue lost between setup and
		// start, a server gone): set up again.
		if natsconn.Fatal(err) {
			return fmt.Errorf("running worker: %w", err)
		}
		backoff.Warn(log, "the worker could not start; setting up again", "the worker's queues", err)
		if !backoff.Wait(ctx) {
			return nil
		}
	}
}

// ensureQueues sets up the consumers of the worker's queues, waiting for
// NATS as long as it takes.
func ensureQueues(ctx context.Context, log *slog.Logger, cfg *Config, queues []string, store events.Store) error {
	opts := workqueue.QueueOptions{AckWait: cfg.AckWait, Logger: log}
	for _, q := range queues {
		err := setup.Retry(ctx, log, "the consumer of queue "+q, natsconn.Fatal, func(ctx context.Context) error {
			if err := setup.Connected(eventlog.JetStream(store).Conn()); err != nil {
				return err
			}
			attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := workqueue.EnsureQueue(attempt, eventlog.JetStream(store), store.StreamName(), q, opts)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// setupError is what Run returns when setup ends with err: nothing when
// ctx ended (a stop before the worker was ready is a clean stop).
func setupError(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		log.Info("stopped before the worker was ready", logattr.Error, err)
		return nil
	}
	return err
}
