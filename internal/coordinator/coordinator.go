// Package coordinator is the coordinator daemon's engine room: it consumes
// the events stream durably, keeps a cache of run states folded from the
// log, asks the engine what each run does next, and appends the decisions.
//
// Nothing here is the truth. The cache is an LRU of projections that any
// event can rebuild from the log; a run that falls out of it costs one read
// when its next event arrives, so a run waiting on a person or a timer takes
// no memory. The consumer is acknowledged only after an event's decisions are
// in the log: kill the process at any point and the next coordinator gets the
// event again, folds the run afresh, and decides the same thing, which
// JetStream de-duplicates by id or refuses as a stale decision.
//
// Events of one run are handled in log order by one shard goroutine; runs
// spread over shards, so a slow run never holds up another. Decisions of
// one step go in under optimistic concurrency over the run's decision
// subjects (see events.Store.Append); a crash part-way through leaves a
// prefix that the next decision completes. Durable timers and child runs are written before
// the decisions that refer to them, so a crash in between leaves at worst a
// timer that fires for nothing (the fold passes it over) or a child that the
// re-decided parent finds already started.
//
// Several coordinators may run at once. They share one durable consumer, so
// each sees part of the stream; a gap in the delivery sequence (or a
// redelivery) marks every cached run as unverified, to be re-read before it
// is decided on again.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
)

// Stats counts what the coordinator did.
type Stats struct {
	Processed int64 // events handled
	Malformed int64 // events that did not decode, passed over
	Orphans   int64 // events of runs that have no run-started
	Rejected  int64 // events the fold could not apply, passed over
	Decisions int64 // decision events appended
	Conflicts int64 // stale decisions refused by the log
	Reloads   int64 // runs folded from the log
	Errors    int64 // transient failures; the event is redelivered
	// FailedRuns counts runs failed because their next decision could
	// not be written (see errors.go).
	FailedRuns int64
}

type counters struct {
	processed, malformed, orphans, rejected, decisions, conflicts, reloads, errors, failedRuns atomic.Int64
}

// Option configures a Coordinator.
type Option func(*options)

type options struct {
	durable    string
	shards     int
	cacheSize  int
	logger     *slog.Logger
	now        func() time.Time
	conditions map[string]any
	ackWait    time.Duration
}

// WithDurable names the durable consumer (default "coordinator"). Every
// coordinator of a deployment uses the same name.
func WithDurable(name string) Option { return func(o *options) { o.durable = name } }

// WithShards sets how many runs are decided on concurrently (default 32).
func WithShards(n int) Option { return func(o *options) { o.shards = n } }

// WithCacheSize bounds the cached run states (default 10000).
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock decisions are stamped with.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithConditions registers Go functions for "func:NAME" conditions of
// graphs built with the Go builder (see graph.WithConditions).
func WithConditions(fns map[string]any) Option { return func(o *options) { o.conditions = fns } }

// Coordinator decides runs.
type Coordinator struct {
	store  events.Store
	js     jetstream.JetStream
	opts   options
	log    *slog.Logger
	cache  *runCache
	epoch  atomic.Uint64
	queues sync.Map // queue name → struct{}: consumers known to exist
	graphs sync.Map // digest → *graph.Graph
	snaps  snapshotStore
	n      counters
}

// New returns a coordinator over the store.
func New(store events.Store, opts ...Option) *Coordinator {
	o := options{durable: "coordinator", shards: 32, cacheSize: 10000, now: time.Now, ackWait: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return &Coordinator{
		store: store,
		js:    store.JetStream(),
		opts:  o,
		log:   o.logger.With(logattr.Component, "coordinator"),
		cache: newRunCache(o.cacheSize),
	}
}

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	return Stats{
		Processed: c.n.processed.Load(), Malformed: c.n.malformed.Load(), Orphans: c.n.orphans.Load(),
		Rejected: c.n.rejected.Load(), Decisions: c.n.decisions.Load(), Conflicts: c.n.conflicts.Load(),
		Reloads: c.n.reloads.Load(), Errors: c.n.errors.Load(), FailedRuns: c.n.failedRuns.Load(),
	}
}

// Run consumes the log and decides until ctx ends. Events being handled
// when it ends are left unacknowledged, for the next coordinator.
func (c *Coordinator) Run(ctx context.Context) error {
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	cons, err := c.js.CreateOrUpdateConsumer(setup, c.store.StreamName(), jetstream.ConsumerConfig{
		Durable:     c.opts.durable,
		Description: "Weft coordinators: every run event, in log order",
		// No filter: the whole stream is the fast path on the server;
		// pending schedules (weft.t.>) are passed over here.
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.ackWait,
		MaxAckPending: 20000,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("creating coordinator consumer %q: %w", c.opts.durable, err)
	}
	// Buffers are kept small so that no event waits out the ack wait in
	// them and comes again.
	iter, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return fmt.Errorf("consuming %q: %w", c.opts.durable, err)
	}
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	defer c.observeLag(cons)()

	shards := make([]chan delivery, c.opts.shards)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = make(chan delivery, 64)
		wg.Add(1)
		go func(ch chan delivery) {
			defer wg.Done()
			for d := range ch {
				if ctx.Err() != nil {
					continue // leave it unacknowledged
				}
				c.handle(ctx, d.msg, d.redelivered)
			}
		}(shards[i])
	}
	defer func() {
		for _, ch := range shards {
			close(ch)
		}
		wg.Wait()
	}()

	var lastDelivery uint64
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return nil
			}
			c.log.Warn("consuming the log", logattr.Error, err)
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			c.n.malformed.Add(1)
			_ = msg.Term()
			continue
		}
		if lastDelivery != 0 && meta.Sequence.Consumer != lastDelivery+1 {
			// Part of the stream went to another coordinator: any cached
			// run may have missed events. (A redelivery concerns its own
			// run only; the shard re-reads that one.)
			c.epoch.Add(1)
		}
		lastDelivery = meta.Sequence.Consumer
		if strings.HasPrefix(msg.Subject(), schedulePrefix) {
			_ = msg.Ack() // a timer still waiting to fire
			continue
		}
		run, ok := events.RunOf(msg.Subject())
		if !ok {
			c.n.malformed.Add(1)
			c.log.Warn("passing over an event on an unexpected subject", logattr.Subject, msg.Subject(), logattr.Seq, meta.Sequence.Stream)
			_ = msg.Term()
			continue
		}
		select {
		case shards[shardOf(run, len(shards))] <- delivery{msg: msg, redelivered: meta.NumDelivered > 1}:
		case <-ctx.Done():
			return nil
		}
	}
}

// delivery is a message on its way to its run's shard.
type delivery struct {
	msg         jetstream.Msg
	redelivered bool
}

// schedulePrefix is where pending timers wait (events.AllSchedules).
const schedulePrefix = "weft.t."

func shardOf(run string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(run))
	return int(h.Sum32() % uint32(n))
}
