// Package coordinator is the coordinator daemon's engine room: it consumes
// its partitions of the events stream, keeps a cache of run states folded
// from the log, asks the engine what each run does next, and appends the
// decisions.
//
// Nothing here is the truth. The cache is an LRU of projections that any
// event can rebuild from the log; a run that falls out of it costs one read
// when its next event arrives, so a run waiting on a person or a timer takes
// no memory. An event is acknowledged only after its decisions are in the
// log: kill the process at any point and the next holder of the partition
// gets the event again, folds the run afresh, and decides the same thing,
// which JetStream de-duplicates by id or refuses as a stale decision.
//
// # Partitions
//
// Runs are split into a fixed number of partitions (WithPartitions, the
// daemon's -partitions, at most eventlog.Slots) by the slot token of their
// subjects: each partition is one durable consumer filtered on its slots,
// consumed by the one coordinator that holds its lease in the KV bucket
// LeasesBucket. Leases expire a lease duration (WithLeaseTTL) after their
// holder's last renewal, and a standby takes an expired one over at its
// next tick (a fifth of the duration); a coordinator that stops cleanly
// (SIGTERM) deletes its leases on the way out, so its partitions pass on
// within a tick. Each coordinator holds its share of the partitions,
// ceil(partitions / live coordinators), releasing the excess and taking
// free ones, so starting or stopping coordinators rebalances them with no
// manual step. partition.go says how, and why an overlap of two holders is
// safe: a lease only keeps one coordinator busy with a run at a time; what
// makes every decision land once is the per-run concurrency check of the
// log, which no lease can break. A lease's value says which process holds
// it (Holder): `nats kv get weft-coordinators lease.3`.
//
// Within a coordinator, events of one run are handled in delivery order,
// one at a time; a bounded number of runs are handled at once, every event
// held waiting its turn gets in-progress acknowledgements, and a slow run
// holds up only itself (inflight.go). What a coordinator holds is bounded
// by the server: each partition consumer delivers at most its
// max_ack_pending unacknowledged events (partitionAckPending), so a burst
// of runs waits in the stream, and no event is handed back and no run
// read again for want of room. A shard waits for its run's decisions to
// be appended, so the shards (DefaultShards) bound the appends in flight.
// Once a run's end is appended, the coordinator publishes the run's ended
// notice (eventlog.EndedNotice, core NATS, not stored), by which workers
// spare the read of their ended-run check (ended.go).
//
// # Changing the number of partitions
//
// A run's partition is its slot modulo the partition count, so all
// coordinators of a deployment must agree on it. The count is recorded in
// the partition consumers' metadata, and a coordinator told another one
// refuses to start (ErrPartitionCount; the daemon exits saying so) rather
// than consume some slots twice and leave others undecided. To change it
// on a live system:
//
//  1. stop every coordinator (SIGTERM, or wait a lease duration after a
//     SIGKILL, until the announcements expire). Clients and workers go on:
//     runs in flight keep their events in the stream and wait, undecided;
//  2. start one coordinator with the new -partitions and -repartition. It
//     refuses while another coordinator is announced; otherwise it reads
//     where the old partition consumers stand, deletes them, and creates
//     the new ones (and their timer consumers) starting at the earliest
//     event any old one had not acknowledged. Events already handled may
//     be handled again, which the log's de-duplication and concurrency
//     check make harmless; none is passed over. Runs in flight go on from
//     where they stood. If it dies midway, the coordinators started next
//     with the new count finish the change (repartition.go);
//  3. start the other coordinators with the new -partitions (without
//     -repartition, which is harmless once the counts agree).
//
// Under `weft roles`, a coordinator's user may not delete consumers: run
// step 2 with the admin's credentials, and if the roles were generated
// for fewer partitions than the new count (`weft roles -partitions`,
// default 64), generate them again.
//
// The pause is the time from the first stop to the repartitioned
// coordinator's start; no run is lost or decided twice
// (TestRepartitionKeepsRunsGoing).
//
// Limits: at most eventlog.Slots (64) partitions, so at most 64
// coordinators do work at once (more stand by); partitions are spread by
// count, not by load, so a partition with many busy runs is not split; a
// killed holder's partitions wait up to a lease duration plus a tick, and
// the events it was handling up to the consumers' ack wait (10s).
//
// # Local nodes
//
// Pure, cheap nodes run here, in the coordinator that owns the run, with
// no queue hop (local.go), as Temporal's local activities do: the built-in
// transform and the types registered with WithLocalNode, through the same
// node contract as on a worker (worker.InvokeLocal); routers are decided
// by the engine itself. The engine readies a local node like any other,
// on the reserved queue events.LocalQueue ("_local"), which no worker
// consumes; once the decision is in the log the shard runs the node,
// applies its outcome (node-invoked or node-failed on "w._local", which
// only the coordinator's role may write) to the cached state as it does
// its own decisions, decides again, and writes the outcome and the
// decisions after it as one step (stepLocal, eventlog.Engine.AppendStep):
// published without waiting in between, the first decision conditioned on
// the outcome being the stream's last message, so one round trip a node
// in the common case, and never a decision in the log without the outcome
// it follows (where another message came between, the decision goes in
// after the outcome's ack, as two appends). The events are those of an
// outcome appended and then decided from, in the same order. So a chain of
// local nodes runs with no consumer hop between them: up
// to localInlineSteps (16) rounds in one handled event, within its budget
// (below), then the next round when the echo of the last node-ready is
// handled (a round's echoes are held for its run meanwhile). When a
// shard is full anyway (several runs' chains on one shard), the dispatcher
// takes the coordinator's own echoes itself (ownEchoWhenFull): it
// acknowledges them, holds a running local node's work item, and hands
// back a waiting one without dropping its run's cache, so that a busy
// shard never turns into a run read afresh for every echo. Retries,
// fallbacks and the run's end are the engine's as for any node; the node's
// timeout (DefaultLocalTimeout when it sets none) bounds each attempt.
//
// A slow local node must not stall the runs that share its shard, so
// each handled event runs local nodes inline for at most a budget
// (localInlineBudget, 50ms); a node still running then is detached: it
// goes on off the shard, bounded by its timeout, and appends its outcome
// itself, which comes back through the partition consumer like a
// worker's. The choice keeps the common case (a transform takes
// microseconds) free of any extra hop, and bounds what one run can take
// from a shard.
//
// Crash safety comes from the work item's own echo: the node-ready
// decision comes back through the partition consumer, and is acknowledged
// only once the node's outcome is in the log (or the attempt is no longer
// live): not while its node runs detached (its ack is held, kept in
// progress, and given once the outcome is in), nor while it runs inline
// (the shard is busy with the event that decided it), nor before it ran.
// The node whose echo is being handled starts even when the inline budget
// is spent (detached at once), and an echo whose node is still pending,
// given up or not yet recorded is handed back, never acknowledged
// (ownEchoWhenFull, localUnrun). If the coordinator
// dies between the ready and the outcome, the next holder of the partition
// gets the echo again, folds the run afresh, finds the local attempt ready
// and runs it again. Local nodes must therefore be deterministic and
// idempotent. The outcome is a fact, appended unchecked and fenced by the
// fold like a worker's; what follows it is decided under the usual
// optimistic concurrency, so nothing is decided twice. A step whose write
// fails (or whose ack is lost) drops the run's cache like any decision
// that fails: the run is read again, and the outcome, if it is in, folded. Every coordinator of
// a deployment must register the same local types: the engine's choice of
// queue depends on them.
//
// # Child runs
//
// A subgraph node's child run is started by the parent's coordinator
// with a decision of the child run: its run-started on the child's
// decision subject (eventlog.ChildStartedSubject), which NATS lets only
// this role write, appended on a child run that must have no events yet,
// before the parent's own decisions. Its id is the engine's
// (engine.ChildRunID: the parent, the activation and a part derived from
// the parent's nonce), so another writer who can read the parent may know
// it first and write there. What it wrote is never believed (children.go):
// a run-started naming a parent anywhere but on the decision subject is
// refused by events.Decode, so that run does not exist; and when the
// child's subjects hold anything before the coordinator's start, the
// start fails, and the parent's decisions are followed by
// engine.PreemptedNotice, a child-run-finished that fails the node with
// ChildRunPreempted (its fallback, if it has one, then the run's failure).
// Whoever folds the parent afresh checks each child it waits for the same
// way, so a coordinator that died before the notice leaves no node
// waiting forever; and a run whose start claims a parent from a client's
// subject (an attacker's, or a child an older Weft started there) tells
// that parent, whose node, if it waits for exactly that id, fails rather
// than waits. Stats.ChildrenPreempted counts the nodes failed so.
//
// # The fault model
//
// What may fail: any process may stop at any instruction (SIGKILL); any
// append may fail, time out, or land with its acknowledgement lost; any
// message may be delivered again, late, or after later ones; timers may
// fire late or twice, or never (a schedule the server took and lost); a
// NATS server of a cluster may go away and a replica may answer reads from
// behind; anyone with publish rights may write junk, events of types this
// version does not know, or messages under ids the engine will use, or
// under the ids of runs the engine will start.
//
// What is guaranteed:
//
//   - Every run ends. Errors are classified (errors.go): transient ones are
//     retried with capped back-off for as long as NATS needs; a decision
//     that can never be written fails the run with an event that says why;
//     anything else is retried a bounded number of times, then fails the
//     run the same way.
//   - Timers exist exactly when their decisions are in the log (timers.go):
//     armed after the decision lands, re-armed from the state whenever a
//     run is folded from the log, purged when the run ends; one still
//     pending a grace (WithTimerGrace) after its time is fired from the
//     log by the coordinator that armed it.
//   - No decision is written twice, and none from a stale state: decisions
//     are appended under per-run optimistic concurrency over the run's
//     decision subjects, computed from every message there, accepted by
//     the fold or not; a duplicate acknowledgement is confirmed against
//     the stored message; a read of a run reaches at least the event being
//     handled, however far behind the replica that answers.
//   - An outcome counts only for the attempt and delivery that are live in
//     the fold (pkg/projection); a late or superseded one is recorded and
//     changes nothing.
//   - Messages the engine does not accept keep their place in the history
//     and are passed over, visibly; they never stall a run.
//   - A child run is believed only if this role wrote its start (see
//     Child runs below): a run another writer put under a child's id
//     first is never taken for the child, and the node that wanted it
//     fails saying why.
//
// What is not: a node's side effect may run more than once (a worker dies
// after the effect and before its outcome lands, or a delivery is
// superseded); each logical attempt carries one idempotency key, stable
// across its deliveries, for the node to guard the effect with. Events a
// client or worker appends outside its role are refused by NATS
// permissions (deploy/), not here.
package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// Stats counts what the coordinator did.
type Stats struct {
	Processed int64 // events handled
	Malformed int64 // events that did not decode, passed over
	Orphans   int64 // events of runs that have no run-started
	Rejected  int64 // events the fold could not apply, passed over
	Stale     int64 // late or superseded outcomes and decisions, passed over
	Decisions int64 // decision events appended
	Conflicts int64 // stale decisions refused by the log
	Reloads   int64 // runs folded from the log
	// Reorders counts runs folded afresh because an event preceding one
	// of this coordinator's decisions in the log arrived after it.
	Reorders int64
	Errors   int64 // transient failures; the event is redelivered
	// FailedRuns counts runs failed because their next decision could
	// not be written (see errors.go).
	FailedRuns int64
	// HandedBack counts events handed back because the coordinator held
	// as many as it may, or no longer held their partition; they come
	// again shortly.
	HandedBack int64
	// SnapshotsDiscarded counts snapshots the log does not attest (see
	// snapshot.go); their runs were folded from the start.
	SnapshotsDiscarded int64
	// OverBudget counts runs failed for a history over its budget (see
	// budget.go).
	OverBudget int64
	// LocalRuns counts local nodes run to a recorded outcome here;
	// LocalDetached those of them that outran the shard's inline budget.
	LocalRuns, LocalDetached int64
	// ChildrenPreempted counts subgraph nodes failed because their child
	// run's id held another writer's events (children.go).
	ChildrenPreempted int64
	// Continued counts continuations started here (continue-as-new:
	// continue.go); a start found written before is not counted.
	Continued int64
	// OverdueTimers counts timers the safety net fired from the log: they
	// were pending longer than the grace past their time (timers.go).
	OverdueTimers int64
	// WatchedRuns is the runs with pending timers the safety net watches
	// now; UnwatchedRuns counts the runs it could not watch, its bound
	// reached (WithTimerGrace).
	WatchedRuns, UnwatchedRuns int64
}

