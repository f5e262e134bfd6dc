// Package weft runs Weft inside a program of your own: a coordinator, a
// worker with the built-in node types and yours, and, for development and
// tests, an embedded NATS server with JetStream, so one binary holds the
// whole engine.
//
//	g, _ := graph.New("review").
//		Node("check", "score").
//		Edge(graph.Start, "check").
//		Edge("check", graph.End, graph.IfFunc("big", func(state map[string]any) bool { … })).
//		Build()
//	eng, err := weft.Start(ctx,
//		weft.Embedded(""),                          // or weft.WithNATS(nc)
//		weft.WithNode("score", worker.NodeFunc(score)),
//		weft.WithConditions(map[string]any{"big": big}))
//	defer eng.Stop()
//	id, _ := eng.Client().Start(ctx, g)
//	st, _ := eng.Client().Wait(ctx, id)
//
// Go conditions. A graph built with the builder's IfFunc records
// "func:NAME" in its definition; the coordinator, which reads the graph
// back from the run's log, resolves NAME among the functions registered
// with WithConditions (a StateCondition, over the state, or an
// InvocationCondition, over the state and the invocation state). A run
// whose graph names a function the engine does not have fails at once
// with an error that names WithConditions.
//
// In production, connect every process to the same NATS cluster with
// WithNATS and run as many engines as you need: coordinators share the
// runs by partition (WithPartitions), and workers of a queue share its
// work. Start with WithoutCoordinator or WithoutWorker to run only one
// side, for example workers for a queue of your own (WithQueues) in a
// service that serves its node types.
package weft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// Option configures Start.
type Option func(*config)

type config struct {
	nc            *nats.Conn
	embedded      bool
	storeDir      string
	port          int
	conditions    map[string]any
	nodes         map[string]worker.Node
	queues        []string
	concurrency   int
	drain         time.Duration
	partitions    int
	noBuiltins    bool
	builtinOpts   []builtin.Option
	noWorker      bool
	noCoordinator bool
	name          string
	logger        *slog.Logger
	errs          []error
}

// WithNATS runs the engine over an existing connection (which the engine
// does not close). The stream and buckets are created if missing.
func WithNATS(nc *nats.Conn) Option { return func(c *config) { c.nc = nc } }

// Embedded starts an embedded NATS server with JetStream on a free
// loopback port, its store in dir; an empty dir is a temporary directory
// that Stop removes. For development and tests; Engine.URL says where
// other processes reach it.
func Embedded(dir string) Option {
	return func(c *config) { c.embedded, c.storeDir = true, dir }
}

// WithPort makes the embedded server listen on port of 127.0.0.1 (default
// -1: a free port).
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// WithConditions registers Go conditions by name, for graphs whose edges
// or whens say "func:NAME" (the builder's IfFunc). Each value is a
// graph.StateCondition or graph.InvocationCondition, or a plain func of
// either signature. graph.Builder.Conditions returns a builder's.
func WithConditions(fns map[string]any) Option {
	return func(c *config) {
		for name, fn := range fns {
			c.conditions[name] = fn
		}
	}
}

// WithNode registers the node type typ, run by the engine's worker. Graphs
// that use typ validate when loaded with graph.WithTypes(typ).
func WithNode(typ string, n worker.Node) Option {
	return func(c *config) {
		if typ == "" || n == nil {
			c.errs = append(c.errs, fmt.Errorf("weft.WithNode(%q): a node type needs a name and a node", typ))
			return
		}
		c.nodes[typ] = n
	}
}

// WithQueues sets the task queues the engine's worker serves (default
// "default").
func WithQueues(queues ...string) Option { return func(c *config) { c.queues = queues } }

