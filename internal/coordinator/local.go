package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Local nodes: pure, cheap nodes the coordinator that owns the run runs
// itself, with no queue hop (see the package doc, "Local nodes").

// WithLocalNode registers node as the local executor of node type typ:
// nodes of that type run inside the coordinator (unless a graph forces
// them onto a queue, see graphrt.Evaluator.IsLocal), through the same contract
// as on a worker (pkg/worker). The built-in transform is local by default;
// WithLocalNode("transform", nil) makes it a worker's again. A local node
// must be deterministic and idempotent and must honour its context: it
// may run again after a coordinator dies. Every coordinator of a
// deployment must register the same local types. Router, human and
// subgraph are the coordinator's own types and cannot be registered.
func WithLocalNode(typ string, node worker.Node) Option {
	return func(o *options) {
		if typ == graph.TypeRouter || typ == graph.TypeHuman || typ == graph.TypeSubgraph || typ == graph.TypeWait || typ == "" {
			return
		}
		if o.local == nil {
			o.local = map[string]worker.Node{}
		}
		if node == nil {
			delete(o.local, typ)
			return
		}
		o.local[typ] = node
	}
}

// WithLocalTimeout sets the timeout of a local node that sets none
// (default DefaultLocalTimeout).
func WithLocalTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.localTimeout = d
		}
	}
}

// DefaultLocalTimeout bounds a local node whose graph sets no timeout: a
// local node runs in the coordinator, so it is never unbounded.
const DefaultLocalTimeout = 10 * time.Second

// localInlineBudget is how long one handled event may spend running local
// nodes on its shard. A local node still running when the budget is spent
// goes on off the shard (detached) and records its outcome itself, which
// comes back through the partition consumer like a worker's.
const localInlineBudget = 50 * time.Millisecond

// localInlineSteps is how many rounds of local nodes one handled event
// runs (within localInlineBudget). Each round appends an outcome and a
// decision whose echoes are held for the run meanwhile: 32 at most, far
// under what a partition's consumer delivers unacknowledged
// (partitionAckPending), and a coordinator that holds as many events as
// it may takes its own echoes itself (ownEchoWhenFull). Local nodes left
// over run when the echo of their node-ready comes (see handle), which
// costs that step a consumer hop: with 3 rounds, a third of a chain's
// steps waited for one (bench -only local: p50 0.33 ms against 0.29 ms
// with 16, six runs each, alternated).
const localInlineSteps = 16

// localWorker names the coordinator as the worker of a local node's
// outcome.
const localWorker = "coordinator"

// defaultLocal are the built-in local executors.
func defaultLocal() map[string]worker.Node {
	return map[string]worker.Node{builtin.TypeTransform: builtin.Transform{}}
}

