// Package coordinatord is the coordinator daemon: it connects to NATS, sets
// up the events stream, and runs a coordinator (package coordinator) until
// its context ends.
//
// Every flag has an environment variable (shown in -h); a flag given on the
// command line wins over the environment. Traces and metrics are exported
// as the standard OTEL_* variables say (package telemetry; off by default).
package coordinatord

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/telemetry"
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
	LogLevel  string
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !events.ValidToken(c.Durable) {
		errs = append(errs, fmt.Errorf("-durable: %q is not a valid consumer name (letters, digits, '-' and '_')", c.Durable))
	}
	if c.Shards < 1 || c.Shards > 4096 {
		errs = append(errs, fmt.Errorf("-shards: want 1 to 4096, got %d", c.Shards))
	}
	if c.CacheSize < 1 {
		errs = append(errs, fmt.Errorf("-cache: want at least 1, got %d", c.CacheSize))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("-log-level: want debug, info, warn or error, got %q", c.LogLevel))
	}
	return errors.Join(errs...)
}

// Run parses args, connects, and coordinates until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := Config{NATS: natsconn.Config{Name: "weft-coordinator"}}
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.NATS.RegisterFlags(fs)
	fs.StringVar(&cfg.Durable, "durable", "coordinator", "durable consumer shared by all coordinators (env WEFT_COORDINATOR_DURABLE)")
	fs.IntVar(&cfg.Shards, "shards", 32, "runs decided concurrently (env WEFT_COORDINATOR_SHARDS)")
	fs.IntVar(&cfg.CacheSize, "cache", 10000, "run states kept in memory (env WEFT_COORDINATOR_CACHE)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error (env WEFT_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
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
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
	telemetry.LogErrors(log)
	shutdown, err := telemetry.Setup(ctx, "weft-coordinator")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	defer func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Warn("flushing telemetry", "error", err)
		}
	}()

	nc, err := cfg.NATS.Connect("")
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := cfg.NATS.OpenStore(ctx, nc)
	if err != nil {
		return err
	}
	c := coordinator.New(store,
		coordinator.WithDurable(cfg.Durable),
		coordinator.WithShards(cfg.Shards),
		coordinator.WithCacheSize(cfg.CacheSize),
		coordinator.WithLogger(log))
	log.Info("coordinating", "nats", natsconn.ConnectedURL(nc), "stream", store.StreamName(), "durable", cfg.Durable)
	err = c.Run(ctx)
	st := c.Stats()
	log.Info("stopped", "processed", st.Processed, "decisions", st.Decisions, "malformed", st.Malformed, "conflicts", st.Conflicts)
	return err
}

// envFlags maps the daemon's own flags to their environment variables.
var envFlags = map[string]string{
	"durable":   "WEFT_COORDINATOR_DURABLE",
	"shards":    "WEFT_COORDINATOR_SHARDS",
	"cache":     "WEFT_COORDINATOR_CACHE",
	"log-level": "WEFT_LOG_LEVEL",
}