// WithConcurrency sets how many nodes the worker runs at once (default
// worker.DefaultConcurrency).
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithDrainTimeout sets how long Stop lets running nodes finish (the
// worker's default otherwise).
func WithDrainTimeout(d time.Duration) Option { return func(c *config) { c.drain = d } }

// WithPartitions sets the number of coordinator partitions (see the
// coordinator's documentation: every coordinator sharing a stream must
// use the same number). Zero keeps the default.
func WithPartitions(n int) Option { return func(c *config) { c.partitions = n } }

// WithBuiltins configures the built-in node types: what the http executor
// may reach, where secrets and llm endpoints come from, template limits
// (see package builtin's options).
func WithBuiltins(opts ...builtin.Option) Option {
	return func(c *config) { c.builtinOpts = append(c.builtinOpts, opts...) }
}

// WithoutBuiltins leaves the built-in node types (echo, sleep, http,
// transform, llm, …) off the worker.
func WithoutBuiltins() Option { return func(c *config) { c.noBuiltins = true } }

// WithoutWorker runs no worker: another process serves the queues.
func WithoutWorker() Option { return func(c *config) { c.noWorker = true } }

// WithoutCoordinator runs no coordinator: another process decides.
func WithoutCoordinator() Option { return func(c *config) { c.noCoordinator = true } }

// WithName names the engine's worker in the log and in its announcements
// (default the host name).
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithLogger sets the logger of the coordinator, the worker and the client
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Engine is a running engine. Its methods are safe for concurrent use.
type Engine struct {
	cfg    config
	srv    *server.Server
	nc     *nats.Conn
	ownNC  bool
	tmpDir string
	store  events.Store
	client *client.Client
	// consumers are the durable consumers the engine's coordinator and
	// worker consume from.
	consumers []string

	stopWorker, stopCoordinator context.CancelFunc
	worker, coordinator         sync.WaitGroup
	errMu                       sync.Mutex
	err                         error
	once                        sync.Once
}

// Start starts an engine and returns once its coordinator and worker are
// consuming. It needs WithNATS or Embedded.
func Start(ctx context.Context, opts ...Option) (_ *Engine, err error) {
	cfg := config{conditions: map[string]any{}, nodes: map[string]worker.Node{}, queues: []string{worker.DefaultQueue}, concurrency: worker.DefaultConcurrency, port: -1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	switch {
	case len(cfg.errs) > 0:
		return nil, errors.Join(cfg.errs...)
	case cfg.nc == nil && !cfg.embedded:
		return nil, errors.New("weft.Start: no NATS: pass weft.WithNATS(conn) or weft.Embedded(dir)")
	case cfg.nc != nil && cfg.embedded:
		return nil, errors.New("weft.Start: weft.WithNATS and weft.Embedded both given; choose one")
	case cfg.port < -1 || cfg.port > 65535:
		return nil, fmt.Errorf("weft.WithPort: want a port number or -1, got %d", cfg.port)
	case cfg.noWorker && len(cfg.nodes) > 0:
		return nil, errors.New("weft.Start: weft.WithNode given with weft.WithoutWorker: no worker would run the node types")
	}
	e := &Engine{cfg: cfg, nc: cfg.nc}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if err := e.connect(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		return nil, err
	}
	if e.store, err = events.Open(ctx, js); err != nil {
		return nil, fmt.Errorf("weft.Start: opening the event store: %w", err)
	}
	e.client = client.New(e.store, client.WithLogger(cfg.logger))
	base := context.WithoutCancel(ctx)
	var consumers []string
	if !cfg.noCoordinator {
		consumers = append(consumers, e.startCoordinator(base)...)
	}
	if !cfg.noWorker {
		names, err := e.startWorker(base)
		if err != nil {
			return nil, err
		}
		consumers = append(consumers, names...)
	}
	if err := waitForConsumers(ctx, js, e.store.StreamName(), consumers); err != nil {
		return nil, err
	}
	e.consumers = consumers
	return e, nil
}

func (e *Engine) connect() error {
	if e.nc != nil {
		return nil
	}
	dir := e.cfg.storeDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "weft-embedded-")
		if err != nil {
			return err
		}
		dir, e.tmpDir = tmp, tmp
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: e.cfg.port, ServerName: "weft-embedded"})
	if err != nil {
		return err
	}
	e.srv = srv
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("weft embedded engine"))
	if err != nil {
		return fmt.Errorf("connecting to the embedded server: %w", err)
	}
	e.nc, e.ownNC = nc, true
	return nil
}

