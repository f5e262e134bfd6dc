// Package coordinatord is the coordinator daemon: through the daemons'
// shared bootstrap (internal/daemon) it connects to NATS, sets up the
// events stream, and runs a coordinator (package coordinator, which
// sets up its leases bucket and partition consumers) until its context
// ends.
//
// It rides out outages: a server not yet up, a cluster electing its leaders,
// a lost server. Setting up the stream is retried with capped exponential
// back-off (100ms doubling to 5s), each distinct error logged once with what
// it waits for; the coordinator retries its own setup likewise, and one that
// stops while the context is live is started again. It exits only on a
// configuration error (bad flags, a stream setting Weft cannot run with,
// named with the command that fixes it) or when its context ends. An
// existing stream is used as it is: settings that differ from the flags are
// logged, never rewritten ('weft admin apply' changes them).
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
// connection per namespace's account, each with the coordinator role's
// credentials there, its own coordinator and its own admission server:
// nothing of one namespace passes over another's connection. In a
// namespace with admission it answers the clients' admission requests
// (internal/admission) beside deciding.
package coordinatord

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/daemon"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/pkg/events"
)

// ErrUsage is wrapped by errors about the command line and configuration;
// main exits with status 2 on them.
var ErrUsage = errors.New("usage")

// Config is the daemon's configuration.
type Config struct {
	NATS      natsconn.Config
	Durable   string
	Shards    int
	CacheSize int
	// Partitions is how many partitions runs are split into (every
	// coordinator of a deployment uses the same number).
	Partitions int
	// LeaseTTL is how long a partition outlives its holder.
	LeaseTTL time.Duration
	// Retention is how long an ended run is kept when neither the run nor
	// its graph says (package runs).
	Retention time.Duration
	// Repartition lets the coordinator replace partition consumers made
	// for another partition count (see package coordinator).
	Repartition bool
	// MaxHistoryEvents and MaxHistoryBytes are a run's history budget:
	// over it, the run fails (internal/coordinator, budget.go).
	MaxHistoryEvents int
	MaxHistoryBytes  int64
	// MaxDeliveries is how often an event that cannot be decided (for a
	// reason neither transient nor permanent: a key this coordinator
	// lacks) is tried before its run fails.
	MaxDeliveries int
	LogLevel      string
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
	if !eventlog.ValidToken(c.Durable) {
		errs = append(errs, fmt.Errorf("-durable: %q is not a valid consumer name (letters, digits, '-' and '_')", c.Durable))
	}
	if c.Shards < 1 || c.Shards > 4096 {
		errs = append(errs, fmt.Errorf("-shards: want 1 to 4096, got %d", c.Shards))
	}
	if c.Partitions < 1 || c.Partitions > eventlog.Slots {
		errs = append(errs, fmt.Errorf("-partitions: want 1 to %d, got %d", eventlog.Slots, c.Partitions))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("-retention: must not be negative, got %s", c.Retention))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("-lease-ttl: want at least 1s, got %s", c.LeaseTTL))
	}
	errs = append(errs, c.countErrors()...)
	if c.HTTP != "" {
		if _, err := telemetry.HTTPAddr(c.HTTP); err != nil {
			errs = append(errs, fmt.Errorf("-http: %w", err))
		}
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("-log-level: want debug, info, warn or error, got %q", c.LogLevel))
	}
	return errors.Join(errs...)
}

// countErrors checks the settings that count something: each at least 1.
func (c *Config) countErrors() []error {
	var errs []error
	for _, n := range []struct {
		flag string
		v    int64
	}{
		{"-max-history-events", int64(c.MaxHistoryEvents)},
		{"-max-history-bytes", c.MaxHistoryBytes},
		{"-max-deliveries", int64(c.MaxDeliveries)},
		{"-cache", int64(c.CacheSize)},
	} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("%s: want at least 1, got %d", n.flag, n.v))
		}
	}
	return errs
}

