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
//
// Roles. With WithRoles, the embedded server admits only the users of
// Weft's roles (deploy/SECURITY.md), with the permissions 'weft roles'
// generates: the engine sets the stream and buckets up as the admin, its
// coordinator connects as the coordinator, a worker per queue as that
// queue's worker, and Client and Store are the client's. What a role may
// not do is refused by the server, in development as in production.
//
// # What it offers
//
//	the engine   Start, Engine (Client, Store, URL, Ready, Err, Stop)
//	NATS         Embedded, WithPort, WithRoles (an embedded server),
//	             WithNATS (a server of your own)
//	coordinator  WithConditions, WithPartitions, WithoutCoordinator
//	worker       WithNode, WithBuiltins, WithoutBuiltins, WithQueues,
//	             WithConcurrency, WithName, WithDrainTimeout, WithoutWorker
//	all of it    WithLogger
package weft

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/provision"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/internal/workqueue"
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
	roles         bool
	rolesDir      string
	keys          events.Keys
	offloadAt     int
	redelivery    []coordinator.Option
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

// WithRoles runs the embedded server (Embedded) under Weft's roles: it
// admits only the users 'weft roles' generates for the engine's queues,
// each with its role's permissions, and the engine's coordinator, its
// workers (one per queue) and its client each connect as their role; the
// admin creates the stream and the buckets. With dir, the credentials are
// kept there as 'weft roles -out dir' writes them (auth.conf, and one
// <user>.env file per user, mode 0600) for other processes to connect
// with; an engine started again with the same dir reuses them, unless a
// queue is new (then every password changes). With an empty dir they live
// in memory only.
func WithRoles(dir string) Option {
	return func(c *config) { c.roles, c.rolesDir = true, dir }
}

// WithEncryptKeys seals the data of every event the process writes
// (inputs, invocation state, outputs, state updates, signal data…) with
// AES-256-GCM under keys' current key, and opens sealed data under any of
// its keys (events.UseKeys, process-wide: every engine, client and worker
// of the process shares the ring). A events.KeyRing comes from a key file
// or WEFT_ENCRYPT_KEYS (events.LoadKeys); a user's Keys may be backed by
// a KMS.
func WithEncryptKeys(keys events.Keys) Option { return func(c *config) { c.keys = keys } }

// WithLargePayloads sets the size over which an event's body is kept in
// the Object Store bucket weft-payloads beside the log, the event
// carrying a reference that every reader resolves (0:
// events.DefaultOffloadAt, 256 KiB, the default): a node may output more
// than a NATS message holds (up to events.MaxPayloadObject). Large
// payloads are on by default; internal/eventlog's offload.go says how.
func WithLargePayloads(threshold int) Option {
	return func(c *config) {
		if threshold <= 0 {
			threshold = events.DefaultOffloadAt
		}
		c.offloadAt = threshold
	}
}

// WithRedelivery sets how often the coordinator tries an event it cannot
// decide, for a reason neither transient nor permanent (one sealed under
// a key it does not hold), before the run fails naming the reason, and
// the back-off between tries (doubling from first, at most most). Zero
// keeps a default: 20 tries, from 100 ms to 10 s.
func WithRedelivery(tries int, first, most time.Duration) Option {
	return func(c *config) {
		c.redelivery = []coordinator.Option{coordinator.WithRedelivery(tries, first, most)}
	}
}