func (e *Engine) startCoordinator(base context.Context) []string {
	opts := []coordinator.Option{coordinator.WithLogger(e.cfg.logger), coordinator.WithConditions(e.cfg.conditions)}
	if e.cfg.partitions > 0 {
		opts = append(opts, coordinator.WithPartitions(e.cfg.partitions))
	}
	ctx, stop := context.WithCancel(base)
	e.stopCoordinator = stop
	e.coordinator.Go(func() {
		if err := coordinator.New(e.store, opts...).Run(ctx); err != nil && ctx.Err() == nil {
			e.setErr(fmt.Errorf("coordinator: %w", err))
			e.cfg.logger.Error("coordinator stopped", "error", err)
		}
	})
	// A coordinator among others may stand by for every partition, so
	// only the first partition's consumer says it is up.
	return []string{coordinator.ConsumerName("coordinator", 0)}
}

func (e *Engine) startWorker(base context.Context) ([]string, error) {
	opts := []worker.Option{worker.WithQueues(e.cfg.queues...), worker.WithConcurrency(e.cfg.concurrency), worker.WithLogger(e.cfg.logger)}
	if e.cfg.name != "" {
		opts = append(opts, worker.WithName(e.cfg.name))
	}
	if e.cfg.drain > 0 {
		opts = append(opts, worker.WithDrainTimeout(e.cfg.drain))
	}
	w, err := worker.New(e.store, opts...)
	if err != nil {
		return nil, fmt.Errorf("weft.Start: %w", err)
	}
	if !e.cfg.noBuiltins {
		builtin.Register(w, e.cfg.builtinOpts...)
	}
	for typ, n := range e.cfg.nodes {
		w.Handle(typ, n)
	}
	ctx, stop := context.WithCancel(base)
	e.stopWorker = stop
	e.worker.Go(func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			e.setErr(fmt.Errorf("worker: %w", err))
			e.cfg.logger.Error("worker stopped", "error", err)
		}
	})
	names := make([]string, 0, len(e.cfg.queues))
	for _, q := range e.cfg.queues {
		names = append(names, worker.QueueConsumer(q))
	}
	return names, nil
}

// waitForConsumers waits until the coordinator and the worker have set up
// their consumers, so that the engine is ready when Start returns.
func waitForConsumers(ctx context.Context, js jetstream.JetStream, stream string, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for _, name := range names {
		for {
			_, err := js.Consumer(ctx, stream, name)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("weft.Start: waiting for consumer %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("weft.Start: waiting for consumer %s: %w", name, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

func (e *Engine) setErr(err error) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

// Err is the error that stopped the coordinator or the worker early, if
// one did; nil while they run.
func (e *Engine) Err() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
}

// Ready says whether the engine can work: its connection is up and its
// coordinator's and worker's consumers exist (a readiness probe).
func (e *Engine) Ready(ctx context.Context) error {
	if !e.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	for _, n := range e.consumers {
		if _, err := e.store.JetStream().Consumer(ctx, e.store.StreamName(), n); err != nil {
			return fmt.Errorf("consumer %s: %w", n, err)
		}
	}
	return nil
}

// Client is a client over the engine's connection: start, wait for,
// signal, cancel and read runs.
func (e *Engine) Client() *client.Client { return e.client }

// Store is the engine's event store, for readers of the log.
func (e *Engine) Store() events.Store { return e.store }

// URL is the embedded server's client URL ("" over WithNATS), for other
// processes (the weft CLI: weft status -nats URL).
func (e *Engine) URL() string {
	if e.srv == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Stop shuts down, in order, the worker (letting running nodes finish
// within its drain time), the coordinator, and what Start opened: the
// connection, the embedded server and its temporary directory. It is
// idempotent.
func (e *Engine) Stop() {
	e.once.Do(func() {
		if e.stopWorker != nil {
			e.stopWorker()
			e.worker.Wait()
		}
		if e.stopCoordinator != nil {
			e.stopCoordinator()
			e.coordinator.Wait()
		}
		if e.ownNC && e.nc != nil {
			e.nc.Close()
		}
		if e.srv != nil {
			embedded.Stop(e.srv)
		}
		if e.tmpDir != "" {
			_ = os.RemoveAll(e.tmpDir)
		}
	})
}