type counters struct {
	processed, malformed, orphans, rejected, stale, decisions, conflicts, reloads, reorders, errors, failedRuns, handedBack atomic.Int64
	snapshotsDiscarded, overBudget                                                                                          atomic.Int64
	localRuns, localDetached, preempted, continued                                                                          atomic.Int64
	overdueFired                                                                                                            atomic.Int64
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
	partitions int
	leaseTTL   time.Duration
	// repartition lets Run replace partition consumers made for another
	// partition count (repartition.go).
	repartition bool
	maxEvents   int   // history budget (budget.go)
	maxBytes    int64 // history budget (budget.go)
	retention   time.Duration
	// local holds the local executors by node type (local.go).
	local        map[string]worker.Node
	localTimeout time.Duration
	localBudget  time.Duration // localInlineBudget; tests shorten or lengthen it
	maxHeld      int           // the bound of the events held (inflight.go), if set; tests lower it
	flowSweep    time.Duration // how often the flow bucket is swept (flow.go)
	timerGrace   time.Duration // how late a timer may be before the safety net fires it (timers.go)
	maxWatched   int           // the runs the safety net watches at most (timers.go)
	flow         *flow.Limiter // WithFlow
	// maxDeliveries, backoffMin and backoffMax: WithRedelivery.
	maxDeliveries          int
	backoffMin, backoffMax time.Duration
}