// localTypes lists the registered local types, sorted.
func (c *Coordinator) localTypes() []string {
	out := make([]string, 0, len(c.opts.local))
	for t := range c.opts.local {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// localItem is a local node's work item as decided, waiting to be run.
type localItem struct {
	id    string // the node-ready event's id: its echo's Nats-Msg-Id
	ready *events.NodeReadyData
	ev    *events.Event // the node-ready event: its trace context
}

func attemptKey(ref events.NodeRef, attempt int) string {
	return ref.Key() + "#" + strconv.Itoa(attempt)
}

// noteLocal remembers the work item of a local node from its node-ready
// event: decided here, delivered by the consumer, or read with the run.
// It reports whether e was one.
func (ent *runEntry) noteLocal(e *events.Event) bool {
	if e.Type != events.NodeReady || e.Refused != nil || (e.Queue != "" && e.Queue != events.LocalQueue) {
		return false
	}
	p, err := e.Payload()
	if err != nil {
		return false
	}
	r, ok := p.(*events.NodeReadyData)
	if !ok || r.Queue != events.LocalQueue {
		return false
	}
	if ent.local == nil {
		ent.local = map[string]*localItem{}
	}
	ent.local[attemptKey(r.NodeRef, r.Attempt)] = &localItem{id: e.ID, ready: r, ev: e}
	return true
}

// maxOwn bounds runEntry.own: ids whose echoes a full shard's dispatcher
// took (ownEchoWhenFull) are never deleted from it.
const maxOwn = 4096

// ownEchoWhenFull takes, for a shard that is full, the echo of an event
// this coordinator appended, rather than hand it back: handing back drops
// the run's cache, and a chain of local nodes appends faster than its
// shard takes the echoes, which would read the run afresh again and again.
// The echo of a local node's work item is acknowledged only once the
// node's outcome is in the log: it is held while the node runs detached,
// and handed back while the node waits to be started (its echo starts
// it) or its outcome is not yet appended. It reports whether it took msg.
//
// The order of the look-ups matters: the shard records a work item as
// pending before it records its echo, as running before it is no longer
// pending, and no longer pending only once it runs detached or its
// outcome is appended; so an echo known here was pending, and one no
// longer pending is seen running, if it is, or has its outcome in.
func (c *Coordinator) ownEchoWhenFull(msg jetstream.Msg) bool {
	id := msg.Headers().Get(nats.MsgIdHdr)
	if _, mine := c.echoes.Load(id); !mine {
		return false
	}
	if strings.HasSuffix(msg.Subject(), localReadySuffix) {
		if _, pending := c.localPending.Load(id); pending {
			// Handed back, its run's cache kept: the work item is
			// this coordinator's decision, in the cache already, so
			// the run's later events may go first.
			c.n.handedBack.Add(1)
			_ = msg.NakWithDelay(shardFullDelay)
			return true
		}
		if c.holdLocal(msg) {
			return true
		}
		if v, ok := c.inflight.Load(id); ok && !v.(*localRun).recordedAt() {
			// Given up with its outcome not in: the shard runs it
			// again when the echo comes back (localDue).
			c.n.handedBack.Add(1)
			_ = msg.NakWithDelay(shardFullDelay)
			return true
		}
	}
	c.echoes.Delete(id)
	_ = msg.Ack()
	return true
}

// localWaiting reports whether id, on subject, is the node-ready of a
// local node that is ready and was left to run when its echo comes.
func (ent *runEntry) localWaiting(id, subject string) bool {
	if len(ent.local) == 0 || !strings.HasSuffix(subject, localReadySuffix) {
		return false
	}
	for _, li := range ent.local {
		if li.id == id {
			return localLive(ent.state, li.ready)
		}
	}
	return false
}

// localUnrun reports whether msg is the echo of a local node's work item
// that is pending here (decided, or started and given up) and neither
// running nor recorded, and whose attempt is live in its run's cached
// state: acknowledged, it would leave the node ready with nothing to start
// it. A run no longer cached (its partition was given up, or a full shard
// dropped it) cannot say: its echo is handed back, and folds the run
// afresh when it comes again.
func (c *Coordinator) localUnrun(msg jetstream.Msg) bool {
	if !strings.HasSuffix(msg.Subject(), localReadySuffix) {
		return false
	}
	id := msg.Headers().Get(nats.MsgIdHdr)
	if _, pending := c.localPending.Load(id); !pending {
		return false
	}
	if v, ok := c.inflight.Load(id); ok && !v.(*localRun).givenUp() {
		return false // held, or its outcome is in
	}
	run, ok := eventlog.RunOf(msg.Subject())
	if !ok {
		return false
	}
	ent := c.cache.get(run)
	if ent == nil {
		return true
	}
	return !ent.state.Status.Ended() && ent.localWaiting(id, msg.Subject())
}

// localLive reports whether the local attempt r is ready in s: not yet run
// to an outcome, superseded or timed out.
func localLive(s *projection.State, r *events.NodeReadyData) bool {
	ns := s.Nodes[r.Node]
	if ns == nil || ns.Iteration != r.Iteration {
		return false
	}
	if r.Item != nil {
		if *r.Item < 0 || *r.Item >= len(ns.Items) {
			return false
		}
		it := ns.Items[*r.Item]
		return it.LocalAttempt && it.Status == projection.NodeReady && it.Attempt == r.Attempt && it.TimedOut == ""
	}
	return ns.LocalAttempt && ns.Status == projection.NodeReady && ns.Attempt == r.Attempt && ns.TimedOut == ""
}

// localDue lists the run's local attempts that are ready and not running
// here already, in key order. A ready local attempt whose work item is
// not known (the run was folded from a snapshot taken after it was
// readied) is looked up in the run's log.
func (c *Coordinator) localDue(ctx context.Context, ent *runEntry) ([]*localItem, error) {
	s := ent.state
	var due []*localItem
	for key, li := range ent.local {
		if !localLive(s, li.ready) {
			delete(ent.local, key)
			c.localPending.Delete(li.id)
			c.inflight.Delete(li.id) // a detached run's outcome is folded
			continue
		}
		if v, running := c.inflight.Load(li.id); running {
			switch lr := v.(*localRun); {
			case lr.givenUp():
				// Run again; it stays in inflight until startLocal
				// replaces it, so that its echo is not taken as done.
			case !lr.recordedLongAgo():
				continue
			default:
				c.inflight.Delete(li.id) // its outcome never came: run it again
			}
		}
		due = append(due, li)
	}
	if missing := c.localMissing(ent); missing && !ent.localScanned {
		ent.localScanned = true
		evs, err := c.store.Read(ctx, ent.run, 1, ent.prefix)
		if err != nil {
			return nil, fmt.Errorf("reading run %s for its local work items: %w", ent.run, err)
		}
		for _, e := range evs {
			ent.noteLocal(e)
		}
		return c.localDue(ctx, ent)
	}
	slices.SortFunc(due, func(a, b *localItem) int {
		return strings.Compare(attemptKey(a.ready.NodeRef, a.ready.Attempt), attemptKey(b.ready.NodeRef, b.ready.Attempt))
	})
	return due, nil
}

// localMissing reports whether the state has a ready local attempt whose
// work item the entry does not hold.
func (c *Coordinator) localMissing(ent *runEntry) bool {
	has := func(ref events.NodeRef, attempt int) bool {
		_, ok := ent.local[attemptKey(ref, attempt)]
		return ok
	}
	for id, ns := range ent.state.Nodes {
		if ns.LocalAttempt && ns.Status == projection.NodeReady && !has(events.NodeRef{Node: id, Iteration: ns.Iteration}, ns.Attempt) {
			return true
		}
		for i, it := range ns.Items {
			if it.LocalAttempt && it.Status == projection.NodeReady && !has(events.NodeRef{Node: id, Iteration: ns.Iteration, Item: &i}, it.Attempt) {
				return true
			}
		}
	}
	return false
}

// runLocal runs the run's due local nodes after its decisions are in, and
// decides after their outcomes, until none is due: a chain of local nodes
// runs in one handled event, for up to localInlineSteps rounds. Each node
// runs within what is left of localInlineBudget; one that takes longer is
// detached (it finishes off the shard and records its outcome itself). An
// outcome is appended, then applied to the cached state like the
// coordinator's own decisions. Nodes not started (the budget or the
// rounds ran out) start when the echo of their node-ready is handled:
// handling is the id of the event being handled, and the node whose
// echo it is starts even when the budget is spent (detached at once), as
// that echo is acknowledged once its handling is done and nothing else
// would start the node.
//
// (Its complexity is the rounds' bounds: steps, time budget, detaching;
// the work is in localDue, startLocal, stepLocal and decideAfter.)
func (c *Coordinator) runLocal(ctx context.Context, ent *runEntry, handling string) error {
	if !c.mayRunLocal(ent) {
		return nil
	}
	g, err := c.graphFor(ent.state)
	if err != nil {
		return nil // decide failed the run
	}
	deadline := time.Now().Add(c.opts.localBudget)
	for round := 0; round < localInlineSteps && !ent.state.Status.Ended(); round++ {
		due, err := c.localDue(ctx, ent)
		if err != nil || len(due) == 0 {
			return err
		}
		var done []*localRun // stays on the stack: a round runs few nodes
		for _, li := range due {
			wait := time.Until(deadline)
			if wait <= 0 && li.id != handling {
				continue // runs when its node-ready's echo comes
			}
			if lr := c.startLocal(ctx, g, ent, li, max(wait, 0)); lr != nil {
				done = append(done, lr)
			}
		}
		if len(done) == 0 {
			return nil // all detached, given up or left for their echoes
		}
		if err := c.stepLocal(ctx, ent, done); err != nil {
			return err
		}
		// What the outcomes ended (an attempt, the run) gives its slots
		// back now: the decisions' echoes are not settled again.
		if err := c.releaseSlots(ctx, ent); err != nil {
			return err
		}
	}
	return nil
}

// mayRunLocal reports whether the run may have local nodes to run here:
// this coordinator runs some node types, and the entry holds work items
// of local nodes or its state has a ready local attempt it does not hold.
func (c *Coordinator) mayRunLocal(ent *runEntry) bool {
	return len(c.opts.local) > 0 && (len(ent.local) > 0 || c.localMissing(ent))
}

// stepLocal records the outcomes of one round of local nodes and decides
// after them, in one write where it can (decideAfter,
// eventlog.Engine.AppendStep): the outcomes are folded into the cached
// state first, as the coordinator's own decisions are before they are in
// the log, and written together with the decisions they lead to, before
// them. The events in the log are those of an outcome appended then
// decided from, in the same order. If the write fails, the entry is
// dropped (process reads the run again), as after any decision that
// fails: an outcome not in the log runs again, one in it is folded.
func (c *Coordinator) stepLocal(ctx context.Context, ent *runEntry, done []*localRun) error {
	outs := make([]*events.Event, len(done))
	for i, lr := range done {
		outs[i] = lr.out
		c.echoes.Store(lr.out.ID, struct{}{}) // before: its echo may come first
		c.foldErr(lr.out, ent.state.Apply(lr.out))
		ent.noteTrace(lr.out)
	}
	if err := c.decideAfter(ctx, ent, outs); err != nil {
		for _, lr := range done {
			c.echoes.Delete(lr.out.ID)
			// Still pending: an echo of its work item is handed back,
			// not taken as done.
			c.inflight.Delete(lr.id)
		}
		return err
	}
	for _, lr := range done {
		// In the log: its work item's echo may be acknowledged
		// (ownEchoWhenFull); no longer pending before no longer
		// running.
		lr.mu.Lock()
		lr.recorded = time.Now()
		lr.mu.Unlock()
		c.localPending.Delete(lr.id)
		c.inflight.Delete(lr.id)
		ent.own[lr.out.ID] = struct{}{}
		c.n.localRuns.Add(1)
	}
	return nil
}

// appendOutcomes appends the outcomes of local nodes, folded already, on
// their own: nothing is decided after them (or a checkpoint is, which
// reads them from the log).
func (c *Coordinator) appendOutcomes(ctx context.Context, ent *runEntry, outs []*events.Event) error {
	for _, out := range outs {
		seq, err := c.store.Append(ctx, ent.run, events.AnySeq, out)
		if err != nil {
			return fmt.Errorf("recording the outcome of local node %s: %w", out.NodeID, err)
		}
		out.Seq = seq
		ent.ownMax = max(ent.ownMax, seq)
	}
	return nil
}

// localRun is one execution of a local node, keyed in Coordinator.inflight
// by its work item's event id while it runs.
type localRun struct {
	id   string // the work item's event id
	done chan struct{}
	out  *events.Event
	err  error

	mu       sync.Mutex
	detached bool            // the shard stopped waiting: the run records its outcome
	finished bool            // the detached run recorded its outcome, or gave up
	recorded time.Time       // when the run's outcome was appended
	held     []jetstream.Msg // echoes of the work item, acknowledged once the outcome is in
}

// recordedTTL is how long a detached run whose outcome is in the log keeps
// its place in Coordinator.inflight, so that the node is not run again
// before the outcome is folded; past it, the outcome is taken as lost.
const recordedTTL = time.Minute

// recordedAt reports whether the run's outcome is in the log.
func (lr *localRun) recordedAt() bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return !lr.recorded.IsZero()
}

// givenUp reports whether the run was detached and ended without its
// outcome in the log (its node is to run again).
func (lr *localRun) givenUp() bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.finished && lr.recorded.IsZero()
}