// WithLogger sets the logger of the coordinator, the worker and the client
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Engine is a running engine. Its methods are safe for concurrent use.
type Engine struct {
	cfg    config
	srv    *server.Server
	nc     *nats.Conn
	tmpDir string
	// Under the roles: each role's credentials, the connections the
	// engine opened (closed by Stop), and the admin's JetStream, which
	// waits for and probes the consumers.
	creds  map[string]natsconn.Credential
	conns  []*nats.Conn
	probe  jetstream.JetStream
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
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.keys != nil {
		if err := events.UseKeys(cfg.keys); err != nil {
			return nil, fmt.Errorf("weft.WithEncryptKeys: %w", err)
		}
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
	if cfg.roles {
		if err := e.provision(ctx); err != nil {
			return nil, err
		}
	}
	if e.store, err = e.openStore(ctx, natsconn.RoleClient, ""); err != nil {
		return nil, err
	}
	if e.probe == nil {
		e.probe = eventlog.JetStream(e.store)
	}
	e.client = client.New(e.store, client.WithLogger(cfg.logger))
	consumers, err := e.startDaemons(ctx)
	if err != nil {
		return nil, err
	}
	if err := waitForConsumers(ctx, e.probe, e.store.StreamName(), consumers); err != nil {
		return nil, err
	}
	e.consumers = consumers
	return e, nil
}

// check says what is wrong with the options Start was given: the first
// problem found.
func (cfg *config) check() error {
	switch {
	case len(cfg.errs) > 0:
		return errors.Join(cfg.errs...)
	case cfg.nc == nil && !cfg.embedded:
		return errors.New("weft.Start: no NATS: pass weft.WithNATS(conn) or weft.Embedded(dir)")
	case cfg.nc != nil && cfg.embedded:
		return errors.New("weft.Start: weft.WithNATS and weft.Embedded both given; choose one")
	case cfg.port < -1 || cfg.port > 65535:
		return fmt.Errorf("weft.WithPort: want a port number or -1, got %d", cfg.port)
	case cfg.noWorker && len(cfg.nodes) > 0:
		return errors.New("weft.Start: weft.WithNode given with weft.WithoutWorker: no worker would run the node types")
	case cfg.roles && !cfg.embedded:
		return errors.New("weft.Start: weft.WithRoles needs weft.Embedded (over weft.WithNATS, the connection's own credentials decide what it may do)")
	}
	return nil
}

// startDaemons starts the engine's coordinator and worker (those the
// options do not leave out) and returns the consumers they consume from.
func (e *Engine) startDaemons(ctx context.Context) ([]string, error) {
	base := context.WithoutCancel(ctx)
	var consumers []string
	if !e.cfg.noCoordinator {
		names, err := e.startCoordinator(ctx, base)
		if err != nil {
			return nil, err
		}
		consumers = append(consumers, names...)
	}
	if !e.cfg.noWorker {
		names, err := e.startWorker(ctx, base)
		if err != nil {
			return nil, err
		}
		consumers = append(consumers, names...)
	}
	return consumers, nil
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
	ecfg := embedded.Config{StoreDir: dir, Port: e.cfg.port, ServerName: "weft-embedded"}
	if e.cfg.roles {
		users, err := e.roleUsers()
		if err != nil {
			return err
		}
		ecfg.Users = users
	}
	srv, err := embedded.Start(ecfg)
	if err != nil {
		return err
	}
	e.srv = srv
	if e.cfg.roles {
		// Each part connects as its role (openStore).
		return nil
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("weft embedded engine"))
	if err != nil {
		return fmt.Errorf("connecting to the embedded server: %w", err)
	}
	e.nc = nc
	e.conns = append(e.conns, nc)
	return nil
}

// deployment is what the roles' permissions depend on: the engine's
// queues.
func (e *Engine) deployment() natsconn.Deployment {
	return natsconn.Deployment{Queues: e.cfg.queues}
}

// roleUsers generates (or, from the roles directory, reads back) the
// credentials of every role, and returns the server's users.
func (e *Engine) roleUsers() ([]*server.User, error) {
	d := e.deployment()
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("weft.WithRoles: %w", err)
	}
	var creds []natsconn.Credential
	var err error
	if dir := e.cfg.rolesDir; dir == "" {
		creds, err = d.NewCredentials()
	} else if creds, err = natsconn.ReadCredentials(dir, d); errors.Is(err, fs.ErrNotExist) {
		// The hashes in auth.conf are for a server of the operator's;
		// the plain passwords lie beside them, so the lowest cost loses
		// nothing.
		if _, err = natsconn.WriteRoles(dir, d, bcrypt.MinCost, true); err == nil {
			creds, err = natsconn.ReadCredentials(dir, d)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("weft.WithRoles: %w", err)
	}
	e.creds = map[string]natsconn.Credential{}
	var users []*server.User
	for _, c := range creds {
		e.creds[c.User.Name] = c
		users = append(users, &server.User{
			Username: c.User.Name,
			Password: c.Password,
			Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: c.User.PublishAllow, Deny: c.User.PublishDeny},
				Subscribe: &server.SubjectPermission{Allow: c.User.SubscribeAllow},
			},
		})
	}
	return users, nil
}