// WithFlow sets the flow limiter the coordinator takes concurrency slots
// from (default: one over the weft-flow bucket, opened by Run); the
// simulator gives every coordinator one over its model of the bucket.
func WithFlow(l *flow.Limiter) Option { return func(o *options) { o.flow = l } }

// WithFlowSweep sets how often the coordinator sweeps the flow bucket for
// slots of attempts that ended (default flow.SweepInterval).
func WithFlowSweep(d time.Duration) Option { return func(o *options) { o.flowSweep = d } }

// WithDurable names the partition consumers (default "coordinator": the
// consumers are "coordinator-0", "coordinator-1", …, and the starts
// consumers "coordinator-starts-0", …: lanes.go). Every coordinator of
// a deployment uses the same name.
func WithDurable(name string) Option { return func(o *options) { o.durable = name } }

// WithPartitions sets the number of partitions runs are split into
// (default 1, at most eventlog.Slots). Every coordinator of a deployment
// uses the same number; see partition.go.
func WithPartitions(n int) Option { return func(o *options) { o.partitions = n } }

// WithLeaseTTL sets how long a partition lease outlives its holder's last
// renewal (default 5s): the longest a partition goes undecided when its
// holder dies.
func WithLeaseTTL(d time.Duration) Option { return func(o *options) { o.leaseTTL = d } }