func (lr *localRun) recordedLongAgo() bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return !lr.recorded.IsZero() && time.Since(lr.recorded) > recordedTTL
}

// sweepInflight drops detached runs whose outcomes were recorded long ago
// (their runs left the cache before the outcome was folded).
// A run given up stays until its node runs again (localDue): its run
// comes back to the shard with its echo, handed back by finishDetached.
func (c *Coordinator) sweepInflight() {
	c.inflight.Range(func(k, v any) bool {
		if v.(*localRun).recordedLongAgo() {
			c.inflight.Delete(k)
		}
		return true
	})
}

// startLocal runs a local node, waiting for it up to wait; it returns the
// run, whose outcome the caller records, or nil when the node was detached
// (or given up). A work item stays pending (localPending) until it runs
// detached or its outcome is in the log, so that the echo of one given up
// or not yet recorded is never acknowledged (ownEchoWhenFull).
func (c *Coordinator) startLocal(ctx context.Context, g *graph.Graph, ent *runEntry, li *localItem, wait time.Duration) *localRun {
	ready := *li.ready
	if n, ok := g.Node(ready.Node); ok {
		ready.Config, ready.InputSchema, ready.OutputSchema = n.Config, n.InputSchema, n.OutputSchema
	}
	ready.Invocation = ent.state.Invocation
	node := c.opts.local[ready.Type]
	lr := &localRun{id: li.id, done: make(chan struct{})}
	// Pending (again, if it ran before and was given up) before it is
	// running: it replaces the run given up, if any.
	c.localPending.Store(li.id, struct{}{})
	c.inflight.Store(li.id, lr)
	run := ent.run
	c.localWG.Go(func() {
		if node == nil {
			// The graph was compiled with this type local, so this cannot
			// be; fail the attempt rather than leave it ready.
			lr.out, lr.err = localFailure(run, &ready, c.opts.now(), fmt.Sprintf("no local executor for node type %q", ready.Type))
		} else {
			lr.out, lr.err = worker.InvokeLocal(ctx, node, run, &ready, li.ev, localWorker, c.opts.localTimeout, c.log)
			if lr.out != nil {
				// The coordinator writes the outcome: its clock (WithClock)
				// stamps it, as it does its decisions.
				lr.out.Time = c.opts.now().UTC()
			}
		}
		lr.mu.Lock()
		close(lr.done)
		detached := lr.detached
		lr.mu.Unlock()
		if detached {
			c.finishDetached(ctx, run, lr)
		}
	})
	if lr.waitOrDetach(wait) {
		c.n.localDetached.Add(1)
		c.localPending.Delete(li.id) // running: its echoes are held
		return nil
	}
	if lr.err != nil {
		c.inflight.Delete(li.id)
		return nil // given up: ctx ended; the next holder runs it again
	}
	return lr
}

