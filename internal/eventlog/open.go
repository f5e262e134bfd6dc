package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// config is what Open's options set.
type config struct {
	Settings
	log *slog.Logger
	// offloadAt is the body size above which events' bodies are kept in
	// the payloads bucket (offload.go; default DefaultOffloadAt); 0 or
	// less: never.
	offloadAt int
}

// Option configures Open.
type Option func(*config)

// WithStream names the events stream (default "WEFT").
func WithStream(name string) Option { return func(c *config) { c.Stream = name } }

// WithStorage chooses file (default) or memory storage, for a stream Open
// creates.
func WithStorage(s jetstream.StorageType) Option { return func(c *config) { c.Storage = s } }

// WithReplicas sets the replica count (default 1) of a stream Open creates.
func WithReplicas(n int) Option { return func(c *config) { c.Replicas = n } }

// WithDuplicates sets the de-duplication window (default 2 minutes) of a
// stream Open creates.
func WithDuplicates(d time.Duration) Option { return func(c *config) { c.Duplicates = d } }

// WithMaxAge sets how long events are kept (default forever) by a stream
// Open creates.
func WithMaxAge(d time.Duration) Option { return func(c *config) { c.MaxAge = d } }

// WithLogger sets where Open logs the settings of an existing stream that
// differ from the options (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Open sets up the events stream and returns the store: it creates the
// stream when it is missing, and uses an existing one with its own
// settings, logging those that differ from the options once. An existing
// stream is never changed (that is 'weft admin apply'), so that one
// process started with other flags never turns an R3 stream into R1. It
// fails with an error wrapping ErrUnsafeSetting when the stream lacks a
// setting Weft relies on (direct gets, atomic batches, the subjects
// weft.r.>, a de-duplication window of at least a minute, limits
// retention, purges), naming the setting and the command that fixes it.
func Open(ctx context.Context, js jetstream.JetStream, opts ...Option) (Store, error) {
	cfg := config{Settings: DefaultSettings(), offloadAt: DefaultOffloadAt}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := SetupStream(ctx, js, cfg.Settings, cfg.log)
	if err != nil {
		return nil, fmt.Errorf("setting up stream %s: %w", cfg.Stream, err)
	}
	// Reads depend on the live settings (a replicated stream is read
	// with care), not on what this process asked for; the timers stream
	// is made like the live events stream.
	live := s.CachedInfo().Config
	cfg.Storage, cfg.Replicas, cfg.Duplicates, cfg.MaxAge = live.Storage, max(live.Replicas, 1), live.Duplicates, live.MaxAge
	registerPayloads(js) // Decode reads large payloads through it (offload.go)
	return &store{nc: js.Conn(), js: js, cfg: cfg, stream: s}, nil
}

// streamConfig is the events stream Open would create with opts (for the
// engine's set-up and tests, through OpenStreamConfig).
func streamConfig(opts ...Option) jetstream.StreamConfig {
	cfg := config{Settings: DefaultSettings()}
	for _, o := range opts {
		o(&cfg)
	}
	return StreamConfig(cfg.Settings)
}

// EnsureTimers sets up the timers stream beside the events stream
// (creating it, made like the live events stream, when it is missing):
// what a coordinator, or the admin's set-up, does before timers are armed.
// Clients and workers never touch it.
func (s *store) EnsureTimers(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := SetupTimerStream(ctx, s.js, s.cfg.Settings, s.cfg.log); err != nil {
		return fmt.Errorf("setting up stream %s: %w", s.TimerStream(), err)
	}
	return nil
}
