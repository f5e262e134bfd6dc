package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// Worker runs nodes from task queues. Create it with New, register handlers
// with Handle, then call Run.
type Worker struct {
	store  events.Store
	js     jetstream.JetStream
	opts   options
	log    *slog.Logger
	cancel *cancelRegistry
	runs   *runReader // runinfo.go
	// providers are the OpenTelemetry providers of WithTracerProvider and
	// WithMeterProvider, carried in Run's context; nil: the globals.
	providers *telemetry.Providers

	mu       sync.RWMutex
	handlers map[string]Node
	unknown  sync.Map // node types logged as unserved

	running  atomic.Bool
	inflight sync.WaitGroup
	// ends is what the worker heard of runs' ends (endwatch.go), set by
	// Run; nil: nothing, every check reads.
	ends  *endWatch
	stats counters
	// acks bounds the double acks that go on after their item gave its
	// slot back (execute.go, ack): as many as the worker's concurrency.
	acks chan struct{}

	// unknownDelay is how long work of a node type this worker does not
	// serve waits before it is delivered again.
	unknownDelay time.Duration
	// staleAfter: see runinfo.go; a field so that tests can change it.
	staleAfter time.Duration
	// now is the clock of Heartbeat's rate limit (nil: time.Now).
	now func() time.Time
}

// Stats are a worker's counters since it was created.
type Stats struct {
	// Received counts work items taken from the queues.
	Received uint64
	// Succeeded, Failed and Cancelled count outcomes appended to the log.
	Succeeded, Failed, Cancelled uint64
	// Malformed counts items that were not valid node-ready events.
	Malformed uint64
	// Redelivered counts items delivered more than once.
	Redelivered uint64
}

type counters struct {
	received, succeeded, failed, cancelled, malformed, redelivered atomic.Uint64
}

// New returns a worker that appends to store and pulls from its stream.
func New(store events.Store, opts ...Option) (*Worker, error) {
	if store == nil {
		return nil, errors.New("worker: nil store")
	}
	o := options{
		queues:       []string{DefaultQueue},
		concurrency:  DefaultConcurrency,
		drainTimeout: DefaultDrainTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.name == "" {
		o.name = defaultName()
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Worker{
		store:    store,
		js:       eventlog.JetStream(store),
		opts:     o,
		log:      logger.With(logattr.Worker, o.name),
		cancel:   newCancelRegistry(),
		runs:     newRunReader(store),
		handlers: map[string]Node{},

		providers:    telemetry.NewProviders(o.tracerProvider, o.meterProvider),
		unknownDelay: unknownTypeDelay,
		staleAfter:   staleAfter,
		acks:         make(chan struct{}, o.concurrency),
	}, nil
}

// Handle registers the node for a node type. Registering a type again
// replaces its node. It panics on an empty type or a nil node, which are
// programming errors.
func (w *Worker) Handle(nodeType string, n Node) {
	if nodeType == "" || n == nil {
		panic("worker: Handle needs a node type and a node")
	}
	w.mu.Lock()
	w.handlers[nodeType] = n
	w.mu.Unlock()
}

// Types lists the node types the worker has handlers for, sorted.
func (w *Worker) Types() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]string, 0, len(w.handlers))
	for t := range w.handlers {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func (w *Worker) handler(nodeType string) Node {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.handlers[nodeType]
}

// Handler returns the executor registered for a node type, for executors
// that run other node types as their steps (an agent's tools).
func (w *Worker) Handler(nodeType string) (Node, bool) {
	n := w.handler(nodeType)
	return n, n != nil
}

// Name is the worker's name, as written in the events.
func (w *Worker) Name() string { return w.opts.name }

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Received:    w.stats.received.Load(),
		Succeeded:   w.stats.succeeded.Load(),
		Failed:      w.stats.failed.Load(),
		Cancelled:   w.stats.cancelled.Load(),
		Malformed:   w.stats.malformed.Load(),
		Redelivered: w.stats.redelivered.Load(),
	}
}