// waitOrDetach waits up to wait for the local run to finish, and detaches
// it if it has not (its outcome is then recorded when it finishes,
// finishDetached); it reports whether it detached.
func (lr *localRun) waitOrDetach(wait time.Duration) bool {
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-lr.done:
		case <-t.C:
		}
		t.Stop()
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	select {
	case <-lr.done:
	default:
		lr.detached = true
	}
	return lr.detached
}

// finishDetached records the outcome of a local node the shard stopped
// waiting for, then acknowledges the echoes of its work item held
// meanwhile. If it cannot, the echoes are handed back: their redelivery
// folds the run afresh and runs the node again.
func (c *Coordinator) finishDetached(ctx context.Context, run string, lr *localRun) {
	var err error
	if lr.err == nil {
		_, err = c.store.Append(ctx, run, events.AnySeq, lr.out)
		if err == nil {
			c.n.localRuns.Add(1)
		}
	}
	lr.mu.Lock()
	held := lr.held
	lr.held, lr.finished = nil, true
	if lr.err == nil && err == nil {
		// Kept until the outcome is folded (localDue), so that a fold
		// of the run from before it does not run the node again.
		lr.recorded = time.Now()
	}
	// A run given up is kept too, until its node runs again (localDue):
	// an echo of its work item is then handed back, not taken as done.
	lr.mu.Unlock()
	if c.n.localDetached.Load()%256 == 0 {
		c.sweepInflight()
	}
	switch {
	case lr.err != nil || ctx.Err() != nil:
		// Given up (the coordinator stops): the echoes go back at once,
		// for the next holder of the partition to run the node.
		for _, m := range held {
			_ = m.Nak()
		}
	case err != nil:
		c.log.Warn("recording the outcome of a local node; it will run again", logattr.RunID, run, logattr.Error, err)
		for _, m := range held {
			_ = m.NakWithDelay(shardFullDelay)
		}
	default:
		for _, m := range held {
			_ = m.Ack()
		}
	}
}