// WithShards sets how many runs are decided on concurrently (default
// DefaultShards).
func WithShards(n int) Option { return func(o *options) { o.shards = n } }

// DefaultShards is how many runs a coordinator decides on at once unless
// told otherwise. A shard waits for its run's decisions to be appended (a
// round trip to the stream leader) before it takes the next event, so the
// shards bound the decisions in flight, and with them the rate of a burst
// of runs: at 32, 2,000 runs × 10 noop nodes waited 1.15 s at the mean for
// a shard, and the coordinator decided ~700 nodes/s under load where 128
// shards decided ~1,200 (issue 30; go run ./cmd/weftbench -only
// throughput). What a shard holds is one run's state, already cached.
const DefaultShards = 128

// WithCacheSize bounds the cached run states (default 10000).
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock the coordinator decides by: the time engine
// decisions are made at (retry back-offs, deadlines) and the time of every
// event it writes. Durations it measures against the NATS server's own
// timers (lease renewal, ack waits and keep-alives, the local-node time
// budget, bucket rechecks) stay on the real clock, as the server's do.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// ConditionHint is what a run whose graph names an unregistered Go
// condition is told to do.
const ConditionHint = "register it on every coordinator: weft.WithConditions (package github.com/weft-dev/weft/pkg/weft) for an embedded engine"

