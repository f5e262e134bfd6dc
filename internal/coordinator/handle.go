package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// conflictRetries bounds how often one event re-reads its run after a
// stale decision before it is handed back for redelivery.
const conflictRetries = 5

// handle processes one message of the log and acknowledges it once its
// decisions are in. A message that fails for a passing reason is handed
// back for redelivery after a back-off; one that can never be decided
// fails its run (see fail). The steps, in the order a message goes
// through them: the restored and echo checks, decode, process, settle.
func (c *Coordinator) handle(ctx context.Context, msg jetstream.Msg, redelivered bool) {
	meta, err := msg.Metadata()
	if err != nil {
		c.n.malformed.Add(1)
		_ = msg.Term()
		return
	}
	c.n.processed.Add(1)
	if c.settleRestored(ctx, msg, meta) {
		return
	}
	if c.holdLocal(msg) {
		return // acknowledged once its local node's outcome is in
	}
	if c.passEcho(msg, meta, redelivered) {
		return
	}
	e := c.decode(msg, meta)
	if c.keyMissing(ctx, msg, meta, e) {
		return
	}
	ctx, span := c.startProcess(ctx, msg.Subject(), e, meta.NumDelivered)
	defer span.End()
	switch err := c.process(ctx, e, redelivered); {
	case err == nil:
		c.settleDone(ctx, msg, e)
	case ctx.Err() != nil:
		// Shutting down: left for the next coordinator.
	default:
		telemetry.Fail(span, err)
		c.undecided(ctx, msg, meta, e, err)
	}
}

// settleRestored settles a message put back from an archive
// (readmodel.Restore): history of a run that ended, nothing to decide; but
// only if the read model says the admin restored the run, since any
// writer can set a header. It reports whether it settled msg.
func (c *Coordinator) settleRestored(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
	if msg.Headers().Get(eventlog.HdrRestored) == "" {
		return false
	}
	restored, err := c.restoredRun(ctx, msg.Subject())
	if err != nil {
		c.n.errors.Add(1)
		c.log.WarnContext(ctx, "checking whether a run was restored; the event will be handled again", logattr.Subject, msg.Subject(), logattr.Error, err)
		_ = msg.NakWithDelay(c.backoff(meta.NumDelivered))
		return true
	}
	if restored {
		_ = msg.Ack()
	}
	return restored
}

// passEcho acknowledges msg if it is the echo of a decision this
// coordinator appended and applied already (ownEcho), and reports whether
// it did. A redelivered message that is not an echo of this
// coordinator's has its run read afresh: the run may have moved on since
// its first delivery. (Not an echo handed back by a full shard: the
// cache has it.)
func (c *Coordinator) passEcho(msg jetstream.Msg, meta *jetstream.MsgMetadata, redelivered bool) bool {
	if _, echo := c.echoes.Load(msg.Headers().Get(nats.MsgIdHdr)); redelivered && !echo {
		if run, ok := eventlog.RunOf(msg.Subject()); ok {
			c.cache.del(run)
		}
		return false
	}
	if c.ownEcho(msg, meta) {
		_ = msg.Ack()
		return true
	}
	return false
}