// holdLocal keeps the echo of a local node's work item unacknowledged
// while the node runs detached: if the coordinator dies before the
// outcome is in, the echo is delivered to the next holder of the
// partition, which folds the run and runs the node again. It reports
// whether it took msg.
func (c *Coordinator) holdLocal(msg jetstream.Msg) bool {
	if !strings.HasSuffix(msg.Subject(), localReadySuffix) {
		return false
	}
	v, ok := c.inflight.Load(msg.Headers().Get(nats.MsgIdHdr))
	if !ok {
		return false
	}
	lr := v.(*localRun)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.finished {
		return false
	}
	select {
	case <-lr.done:
		if !lr.detached {
			return false
		}
	default:
	}
	if len(lr.held) == 0 {
		c.localWG.Go(func() { c.keepHeld(lr) })
	}
	lr.held = append(lr.held, msg)
	return true
}

// keepHeld marks held echoes in progress while their node runs, so that
// they are not redelivered meanwhile.
func (c *Coordinator) keepHeld(lr *localRun) {
	t := time.NewTicker(max(c.opts.ackWait/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-lr.done:
			return
		case <-t.C:
			lr.mu.Lock()
			for _, m := range lr.held {
				_ = m.InProgress()
			}
			lr.mu.Unlock()
		}
	}
}

var localReadySuffix = ".d.ready." + events.LocalQueue

// localFailure is a non-retryable failure of a local attempt, at at.
func localFailure(run string, r *events.NodeReadyData, at time.Time, msg string) (*events.Event, error) {
	e, err := events.New(run, eventlog.DecisionID(run, events.NodeFailed, r.Key(), strconv.Itoa(r.Attempt), "0"), at, &events.NodeFailedData{
		NodeRef: r.NodeRef, Attempt: r.Attempt, Worker: localWorker,
		Error: events.Failure{Type: "LocalExecutorMissing", Message: msg},
	})
	if err == nil {
		e.Queue = events.LocalQueue
	}
	return e, err
}