// WithConditions registers Go functions for "func:NAME" conditions of
// graphs built with the Go builder (see graph.WithConditions).
func WithConditions(fns map[string]any) Option { return func(o *options) { o.conditions = fns } }

// Coordinator decides runs.
type Coordinator struct {
	id     string // in the leases bucket
	holder []byte // the value of its keys there (Holder)
	// startAt and timersStartAt, when set by a repartition, are where the
	// partition consumers it creates start in the events and timers
	// streams.
	startAt, timersStartAt uint64
	running                atomic.Bool
	parts                  partitionSet
	store                  eventlog.Engine
	js                     jetstream.JetStream
	opts                   options
	log                    *slog.Logger
	cache                  *runCache
	queues                 sync.Map // queue name → struct{}: consumers known to exist
	graphs                 sync.Map // digest → *graph.Graph
	snaps                  snapshotStore
	n                      counters
	// announced is when the coordinator last announced itself in the
	// leases bucket (unix nanoseconds): see Readiness.
	announced atomic.Int64
	// runsModel is the read model of runs (readmodel.go).
	runsModel readModel
	// inflight holds the local nodes running here, by the id of their
	// work item (local.go); localWG waits for them.
	inflight sync.Map
	localWG  sync.WaitGroup
	// echoes holds the ids of events this coordinator appended whose echo
	// has not come back through the consumer, and localPending those of
	// local nodes' work items not yet started (local.go): a shard that is
	// full takes them without handing them back (see dispatch).
	echoes, localPending sync.Map
	// flow takes and gives back concurrency slots (flow.go); nil without
	// JetStream. releaseLater says slots are given back off the handler's
	// path (set by Run; the simulator, which drives the handlers itself,
	// gives them back in line), and releases waits for those in flight.
	flow         *flow.Limiter
	releaseLater atomic.Bool
	releases     sync.WaitGroup
	// claims holds the claimed children whose parents were told
	// (children.go), so that a claimed run's every event does not tell
	// the parent again.
	claims claimSet
	// watch holds the runs with pending timers, for the timers' safety
	// net (timers.go).
	watch *timerWatch
}

// New returns a coordinator over the store.
func New(store events.Store, opts ...Option) *Coordinator {
	o := options{durable: "coordinator", shards: DefaultShards, cacheSize: 10000, now: time.Now, ackWait: 10 * time.Second,
		partitions: 1, leaseTTL: defaultLeaseTTL, maxEvents: DefaultMaxHistoryEvents, maxBytes: DefaultMaxHistoryBytes, retention: readmodel.DefaultRetention,
		local: defaultLocal(), localTimeout: DefaultLocalTimeout, localBudget: localInlineBudget, flowSweep: flow.SweepInterval,
		timerGrace: DefaultTimerGrace, maxWatched: defaultMaxWatched,
		maxDeliveries: DefaultMaxDeliveries, backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax}
	for _, opt := range opts {
		opt(&o)
	}
	o.partitions = min(max(o.partitions, 1), eventlog.Slots)
	o.leaseTTL = max(o.leaseTTL, minLeaseTTL)
	if o.logger == nil {
		o.logger = slog.Default()
	}
	c := &Coordinator{
		id:    eventlog.RandomID(),
		store: eventlog.Must(store),
		js:    eventlog.JetStream(store),
		opts:  o,
		log:   o.logger.With(logattr.Component, "coordinator"),
		cache: newRunCache(o.cacheSize),
		watch: newTimerWatch(o.maxWatched),
	}
	c.holder = c.holderValue()
	c.flow = o.flow
	return c
}

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	return Stats{
		Processed: c.n.processed.Load(), Malformed: c.n.malformed.Load(), Orphans: c.n.orphans.Load(),
		Rejected: c.n.rejected.Load(), Stale: c.n.stale.Load(), Decisions: c.n.decisions.Load(), Conflicts: c.n.conflicts.Load(),
		Reloads: c.n.reloads.Load(), Reorders: c.n.reorders.Load(), Errors: c.n.errors.Load(), FailedRuns: c.n.failedRuns.Load(),
		HandedBack: c.n.handedBack.Load(), SnapshotsDiscarded: c.n.snapshotsDiscarded.Load(), OverBudget: c.n.overBudget.Load(),
		LocalRuns: c.n.localRuns.Load(), LocalDetached: c.n.localDetached.Load(),
		ChildrenPreempted: c.n.preempted.Load(), Continued: c.n.continued.Load(),
		OverdueTimers: c.n.overdueFired.Load(),
		WatchedRuns:   c.watch.size(), UnwatchedRuns: c.watch.missed(),
	}
}

