package client

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// Client starts, reads and steers runs over an events store. It is safe for
// concurrent use.
type Client struct {
	store    events.Store
	log      *slog.Logger
	identity string

	mu     sync.Mutex
	stream jetstream.Stream
	runs   *readmodel.Model
	sched  *schedule.Store
	// arch is where removed runs are read from (list.go); archChecked
	// says the default was looked for and is missing.
	arch        Archive
	archChecked bool

	// gate is the client's side of admission (admission.go); namespace
	// is WithNamespace's, checked once (nsChecked).
	gate      admission.Gate
	namespace string
	nsChecked bool

	// providers carries WithTracerProvider's provider into the telemetry
	// helpers (nil: the OpenTelemetry global).
	tracerProvider trace.TracerProvider
	providers      *telemetry.Providers
}

// Option configures a Client.
type Option func(*Client)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithIdentity names who is acting, recorded as StartedBy in run-started
// events and as By in signals and cancel requests (default "$USER@host").
func WithIdentity(name string) Option { return func(c *Client) { c.identity = name } }

// WithArchive reads runs that retention or 'weft delete' removed from the
// live log from a (default: the Object Store bucket "weft-archive", when
// it exists; DirArchive reads a directory).
func WithArchive(a Archive) Option { return func(c *Client) { c.arch = a } }

// Archive keeps the logs of removed runs, one object per run, named by its
// id: "<run>.jsonl.gz", a gzip of the run's messages as stored, in log
// order, one JSON line each. The coordinators write it (their -archive
// setting) before they purge a run; a client reads from it what the live
// log no longer has. An S3-compatible store implements it with PutObject,
// GetObject and the key "<prefix><run>.jsonl.gz".
type Archive interface {
	// Put stores a run's object; it must be durable when it returns.
	Put(ctx context.Context, run string, data []byte) error
	// Get returns a run's object, or an error wrapping ErrNotArchived.
	Get(ctx context.Context, run string) ([]byte, error)
	// String names the archive in messages.
	String() string
}

// DirArchive returns the Archive in directory dir (a coordinator's
// -archive dir:PATH), which must exist.
func DirArchive(dir string) (Archive, error) { return readmodel.OpenDir(dir) }

// WithTracerProvider sets the OpenTelemetry TracerProvider of the client's
// spans, those of starting, forking, signalling and cancelling runs
// (default the global one, otel.GetTracerProvider(), read when each span
// starts). The events the client writes carry the trace context either
// way. The client records no metrics of its own (the coordinators count
// runs), so it has no MeterProvider option.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *Client) { c.tracerProvider = tp }
}

// New returns a client over store.
func New(store events.Store, opts ...Option) *Client {
	c := &Client{store: store}
	for _, o := range opts {
		o(c)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.identity == "" {
		c.identity = defaultIdentity()
	}
	c.providers = telemetry.NewProviders(c.tracerProvider, nil)
	return c
}

// Identity is the name the client acts under.
func (c *Client) Identity() string { return c.identity }

func defaultIdentity() string {
	user := cmp.Or(os.Getenv("USER"), os.Getenv("USERNAME"), "weft")
	if host, err := os.Hostname(); err == nil && host != "" {
		return user + "@" + host
	}
	return user
}

// eventsStream returns the events stream's handle, looked up once.
func (c *Client) eventsStream(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream != nil {
		return c.stream, nil
	}
	s, err := eventlog.JetStream(c.store).Stream(ctx, c.store.StreamName())
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", c.store.StreamName(), err)
	}
	c.stream = s
	return s, nil
}