// Run parses args, connects, and coordinates until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := Config{NATS: natsconn.Config{Name: "weft-coordinator"}}
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := daemon.ParseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (the coordinator takes only flags)", ErrUsage, fs.Arg(0))
	}
	if err := natsconn.ApplyEnv(fs, envFlags); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	targets, err := cfg.NATS.Targets(natsconn.RoleCoordinator, "")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	probes := make(probes, len(targets))
	for i := range probes {
		probes[i] = &probe{}
	}
	// One connection per namespace, each with its own coordinator: a
	// namespace's runs are decided only over its own account's
	// connection.
	return daemon.Boot(ctx, stderr, daemon.Spec{
		Service: "weft-coordinator", Component: telemetry.ComponentCoordinator,
		Targets: targets, Level: level, HTTP: cfg.HTTP, Usage: ErrUsage,
		Ready:   probes.ready,
		Stopped: "stopped before the coordinator was ready",
	}, func(ctx context.Context, env daemon.Env) error {
		pr := probes[env.Index]
		pr.nc.Store(env.Conn)
		// Schedules and event triggers start runs beside the
		// coordinators, on the same connection and role (one per
		// namespace, like the coordinators; internal/schedule,
		// internal/trigger).
		// They stop with the coordinators, however those stop.
		var starts sync.WaitGroup
		sctx, stopStarts := context.WithCancel(ctx)
		defer func() { stopStarts(); starts.Wait() }()
		starts.Go(func() {
			_ = schedule.NewRunner(env.Store, schedule.WithDurable(cfg.Durable), schedule.WithLogger(env.Log)).Run(sctx)
		})
		starts.Go(func() { _ = trigger.NewRunner(env.Store, trigger.WithLogger(env.Log)).Run(sctx) })
		return serve(ctx, env.Log, &cfg, env.Store, pr)
	})
}