// openStore opens the events store as role (and queue, for a worker):
// over a connection of its own under the roles, over the engine's
// connection otherwise.
func (e *Engine) openStore(ctx context.Context, role natsconn.Role, queue string) (events.Store, error) {
	js, err := e.jetStream(role, queue)
	if err != nil {
		return nil, err
	}
	var opts []events.Option
	if e.cfg.offloadAt > 0 {
		opts = append(opts, events.WithOffloadAt(e.cfg.offloadAt))
	}
	st, err := events.Open(ctx, js, opts...)
	if err != nil {
		return nil, fmt.Errorf("weft.Start: opening the event store: %w", err)
	}
	return st, nil
}

// jetStream is a JetStream context of role: over a connection as its
// user, with its own inbox prefix, under the roles; the engine's
// connection otherwise.
func (e *Engine) jetStream(role natsconn.Role, queue string) (jetstream.JetStream, error) {
	if !e.cfg.roles {
		return jetstream.New(e.nc)
	}
	c := e.creds[natsconn.UserName(role, queue)]
	cfg := natsconn.Config{User: c.User.Name, Password: c.Password, Name: "weft embedded engine (" + c.User.Name + ")"}
	// The server refuses what a role may not do; the refusal comes back
	// on the connection, and is logged (no secret: subjects only).
	nc, err := cfg.Connect(e.srv.ClientURL(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		e.cfg.logger.Error("NATS reported an error", logattr.NATSUser, c.User.Name, logattr.Error, err)
	}))
	if err != nil {
		return nil, fmt.Errorf("weft.Start: %w", err)
	}
	e.conns = append(e.conns, nc)
	if e.nc == nil {
		e.nc = nc
	}
	return jetstream.New(nc)
}

// provision sets the deployment up as the admin, as 'weft roles -setup'
// does: the stream, the timers stream and the KV buckets, which no other
// role may create. The admin's connection stays open to probe the
// consumers (Ready).
func (e *Engine) provision(ctx context.Context) error {
	admin, err := e.openStore(ctx, natsconn.RoleAdmin, "")
	if err != nil {
		return err
	}
	if _, err := provision.Run(ctx, admin, provision.Options{}); err != nil {
		return fmt.Errorf("weft.Start: setting up as the admin: %w", err)
	}
	e.probe = eventlog.JetStream(admin)
	return nil
}

// startCoordinator starts the coordinator; under the roles it connects
// within ctx, and runs on base.
func (e *Engine) startCoordinator(ctx, base context.Context) ([]string, error) {
	opts := append([]coordinator.Option{coordinator.WithLogger(e.cfg.logger), coordinator.WithConditions(e.cfg.conditions)}, e.cfg.redelivery...)
	if e.cfg.partitions > 0 {
		opts = append(opts, coordinator.WithPartitions(e.cfg.partitions))
	}
	st := e.store
	if e.cfg.roles {
		var err error
		if st, err = e.openStore(ctx, natsconn.RoleCoordinator, ""); err != nil {
			return nil, err
		}
	}
	run, stop := context.WithCancel(base)
	e.stopCoordinator = stop
	e.coordinator.Go(func() {
		// Schedules and event triggers start runs beside the
		// coordinator, under its role.
		_ = schedule.NewRunner(st, schedule.WithLogger(e.cfg.logger)).Run(run)
	})
	e.coordinator.Go(func() { _ = trigger.NewRunner(st, trigger.WithLogger(e.cfg.logger)).Run(run) })
	e.coordinator.Go(func() {
		if err := coordinator.New(st, opts...).Run(run); err != nil && run.Err() == nil {
			e.setErr(fmt.Errorf("coordinator: %w", err))
			e.cfg.logger.Error("coordinator stopped", logattr.Error, err)
		}
	})
	// A coordinator among others may stand by for every partition, so
	// only the first partition's consumer says it is up.
	return []string{coordinator.ConsumerName("coordinator", 0)}, nil
}