// Run pulls and runs work until ctx ends, then drains (see the package
// docs). It returns nil after a clean drain, ErrDrainTimeout when nodes had
// to be handed back, and an error at once when the worker cannot start. A
// Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	ctx = telemetry.WithProviders(ctx, w.providers)
	nc := w.js.Conn()
	sub, err := nc.Subscribe(eventlog.KindFilter(events.RunCancelRequested), w.cancel.onRequest)
	if err != nil {
		return fmt.Errorf("worker: subscribing to cancel requests: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if !w.opts.noEndWatch {
		w.ends = watchEnds(nc)
		defer w.ends.stop()
	}

	queues := make([]*queue, 0, len(w.opts.queues))
	for _, name := range w.opts.queues {
		q, err := w.openQueue(ctx, name)
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		queues = append(queues, q)
	}
	// Withdrawn after the drain, when the worker no longer serves.
	defer w.announce(ctx).stop(w)

	// Nodes run on a context that outlives ctx, so that they can finish
	// while the worker drains; it ends when the drain timeout passes.
	base, stopNodes := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopNodes(nil)
	slots := make(chan struct{}, w.opts.concurrency)
	var pullers sync.WaitGroup
	for _, q := range queues {
		pullers.Go(func() { w.pull(ctx, base, q, slots) })
	}
	w.log.Info("worker running", logattr.Queues, w.opts.queues, logattr.Concurrency, w.opts.concurrency, logattr.Types, w.Types())

	<-ctx.Done()
	pullers.Wait()
	w.log.Info("worker draining")
	done := make(chan struct{})
	go func() { w.inflight.Wait(); close(done) }()
	var runErr error
	if !waitFor(done, w.opts.drainTimeout) {
		stopNodes(errDrainTimeout)
		// Handlers that ignore their context cannot be stopped; give the
		// others a moment to hand their items back.
		waitFor(done, 5*time.Second)
		runErr = ErrDrainTimeout
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil && !nc.IsClosed() {
		w.log.Warn("flushing acks", logattr.Error, err)
	}
	w.log.Info("worker stopped", logattr.Stats, w.Stats())
	return runErr
}

// waitFor waits for done at most d.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// queue is one task queue the worker pulls from.
type queue struct {
	name      string
	consumer  jetstream.Consumer
	heartbeat time.Duration
	// perQueue is the queue's own limit (WithQueueConcurrency; 0: none).
	perQueue int
	// running bounds the queue's nodes running (its limit), taken the
	// items taken from it and not done: twice that (see consume).
	running, taken chan struct{}
}

// openQueue sets up a queue's consumer, waiting out a NATS that is away
// or electing its leaders (with capped back-off, logging what it waits
// for) until ctx ends; a configuration error ends it at once.
func (w *Worker) openQueue(ctx context.Context, name string) (*queue, error) {
	var c jetstream.Consumer
	err := setup.Retry(ctx, w.log, "the consumer of queue "+name, setupFatal, func(ctx context.Context) error {
		var err error
		c, err = workqueue.EnsureQueue(ctx, w.js, w.store.StreamName(), name, workqueue.QueueOptions{AckWait: w.opts.ackWait})
		return err
	})
	if err != nil {
		return nil, err
	}
	ackWait := c.CachedInfo().Config.AckWait
	hb := w.opts.heartbeat
	if hb == 0 {
		hb = ackWait / 3
	}
	if hb <= 0 || (ackWait > 0 && hb >= ackWait) {
		w.log.Warn("heartbeat is not shorter than the queue's ack wait; work may be redelivered while it runs", logattr.Queue, name, logattr.Heartbeat, hb, logattr.AckWait, ackWait)
		if hb <= 0 {
			hb = time.Second
		}
	}
	q := &queue{name: name, consumer: c, heartbeat: hb, perQueue: w.opts.perQueue[name]}
	n := q.limit(w.opts.concurrency)
	q.running, q.taken = make(chan struct{}, n), make(chan struct{}, 2*n)
	return q, nil
}

// pull takes work from a queue until ctx ends, re-subscribing if the
// consumer's message iterator closes underneath it.
func (w *Worker) pull(ctx, base context.Context, q *queue, slots chan struct{}) {
	log := w.log.With(logattr.Queue, q.name)
	for {
		iter, err := q.consumer.Messages(
			// Buffer no more than the worker can run: items wait in the
			// buffer with their AckWait running.
			jetstream.PullMaxMessages(q.limit(w.opts.concurrency)),
			// A pull request the server no longer holds while the
			// iterator counts it pending is noticed after two missed
			// heartbeats: at the default expiry (30 s, heartbeats 15 s)
			// a burst saw the queue stall that long.
			jetstream.PullExpiry(pullExpiry),
			jetstream.PullHeartbeat(pullExpiry/5),
			jetstream.WithMessagesErrOnMissingHeartbeat(false),
		)
		if err == nil {
			stop := context.AfterFunc(ctx, iter.Drain)
			w.consume(ctx, base, q, iter, slots)
			stop()
			if ctx.Err() != nil {
				return
			}
			log.Warn("queue subscription closed; subscribing again")
		} else {
			log.Error("subscribing to queue", logattr.Error, err)
		}
		if !sleep(ctx, time.Second) {
			return
		}
		if c, err := workqueue.EnsureQueue(ctx, w.js, w.store.StreamName(), q.name, workqueue.QueueOptions{AckWait: w.opts.ackWait}); err == nil {
			q.consumer = c
		} else if ctx.Err() == nil {
			log.Error("ensuring queue", logattr.Error, err)
		}
	}
}

// pullExpiry is how long a queue's pull request lasts.
const pullExpiry = 5 * time.Second

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// consume takes the items of one message iterator until the iterator
// closes, each on a goroutine of its own (process), at most twice the
// queue's limit (queue.limit) at once: as many running their node (each
// holding a slot, takeSlot) as the limit allows, and as many again being
// read and checked before their node starts (decode, the ended-run check,
// the run's start) or waiting for a slot. So the reads and checks before a
// node, round trips to the server, go on beside the running nodes instead
// of holding their slots (issue 30: under a burst the ended-run check of
// an item that waited over staleAfter held the slot for a stream-info
// request). Once ctx ends the iterator is draining: what it still holds
// is handed back, as are items not yet started.
//
// The goroutines outlive their item: one that is done waits for the next
// (work), and a new one starts only when none waits, at most as many as
// items may be taken (when that many run, one of them has handed its
// item's token back and is on its way to the next). A goroutine started
// for every item grew
// its stack on every item (decoding one needs more than a new stack
// has): a quarter of the worker's CPU in the hop figure, on the way to
// the node's invoking.
func (w *Worker) consume(ctx, base context.Context, q *queue, iter jetstream.MessagesContext, slots chan struct{}) {
	work := make(chan jetstream.Msg)
	defer close(work)
	started := 0
	run := func(m jetstream.Msg) {
		defer w.inflight.Done()
		defer func() { <-q.taken }()
		w.process(ctx, base, q, m, slots)
	}
	for {
		select {
		case q.taken <- struct{}{}:
		case <-ctx.Done():
			w.handBack(iter)
			return
		}
		m, err := iter.Next()
		if err != nil {
			<-q.taken
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			if ctx.Err() == nil {
				w.log.Warn("pulling work", logattr.Queue, q.name, logattr.Error, err)
			}
			continue
		}
		if ctx.Err() != nil {
			w.nak(m)
			<-q.taken
			continue
		}
		w.inflight.Add(1)
		select {
		case work <- m:
		default:
			if started == cap(q.taken) {
				work <- m
				continue
			}
			started++
			go func() {
				run(m)
				for m := range work {
					run(m)
				}
			}()
		}
	}
}

// takeSlot waits for one of the worker's slots and one of the queue's
// (WithConcurrency, WithQueueConcurrency), telling the server every
// heartbeat that m is in progress meanwhile (it was delivered: its ack
// wait runs); ok is false when ctx ended first (the worker drains: the
// item is not started).
func (w *Worker) takeSlot(ctx context.Context, q *queue, slots chan struct{}, m jetstream.Msg) (release func(), ok bool) {
	// The common case, both free: no ticker (a timer set and stopped
	// for every item, on the way to its node.invoking).
	select {
	case q.running <- struct{}{}:
		select {
		case slots <- struct{}{}:
			return func() { <-slots; <-q.running }, true
		default:
			<-q.running
		}
	default:
	}
	beat := time.NewTicker(q.heartbeat)
	defer beat.Stop()
	got := false
	for !got {
		select {
		case q.running <- struct{}{}:
			got = true
		case <-beat.C:
			_ = m.InProgress()
		case <-ctx.Done():
			return nil, false
		}
	}
	for {
		select {
		case slots <- struct{}{}:
			return func() { <-slots; <-q.running }, true
		case <-beat.C:
			_ = m.InProgress()
		case <-ctx.Done():
			<-q.running
			return nil, false
		}
	}
}

// handBack naks what a draining iterator still buffers, so that other
// workers get it at once.
func (w *Worker) handBack(iter jetstream.MessagesContext) {
	n := 0
	for {
		m, err := iter.Next()
		if err != nil {
			break
		}
		w.nak(m)
		n++
	}
	if n > 0 {
		w.log.Info("handed back buffered work", logattr.Count, n)
	}
}

func (w *Worker) nak(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		w.log.Warn("handing work back", logattr.Subject, m.Subject(), logattr.Error, err)
	}
}

// limit is how many of the queue's nodes the worker may run at once.
func (q *queue) limit(worker int) int {
	if q.perQueue > 0 && q.perQueue < worker {
		return q.perQueue
	}
	return worker
}

// setupFatal reports whether a setup error is one waiting cannot fix.
func setupFatal(err error) bool {
	return errors.Is(err, events.ErrInvalidID) || errors.Is(err, eventlog.ErrUnsafeSetting) ||
		errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, nats.ErrAuthorization)
}