// registerFlags registers the coordinator's flags on fs, each setting its
// field of c, with the default it has when neither flag nor environment
// variable sets it.
func (c *Config) registerFlags(fs *flag.FlagSet) {
	c.NATS.RegisterFlags(fs)
	fs.StringVar(&c.Durable, "durable", "coordinator", "durable consumer shared by all coordinators (env WEFT_COORDINATOR_DURABLE)")
	fs.IntVar(&c.Shards, "shards", coordinator.DefaultShards, "runs decided concurrently (env WEFT_COORDINATOR_SHARDS)")
	fs.IntVar(&c.CacheSize, "cache", 10000, "run states kept in memory (env WEFT_COORDINATOR_CACHE)")
	fs.IntVar(&c.Partitions, "partitions", 1, "partitions runs are split into, the same for every coordinator (env WEFT_COORDINATOR_PARTITIONS)")
	fs.DurationVar(&c.Retention, "retention", readmodel.DefaultRetention, "how long an ended run is kept when neither it nor its graph says; 'weft admin retention' removes it then (env WEFT_COORDINATOR_RETENTION)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 5*time.Second, "how long a partition outlives its holder's last renewal (env WEFT_COORDINATOR_LEASE_TTL)")
	fs.BoolVar(&c.Repartition, "repartition", false, "replace partition consumers made for another -partitions; every other coordinator must be stopped (env WEFT_COORDINATOR_REPARTITION)")
	fs.IntVar(&c.MaxHistoryEvents, "max-history-events", coordinator.DefaultMaxHistoryEvents, "a run whose history holds more events fails (env WEFT_COORDINATOR_MAX_HISTORY_EVENTS)")
	fs.IntVar(&c.MaxDeliveries, "max-deliveries", coordinator.DefaultMaxDeliveries, "tries of an event that cannot be decided (a key this coordinator lacks) before its run fails, backing off from 100ms to 10s (env WEFT_COORDINATOR_MAX_DELIVERIES)")
	fs.Int64Var(&c.MaxHistoryBytes, "max-history-bytes", coordinator.DefaultMaxHistoryBytes, "a run whose history holds more bytes of event data fails (env WEFT_COORDINATOR_MAX_HISTORY_BYTES)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (env WEFT_LOG_LEVEL)")
	fs.StringVar(&c.HTTP, "http", "", "serve /metrics, /healthz and /readyz on this address, e.g. "+telemetry.DefaultHTTPAddr+" (\":9090\" is loopback; default off) (env WEFT_HTTP)")
}

// serve coordinates one namespace (or the deployment, without
// namespaces) until ctx ends, answering its admission requests when it
// has admission (internal/admission).
func serve(ctx context.Context, log *slog.Logger, cfg *Config, store events.Store, pr *probe) error {
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	defer func() {
		stop()
		<-done
	}()
	go func() {
		defer close(done)
		admit(actx, log, store)
	}()
	return coordinate(ctx, log, cfg, store, pr)
}

// admit answers the namespace's admission requests until ctx ends, once
// its admission server could be set up (retried with back-off: the admin
// may not have set the tickets streams up yet).
func admit(ctx context.Context, log *slog.Logger, store events.Store) {
	var backoff setup.Backoff
	for {
		srv, err := admission.New(ctx, store, admission.WithLogger(log))
		if err == nil {
			err = srv.Run(ctx)
			if err == nil {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		backoff.Warn(log, "admission requests are not answered yet", "the admission server", err)
		if !backoff.Wait(ctx) {
			return
		}
	}
}

// coordinate runs coordinators until ctx ends. A coordinator waits for
// its leases bucket and partition consumers itself, with back-off; one that
// stops while ctx is live anyway is replaced by a new one, with a fresh
// cache.
func coordinate(ctx context.Context, log *slog.Logger, cfg *Config, store events.Store, pr *probe) error {
	var backoff setup.Backoff
	for {
		c := coordinator.New(store,
			coordinator.WithDurable(cfg.Durable),
			coordinator.WithShards(cfg.Shards),
			coordinator.WithCacheSize(cfg.CacheSize),
			coordinator.WithPartitions(cfg.Partitions),
			coordinator.WithLeaseTTL(cfg.LeaseTTL),
			coordinator.WithRepartition(cfg.Repartition),
			coordinator.WithHistoryBudget(cfg.MaxHistoryEvents, cfg.MaxHistoryBytes),
			coordinator.WithRetention(cfg.Retention),
			coordinator.WithRedelivery(cfg.MaxDeliveries, 0, 0),
			coordinator.WithLogger(log))
		pr.c.Store(c)
		log.Info("coordinating", logattr.NATS, natsconn.ConnectedURL(eventlog.JetStream(store).Conn()), logattr.Stream, store.StreamName(), logattr.Durable, cfg.Durable)
		started := time.Now()
		err := c.Run(ctx)
		st := c.Stats()
		// The counters, once at shutdown (weftbench's coordinator figures
		// read them from this line).
		log.Info("stopped", logattr.Processed, st.Processed, logattr.Decisions, st.Decisions, logattr.Malformed, st.Malformed, logattr.Conflicts, st.Conflicts,
			logattr.Reloads, st.Reloads, logattr.Reorders, st.Reorders, logattr.HandedBack, st.HandedBack, logattr.Errors, st.Errors)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && (natsconn.Fatal(err) || errors.Is(err, coordinator.ErrPartitionCount)) {
			return err
		}
		if time.Since(started) > time.Minute {
			backoff.Reset()
		}
		if err == nil {
			err = errors.New("it stopped while the daemon runs")
		}
		backoff.Warn(log, "the coordinator stopped; starting it again", "the coordinator", err)
		if !backoff.Wait(ctx) {
			return nil
		}
	}
}

// envFlags maps the daemon's own flags to their environment variables.
var envFlags = map[string]string{
	"durable":            "WEFT_COORDINATOR_DURABLE",
	"shards":             "WEFT_COORDINATOR_SHARDS",
	"cache":              "WEFT_COORDINATOR_CACHE",
	"partitions":         "WEFT_COORDINATOR_PARTITIONS",
	"lease-ttl":          "WEFT_COORDINATOR_LEASE_TTL",
	"max-history-events": "WEFT_COORDINATOR_MAX_HISTORY_EVENTS",
	"max-history-bytes":  "WEFT_COORDINATOR_MAX_HISTORY_BYTES",
	"retention":          "WEFT_COORDINATOR_RETENTION",
	"repartition":        "WEFT_COORDINATOR_REPARTITION",
	"log-level":          "WEFT_LOG_LEVEL",
	"http":               "WEFT_HTTP",
}