// Run takes its share of the partitions and decides their runs until ctx
// ends (see partition.go). Events waiting to be handled when it ends are
// handed back, and the leases released, so that the next holder of their
// partitions takes them at once; an event being handled is left
// unacknowledged, and comes again after the ack wait. Run returns an
// error only when it refuses to start (ErrPartitionCount).
//
// (Its length is its start-up in order, each step a call; kept in one
// place so that the order of the deferred stops reads beside the starts.)
func (c *Coordinator) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("coordinator: Run called twice")
	}
	defer c.releases.Wait() // slots given back off the handlers' path, after them and the local nodes
	defer c.localWG.Wait()  // local nodes end with ctx, after the handlers
	ctx, cancel := context.WithCancel(ctx)
	held := newInflight(ctx, c, c.opts.shards)
	defer held.wait()
	var alive sync.WaitGroup
	alive.Go(func() { held.keepAlive(c.opts.ackWait) })
	defer alive.Wait()
	defer cancel() // Run may return before ctx ends (a refusal)
	if _, err := retry(ctx, c.log, "setting up the timers stream", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, eventlog.EnsureTimers(ctx, c.store)
	}); err != nil {
		return nil // ctx ended
	}
	kv, err := retry(ctx, c.log, "opening the partition leases", func(ctx context.Context) (jetstream.KeyValue, error) {
		return c.leasesKV(ctx)
	})
	if err != nil {
		return nil // ctx ended
	}
	c.prepareReadModel(ctx)
	var mismatch error
	if _, err := retry(ctx, c.log, "checking the partition count", func(ctx context.Context) (struct{}, error) {
		err := c.checkPartitions(ctx, kv)
		if errors.Is(err, ErrPartitionCount) {
			mismatch = err
			return struct{}{}, nil
		}
		return struct{}{}, err
	}); err != nil {
		return nil // ctx ended
	}
	if mismatch != nil {
		return mismatch
	}
	c.openFlow(ctx)
	c.releaseLater.Store(true)
	var sweeper sync.WaitGroup
	sweeper.Go(func() { c.sweepFlow(ctx) })
	sweeper.Go(func() { c.sweepTimers(ctx) })
	defer sweeper.Wait() // it ends with ctx, which has ended when Run returns from below
	var consumers sync.WaitGroup
	c.leases(ctx, kv, func(pctx context.Context, p int) {
		consumers.Add(1)
		defer consumers.Done()
		c.consume(pctx, p, held)
	})
	consumers.Wait()
	return nil
}

// consume reads one partition's consumers (lanes.go) until pctx ends,
// handing their events to their runs' handlers (inflight.go), and relays
// its fired timers.
func (c *Coordinator) consume(pctx context.Context, p int, held *inflight) {
	var others sync.WaitGroup
	others.Go(func() { c.relayTimers(pctx, p) })
	others.Go(func() { c.consumeLane(pctx, p, startsLane, held) })
	defer others.Wait()
	c.consumeLane(pctx, p, progressLane, held)
}

// consumeLane reads partition p's consumer of lane l until pctx ends; it
// takes the consumer up again when its iterator fails.
func (c *Coordinator) consumeLane(pctx context.Context, p int, l lane, held *inflight) {
	log := c.log.With(logattr.Partition, p, logattr.Lane, l.String())
	key := laneKey{p: p, lane: l}
	defer held.setBound(key, 0)
	for pctx.Err() == nil {
		cons, err := retry(pctx, log, "setting up the partition's "+l.String()+" consumer", func(ctx context.Context) (jetstream.Consumer, error) {
			return c.laneConsumer(ctx, p, l)
		})
		if err != nil {
			return
		}
		info := cons.CachedInfo()
		iter, err := cons.Messages(partitionPull(info.Config.MaxAckPending)...)
		if err != nil {
			log.Warn("consuming a partition", logattr.Error, err)
			if !sleepCtx(pctx, time.Second) {
				return
			}
			continue
		}
		held.noteAckWait(info.Config.AckWait)
		held.setBound(key, info.Config.MaxAckPending)
		stopLag := c.observeLag(cons)
		stop := context.AfterFunc(pctx, iter.Drain)
		c.dispatch(pctx, p, iter, held, log)
		stop()
		stopLag()
	}
}