// decode decodes msg's event. A message the engine does not accept keeps
// its place in its run: passed over by the fold, and counted by the
// concurrency check if it is on the run's decision subjects.
func (c *Coordinator) decode(msg jetstream.Msg, meta *jetstream.MsgMetadata) *events.Event {
	e := events.DecodeStored(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
	if e.Refused != nil && !errors.Is(e.Refused, events.ErrKeyMissing) {
		c.n.malformed.Add(1)
		c.log.Warn("passing over a message the engine does not accept", logattr.RunID, e.RunID, logattr.Subject, msg.Subject(), logattr.Seq, meta.Sequence.Stream, logattr.Error, e.Refused)
	}
	return e
}

// keyMissing settles msg when its data is sealed with a key this
// coordinator does not hold, and reports whether it did. Such an event
// is not malformed, and not to be passed over: the run would be decided
// without it (its start, an outcome, a signal). It is handed back, unread
// and unchanged, for a coordinator that holds the key (a deployment whose
// coordinators lack a key its writers use is misconfigured: the error
// names the key id), with the back-off of any event that cannot be
// decided; after WithRedelivery's tries the run fails with that error (undecided),
// so that no run waits for ever on a key that never comes (or on an
// event a writer sealed under a key id of its own making).
func (c *Coordinator) keyMissing(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, e *events.Event) bool {
	if !errors.Is(e.Refused, events.ErrKeyMissing) {
		return false
	}
	c.log.ErrorContext(ctx, "an event sealed with a key this coordinator does not hold", logattr.Subject, msg.Subject(), logattr.Seq, meta.Sequence.Stream, logattr.Delivery, meta.NumDelivered, logattr.Error, e.Refused)
	c.undecided(ctx, msg, meta, e, e.Refused)
	return true
}

// settleDone settles a message whose event was processed: acknowledged,
// unless its local node runs (held, acknowledged once its outcome is in)
// or is ready and did not start.
func (c *Coordinator) settleDone(ctx context.Context, msg jetstream.Msg, e *events.Event) {
	switch {
	case c.holdLocal(msg):
	case c.localUnrun(msg):
		// Its local node is ready and did not start (given up as the
		// coordinator stops): acknowledged, nothing would run it again;
		// handed back, it comes to the partition's holder.
		c.n.handedBack.Add(1)
		if ctx.Err() != nil {
			_ = msg.Nak()
		} else {
			_ = msg.NakWithDelay(shardFullDelay)
		}
	default:
		c.echoes.Delete(e.ID) // an echo of this coordinator's, if it was one
		_ = msg.Ack()
	}
}

// undecided settles a message whose event could not be decided: its run
// fails when it never can be (and the message is acknowledged), else the
// message is handed back after a back-off.
func (c *Coordinator) undecided(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, e *events.Event, err error) {
	if permanent(err) || int(meta.NumDelivered) >= c.opts.maxDeliveries && !transient(err) {
		if ferr := c.fail(ctx, e, err); ferr != nil {
			c.n.errors.Add(1)
			c.log.WarnContext(ctx, "failing a run that cannot be decided; the event will be handled again", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.Error, ferr)
			_ = msg.NakWithDelay(c.backoff(meta.NumDelivered))
			return
		}
		_ = msg.Ack()
		return
	}
	c.n.errors.Add(1)
	c.log.WarnContext(ctx, "deciding failed; the event will be handled again", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type, logattr.Delivery, meta.NumDelivered, logattr.Error, err)
	_ = msg.NakWithDelay(c.backoff(meta.NumDelivered))
}

// ownEcho reports whether msg is a decision this coordinator appended and
// already applied, coming back through the consumer: it is passed over
// without decoding.
func (c *Coordinator) ownEcho(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
	run, ok := eventlog.RunOf(msg.Subject())
	if !ok || meta == nil {
		return false
	}
	ent := c.cache.get(run)
	if ent == nil || meta.Sequence.Stream <= ent.prefix {
		return false
	}
	id := msg.Headers().Get(nats.MsgIdHdr)
	if _, mine := ent.own[id]; !mine {
		return false
	}
	if ent.localWaiting(id, msg.Subject()) {
		return false // its local node is left to run (local.go)
	}
	delete(ent.own, id)
	c.echoes.Delete(id)
	ent.prefix = meta.Sequence.Stream
	if ent.state.ContinuedAs != "" && len(ent.own) == 0 {
		// A run that continued as new has nothing left to decide (its
		// end was settled before its echo came): its entry goes, so
		// that the links of a long chain do not fill the cache. A late
		// event of it folds it from the log again.
		c.cache.del(run)
	}
	return true
}

// process applies one event to its run and decides. An event the run's
// state already has changes nothing, and so needs no decision. Decisions
// refused for a concurrent one (events.ErrConflict) are made again from
// the run read afresh, up to conflictRetries times.
func (c *Coordinator) process(ctx context.Context, e *events.Event, redelivered bool) error {
	if e.RunID == "" {
		return nil // not a run's: nothing to decide
	}
	for try := 0; ; try++ {
		// After a conflict the run is read from the log, even for its
		// start's first delivery: a start handled after a later event
		// of its run (lanes.go) may find its run decided (and indexed).
		reread := redelivered || try > 0
		ent, fresh, err := c.fold(ctx, e, reread)
		if err != nil || ent == nil {
			return err
		}
		if failed, err := c.enforceBudget(ctx, ent); failed { // budget.go
			return err
		}
		if fresh {
			// Folded from the log: are the child runs it waits for its
			// own (children.go)?
			if err := c.checkChildren(ctx, ent); err != nil {
				c.cache.del(e.RunID)
				return err
			}
		}
		err = c.settle(ctx, ent, e.ID, fresh && e.Type == events.RunStarted && !reread)
		if err == nil {
			return nil
		}
		c.cache.del(e.RunID)
		if !errors.Is(err, events.ErrConflict) || try >= conflictRetries {
			return err
		}
		c.n.conflicts.Add(1)
		c.conflicted(ctx, e, try)
	}
}

// fold brings e's run up to e: its cached entry, or the run read from the
// log (entry), read again when the cache would apply e out of log order
// (refold), then e applied. It returns a nil entry when there is nothing
// to decide: e changed nothing (unless the run has local nodes to run),
// or its run does not exist.
func (c *Coordinator) fold(ctx context.Context, e *events.Event, redelivered bool) (*runEntry, bool, error) {
	ent, fresh, err := c.entry(ctx, e, redelivered)
	if err != nil {
		return nil, false, err
	}
	if !fresh && e.Seq > ent.prefix && e.Seq < ent.ownMax {
		if ent, fresh, err = c.refold(ctx, e, ent); err != nil {
			return nil, false, err
		}
	}
	if !c.apply(ent, e) && !fresh && (len(ent.local) == 0 || e.Type != events.NodeReady) {
		return nil, false, nil
	}
	if ent.state.Status == projection.RunPending {
		c.n.orphans.Add(1)
		c.cache.del(e.RunID)
		c.log.WarnContext(ctx, "passing over an event of a run that does not exist", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type)
		if ent.claim != nil {
			// Its start claims a parent from a client's subject
			// (children.go).
			return nil, false, c.claimedChild(ctx, e.RunID, ent.claim)
		}
		return nil, false, nil
	}
	return ent, fresh, nil
}

// refold folds ent's run afresh, in log order: e precedes in the log a
// decision the cache holds already (a worker's or a client's append landed
// while the decision was being made), so the cache would apply them in
// another order than the log.
func (c *Coordinator) refold(ctx context.Context, e *events.Event, ent *runEntry) (*runEntry, bool, error) {
	c.cache.del(e.RunID)
	c.n.reorders.Add(1)
	armed, dropped := ent.armed, ent.dropped
	ent, fresh, err := c.entry(ctx, e, true)
	if err != nil {
		return nil, false, err
	}
	// Its timers were armed from the log already: keep them as they are
	// (and their trace parents).
	ent.armed, ent.dropped = armed, dropped
	return ent, fresh, nil
}

// settle decides from the run's state and carries the decisions out:
// local nodes readied now, or before and not yet run (the run was folded
// afresh), run here (local.go); the timers the state says are pending are
// armed once their decisions are in the log (a fresh entry re-arms them
// all); the read model is updated (newRun: its first entry).
func (c *Coordinator) settle(ctx context.Context, ent *runEntry, handling string, newRun bool) error {
	if err := c.decide(ctx, ent); err != nil {
		return err
	}
	// Slots of attempts that ended given back, waiters let in (flow.go).
	if err := c.releaseSlots(ctx, ent); err != nil {
		return err
	}
	// Local nodes readied now, or before and not yet run (the run was
	// folded afresh), run here (local.go); handling is the event's id.
	if err := c.runLocal(ctx, ent, handling); err != nil {
		return err
	}
	if err := c.syncTimers(ctx, ent); err != nil {
		return err
	}
	return c.index(ctx, ent, newRun)
}

// entry returns the run's cached entry, folding the run from the log when
// it is not cached or may have missed events; fresh says it was folded now.
// A run-started delivered for the first time needs no read: it is the
// run's first event. A read must reach the event being handled: a replica
// that is behind is not asked for the state to decide from.
func (c *Coordinator) entry(ctx context.Context, e *events.Event, redelivered bool) (*runEntry, bool, error) {
	return c.readEntry(ctx, e, redelivered, false)
}

// readEntry is entry; lenient passes over the events sealed with a key
// this coordinator does not hold (as fail does, to end a run it cannot
// read), where entry stops at them.
func (c *Coordinator) readEntry(ctx context.Context, e *events.Event, redelivered, lenient bool) (*runEntry, bool, error) {
	run := e.RunID
	if ent := c.cache.get(run); ent != nil {
		return ent, false, nil
	}
	if e.Type == events.RunStarted && e.Refused == nil && !redelivered {
		ent := &runEntry{run: run, state: &projection.State{}, own: map[string]struct{}{}, unscheduled: true}
		c.cache.put(ent)
		return ent, true, nil
	}
	// Start from the run's latest checkpoint, if it has one (snapshot.go).
	state, from, lastDecision := c.fromSnapshot(ctx, run)
	// The history is walked in batches of bounded size, whatever its
	// length (eventlog.Each).
	c.n.reloads.Add(1)
	ent := &runEntry{run: run, state: state, own: map[string]struct{}{}, prefix: state.LastSeq, lastDecision: lastDecision}
	err := eventlog.Each(ctx, c.store, run, from, e.Seq, func(ev *events.Event) error {
		if !lenient && errors.Is(ev.Refused, events.ErrKeyMissing) {
			// Data this coordinator cannot read is not junk: deciding
			// without it would decide wrong (keyMissing).
			return fmt.Errorf("event %d: %w", ev.Seq, ev.Refused)
		}
		if err := ent.state.Apply(ev); err != nil && !errors.Is(err, projection.ErrStale) && !errors.Is(err, projection.ErrRefused) {
			c.n.rejected.Add(1)
		}
		ent.noteStart(ev)
		ent.noteTrace(ev)
		ent.noteLocal(ev)
		ent.noteGrant(ev)
		ent.prefix = ev.Seq
		if ev.IsDecision() {
			// Every message on the decision subjects counts, accepted or
			// not: the log's own order is the concurrency check.
			ent.lastDecision = ev.Seq
		}
		return nil
	})
	if err != nil && !errors.Is(err, events.ErrRunNotFound) {
		return nil, false, fmt.Errorf("reading run %s: %w", run, err)
	}
	c.cache.put(ent)
	return ent, true, nil
}

// apply folds an event delivered by the consumer into the entry, unless the
// entry has it already: read with the run, or decided here. It reports
// whether it applied the event.
func (c *Coordinator) apply(ent *runEntry, e *events.Event) bool {
	if e.Seq <= ent.prefix {
		return false
	}
	ent.prefix = e.Seq
	if _, mine := ent.own[e.ID]; mine && (e.IsDecision() || e.Queue == events.LocalQueue) {
		// Decided here, or a local node's outcome recorded here: applied
		// already.
		delete(ent.own, e.ID)
		c.echoes.Delete(e.ID)
		return false
	}
	if e.IsDecision() && e.Seq > ent.lastDecision {
		ent.lastDecision = e.Seq // another coordinator's
	}
	c.foldErr(e, ent.state.Apply(e))
	ent.noteTrace(e)
	ent.noteLocal(e)
	ent.noteGrant(e)
	return true
}

// graphFor compiles a run's graph from its run-started event, once per
// digest.
func (c *Coordinator) graphFor(s *projection.State) (*graph.Graph, error) {
	if g, ok := c.graphs.Load(s.GraphDigest); ok && s.GraphDigest != "" {
		return g.(*graph.Graph), nil
	}
	opts := []graph.Option{graph.AllowAnyType(), graph.WithConditionHint(ConditionHint), graph.WithLocalTypes(c.localTypes()...)}
	if c.opts.conditions != nil {
		opts = append(opts, graph.WithConditions(c.opts.conditions))
	}
	g, err := graph.Parse(s.Graph, "run "+s.RunID, opts...)
	if err != nil {
		return nil, err
	}
	c.graphs.Store(s.GraphDigest, g)
	return g, nil
}

// decide asks the engine what the run does next and writes it: child runs
// first, then the run's own decisions, appended in order, each conditioned
// on the one before (events.Store.Append), so a conflict or a crash leaves
// a prefix that deciding again from the folded state completes.
func (c *Coordinator) decide(ctx context.Context, ent *runEntry) error {
	return c.decideAfter(ctx, ent, nil)
}

// decideAfter is decide after outcomes of local nodes that are folded into
// the state but not yet in the log (stepLocal): they are written first,
// with the decisions in one step (eventlog.Engine.AppendStep), or on their
// own when nothing is decided, the run has ended, or a checkpoint is due
// (it reads the log up to them).
func (c *Coordinator) decideAfter(ctx context.Context, ent *runEntry, outs []*events.Event) error {
	s := ent.state
	if s.Status.Ended() {
		if err := c.appendOutcomes(ctx, ent, outs); err != nil {
			return err
		}
		return c.notifyParent(ctx, ent)
	}
	g, err := c.graphFor(s)
	if err != nil {
		if err := c.appendOutcomes(ctx, ent, outs); err != nil {
			return err
		}
		return c.failInvalidGraph(ctx, ent, err)
	}
	fo, flowErr := c.flowOptions(ctx, ent)
	fo.HistoryBudget = decider.HistoryBudget{Events: c.opts.maxEvents, Bytes: c.opts.maxBytes}
	d := decider.DecideWith(g, s, c.opts.now(), fo)
	if err := flowErr(); err != nil {
		return err // s is thrown away: the event comes again
	}
	if d.Empty() {
		return c.appendOutcomes(ctx, ent, outs)
	}
	return c.carryOut(ctx, g, ent, d, outs)
}

// carryOut writes a decision that is not empty, after the outcomes outs
// it was made from (decideAfter), and does what follows it.
func (c *Coordinator) carryOut(ctx context.Context, g *graph.Graph, ent *runEntry, d decider.Decision, outs []*events.Event) error {
	preempted, err := c.prepareDecisions(ctx, ent.run, d)
	if err != nil {
		return err
	}
	// Known before they are appended, as their echoes may come first (see
	// ownEchoWhenFull): a local node's work item as pending before it as
	// an echo. Only the decisions the partition consumers deliver come
	// back (eventlog.Consumed; lanes.go).
	for _, e := range d.Events {
		if ent.noteLocal(e) {
			c.localPending.Store(e.ID, struct{}{})
		}
		if echoed(e) {
			c.echoes.Store(e.ID, struct{}{})
		}
	}
	if len(outs) > 0 && c.js != nil && checkpointDue(g, d.Events) {
		// The checkpoint folds the log up to the outcomes: in it first.
		if err := c.appendOutcomes(ctx, ent, outs); err != nil {
			c.forgetDecided(d.Events)
			return err
		}
		outs = nil
	}
	cp := c.prepareCheckpoint(ctx, g, ent, d.Events)
	last, err := c.appendDecisions(ctx, g, ent, outs, d.Events)
	if err != nil {
		c.forgetDecided(d.Events)
		return err
	}
	c.n.decisions.Add(int64(len(d.Events)))
	ent.noteOwn(d.Events, last)
	cp.store(ctx, c, last)
	if ent.state.ContinuedAs != "" && len(ent.own) == 0 {
		// Continued as new, with no echo to wait for: nothing is left to
		// decide (see ownEcho).
		defer c.cache.del(ent.run)
	}
	// Child runs whose ids held another writer's events fail their nodes
	// now that the nodes wait (children.go).
	if err := c.tellPreempted(ctx, ent.run, preempted, false); err != nil {
		return err
	}
	return c.notifyParent(ctx, ent)
}

// forgetDecided drops what carryOut noted of decisions that did not go in.
func (c *Coordinator) forgetDecided(evs []*events.Event) {
	for _, e := range evs {
		c.echoes.Delete(e.ID)
		c.localPending.Delete(e.ID)
	}
}

// prepareDecisions does what a run's decisions need before they are
// appended: its child runs started (it returns those that were pre-empted:
// children.go), the children of an ended run asked to cancel, and the
// queues of its work items made.
func (c *Coordinator) prepareDecisions(ctx context.Context, run string, d decider.Decision) ([]decider.WaitingChild, error) {
	if err := c.startContinuation(ctx, run, d.Continue); err != nil { // continue.go
		return nil, err
	}
	preempted, err := c.startChildren(ctx, run, d.Children)
	if err != nil {
		return nil, err
	}
	for _, child := range d.CancelChildren {
		if err := c.requestCancel(ctx, child, "run "+run, "parent run ended"); err != nil {
			return nil, err
		}
	}
	for _, e := range d.Events {
		if e.Type == events.NodeReady {
			if err := c.ensureQueue(ctx, e); err != nil {
				return nil, err
			}
		}
	}
	return preempted, nil
}

// noteOwn records decisions appended here, the last at seq last, so that
// their echoes are known.
func (ent *runEntry) noteOwn(decided []*events.Event, last uint64) {
	ent.lastDecision, ent.ownMax = last, last
	if len(ent.own) > maxOwn {
		// Echoes taken by a full shard's dispatcher never came here.
		clear(ent.own)
	}
	for _, e := range decided {
		if echoed(e) {
			ent.own[e.ID] = struct{}{}
		}
	}
}

// echoed reports whether a decision comes back through the partition
// consumers: a run's start or a local node's work item. The others are
// not delivered to the coordinator that made them (lanes.go).
func echoed(e *events.Event) bool { return eventlog.Consumed(e.Subject()) }

// notifyParent tells the parent of an ended child run how it ended.
func (c *Coordinator) notifyParent(ctx context.Context, ent *runEntry) error {
	if ent.notified {
		return nil
	}
	notice := decider.ParentNotice(ent.state)
	if notice == nil {
		return nil
	}
	telemetry.Inject(ctx, notice)
	if _, err := c.store.Append(ctx, notice.RunID, events.AnySeq, notice); err != nil {
		return fmt.Errorf("telling parent run %s: %w", notice.RunID, err)
	}
	ent.notified = true
	return nil
}

func (c *Coordinator) requestCancel(ctx context.Context, run, by, reason string) error {
	e, err := events.New(run, eventlog.DecisionID(run, events.RunCancelRequested), c.opts.now(), &events.RunCancelRequestedData{By: by, Reason: reason})
	if err != nil {
		return err
	}
	telemetry.Inject(ctx, e)
	if _, err := c.store.Append(ctx, run, events.AnySeq, e); err != nil {
		return fmt.Errorf("cancelling run %s: %w", run, err)
	}
	return nil
}

// failInvalidGraph fails a run whose recorded graph does not compile.
func (c *Coordinator) failInvalidGraph(ctx context.Context, ent *runEntry, gerr error) error {
	e, err := events.New(ent.run, eventlog.DecisionID(ent.run, events.RunFailed), c.opts.now(),
		&events.RunFailedData{Error: events.Failure{Type: events.FailureInvalidGraph, Message: gerr.Error()}})
	if err != nil {
		return err
	}
	eventlog.MarkDecision(e)
	telemetry.Inject(ctx, e)
	if _, err := c.store.AppendDecisions(ctx, ent.run, ent.lastDecision, e); err != nil {
		return err
	}
	c.noticeEnd(ent.run, e)
	c.cache.del(ent.run)
	return nil
}

// ensureQueue makes sure the task queue's consumer exists before the first
// work is published to it, so no work is published to nobody.
func (c *Coordinator) ensureQueue(ctx context.Context, e *events.Event) error {
	p, _ := e.Payload()
	q := p.(*events.NodeReadyData).Queue
	if q == events.LocalQueue {
		return nil // run here (local.go): no queue
	}
	if _, ok := c.queues.Load(q); ok || c.js == nil {
		return nil
	}
	if _, err := workqueue.EnsureQueue(ctx, c.js, c.store.StreamName(), q, workqueue.QueueOptions{}); err != nil {
		return fmt.Errorf("setting up queue %q: %w", q, err)
	}
	c.queues.Store(q, struct{}{})
	return nil
}

// foldErr counts and logs what the fold said of an event delivered to it:
// a stale outcome or decision (a late outcome, a decision
// made before) is usual under faults and logged at info; a refused message
// was logged when it came; anything else the fold cannot apply is a
// warning.
func (c *Coordinator) foldErr(e *events.Event, err error) {
	switch {
	case err == nil, errors.Is(err, projection.ErrRefused):
	case errors.Is(err, projection.ErrStale):
		c.n.stale.Add(1)
		c.log.Info("passing over a stale event", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type, logattr.NodeID, e.NodeID, logattr.Error, err)
	default:
		c.n.rejected.Add(1)
		c.log.Warn("passing over an event the fold cannot apply", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type, logattr.Error, err)
	}
}