// startWorker starts the workers; under the roles they connect within
// ctx, and run on base.
func (e *Engine) startWorker(ctx, base context.Context) ([]string, error) {
	run, stop := context.WithCancel(base)
	e.stopWorker = stop
	// Under the roles a worker user serves one queue: one worker each.
	groups := [][]string{e.cfg.queues}
	if e.cfg.roles {
		groups = nil
		for _, q := range e.cfg.queues {
			groups = append(groups, []string{q})
		}
	}
	for _, queues := range groups {
		st := e.store
		name := e.cfg.name
		if e.cfg.roles {
			var err error
			if st, err = e.openStore(ctx, natsconn.RoleWorker, queues[0]); err != nil {
				return nil, err
			}
			if name != "" && len(groups) > 1 {
				name += "-" + queues[0]
			}
		}
		w, err := e.newWorker(st, queues, name)
		if err != nil {
			return nil, err
		}
		e.worker.Go(func() {
			if err := w.Run(run); err != nil && run.Err() == nil {
				e.setErr(fmt.Errorf("worker: %w", err))
				e.cfg.logger.Error("worker stopped", logattr.Error, err)
			}
		})
	}
	names := make([]string, 0, len(e.cfg.queues))
	for _, q := range e.cfg.queues {
		names = append(names, workqueue.QueueConsumer(q))
	}
	return names, nil
}

// newWorker makes a worker of queues over st, with the node types.
func (e *Engine) newWorker(st events.Store, queues []string, name string) (*worker.Worker, error) {
	opts := []worker.Option{worker.WithQueues(queues...), worker.WithConcurrency(e.cfg.concurrency), worker.WithLogger(e.cfg.logger)}
	if name != "" {
		opts = append(opts, worker.WithName(name))
	}
	if e.cfg.drain > 0 {
		opts = append(opts, worker.WithDrainTimeout(e.cfg.drain))
	}
	w, err := worker.New(st, opts...)
	if err != nil {
		return nil, fmt.Errorf("weft.Start: %w", err)
	}
	if !e.cfg.noBuiltins {
		builtin.Register(w, e.cfg.builtinOpts...)
	}
	for typ, n := range e.cfg.nodes {
		w.Handle(typ, n)
	}
	return w, nil
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
	for _, nc := range e.connections() {
		if !nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
	}
	for _, n := range e.consumers {
		if _, err := e.probe.Consumer(ctx, e.store.StreamName(), n); err != nil {
			return fmt.Errorf("consumer %s: %w", n, err)
		}
	}
	return nil
}

// connections are the engine's connections: the caller's (WithNATS), or
// those the engine opened.
func (e *Engine) connections() []*nats.Conn {
	if len(e.conns) == 0 {
		return []*nats.Conn{e.nc}
	}
	return e.conns
}

// Client is a client over the engine's connection (the client role's,
// under WithRoles): start, wait for, signal, cancel and read runs.
func (e *Engine) Client() *client.Client { return e.client }

// Store is the engine's event store (the client role's, under
// WithRoles), for readers of the log.
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
		for _, nc := range e.conns {
			nc.Close()
		}
		if e.srv != nil {
			embedded.Stop(e.srv)
		}
		if e.tmpDir != "" {
			_ = os.RemoveAll(e.tmpDir)
		}
	})
}