// partitionPull is how a partition's iterator pulls: batches of up to
// pullBatch events, no more than the consumer lets be pending (its
// max_ack_pending; see partitionAckPending), each pull request expiring
// after pullExpiry with the server's idle heartbeats at a fifth of it.
//
// The batch is large because the iterator asks again only when half of
// it has been taken: at 64 an event a burst left in the stream waited
// for one round trip per 32 events, however idle the shards (measured:
// thousands pending, some fifty delivered). A pull request the server no
// longer holds while the iterator counts it pending (seen under bursts:
// the consumer with nothing waiting, events pending and none delivered)
// is noticed when two heartbeats are missed, and pulled again; with the
// default expiry (30 s) that was a 30 s stall of the partition.
func partitionPull(maxAckPending int) []jetstream.PullMessagesOpt {
	batch := pullBatch
	if maxAckPending > 0 {
		batch = min(batch, maxAckPending)
	}
	return []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessages(max(batch, 1)),
		jetstream.PullExpiry(pullExpiry),
		jetstream.PullHeartbeat(pullExpiry / 5),
		jetstream.WithMessagesErrOnMissingHeartbeat(false),
	}
}

const (
	pullBatch  = 1024
	pullExpiry = 5 * time.Second
)

// dispatch hands each message of a partition to its run's handler.
//
// Two guards keep a coordinator that lost its partition without knowing
// it (a pause longer than the lease) from deciding on a stale cache: an
// event is handed back, not handled, while the lease was last renewed
// longer ago than its duration; and a gap in the consumer's delivery
// sequence (events went to another holder meanwhile) drops the cached
// runs of the partition, which are then read afresh.
//
// (Long by its guards, one per way a delivery is handed back, passed over
// or pushed, in the order they apply; split, the order would not read.)
func (c *Coordinator) dispatch(pctx context.Context, p int, iter jetstream.MessagesContext, held *inflight, log *slog.Logger) {
	var lastDelivery uint64
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || pctx.Err() != nil {
				return
			}
			log.Warn("consuming a partition", logattr.Error, err)
			continue
		}
		if pctx.Err() != nil {
			_ = msg.Nak() // the partition was given up: for its next holder
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			c.n.malformed.Add(1)
			_ = msg.Term()
			continue
		}
		if !c.parts.current(p, c.opts.leaseTTL) {
			// The lease may have passed to another: not ours to handle.
			c.n.handedBack.Add(1)
			_ = msg.NakWithDelay(shardFullDelay)
			continue
		}
		if lastDelivery != 0 && meta.Sequence.Consumer != lastDelivery+1 {
			c.forgetPartition(p)
		}
		lastDelivery = meta.Sequence.Consumer
		run, ok := eventlog.RunOf(msg.Subject())
		if !ok {
			c.n.malformed.Add(1)
			log.Warn("passing over a message on an unexpected subject", logattr.Subject, msg.Subject(), logattr.Seq, meta.Sequence.Stream)
			_ = msg.Term()
			continue
		}
		if !held.push(run, delivery{msg: msg, partition: p, redelivered: meta.NumDelivered > 1}) {
			if c.ownEchoWhenFull(msg) {
				continue
			}
			// The coordinator holds as many events as it may: this one
			// comes again shortly, and the run is read afresh then (its
			// later events may go first; a fresh read puts them in order).
			c.n.handedBack.Add(1)
			c.cache.del(run)
			_ = msg.NakWithDelay(shardFullDelay)
		}
	}
}

// retry calls fn, each try bounded, until it succeeds or ctx ends, as
// setup.Retry does (capped back-off, each distinct error logged once).
func retry[T any](ctx context.Context, log *slog.Logger, what string, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := setup.Retry(ctx, log, what, nil, func(ctx context.Context) error {
		try, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		v, err = fn(try)
		return err
	})
	return v, err
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
