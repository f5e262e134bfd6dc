package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Flow control (internal/flow has the design): the coordinator that owns a
// run takes its attempts' concurrency slots while it decides the run
// (admitter), gives them back once the fold says their attempts ended
// (releaseSlots), wakes the waiters a release lets in (wake), and sweeps
// the slots and waiters of its partitions' runs (sweepFlow).

// openFlow opens the flow bucket; without JetStream (the simulator) there
// is no flow control and every attempt is admitted.
func (c *Coordinator) openFlow(ctx context.Context) {
	if c.js == nil || c.flow != nil {
		return
	}
	l, err := retry(ctx, c.log, "opening the flow bucket", func(ctx context.Context) (*flow.Limiter, error) {
		return flow.Open(ctx, c.js, c.replicas(ctx), c.opts.now)
	})
	if err == nil {
		c.flow = l
	}
}

// flowOptions are the engine's Admit and Reserve over the flow bucket,
// and a function that gives the first error reaching the bucket: a
// decision made while the bucket could not answer is thrown away, and the
// event handled again.
func (c *Coordinator) flowOptions(ctx context.Context, ent *runEntry) (decider.Options, func() error) {
	if c.flow == nil {
		return decider.Options{}, func() error { return nil }
	}
	var first error
	reserve := func(r decider.ReserveRequest) decider.Reservation {
		if first != nil {
			return decider.Reservation{At: time.Unix(1<<40, 0)} // not now: the decision is thrown away
		}
		h := flow.Holder{Run: r.Run, Node: holderNode(r.Ref), Iteration: r.Ref.Iteration, Attempt: r.Attempt}
		take := c.flow.Reserve
		if r.Ref.Item != nil {
			take = c.reserveItem(r) // maprate.go
		}
		at, err := take(ctx, flow.RateSpec{Limit: r.Rate.Limit, Key: r.Rate.Key, Rate: r.Limit, Per: r.Per}, h, r.Rate.Units, r.Now)
		switch {
		case flow.Final(err):
			details, _ := json.Marshal(map[string]any{"limit": r.Rate.Limit, "key": r.Rate.Key})
			return decider.Reservation{Failure: &events.Failure{Type: events.FailureFlowLimit,
				Message: fmt.Sprintf("node %q: %v", r.Ref.Node, err), Details: details}}
		case err != nil:
			first = err
			return decider.Reservation{At: time.Unix(1<<40, 0)}
		}
		return decider.Reservation{At: at}
	}
	admit := func(r decider.AdmitRequest) decider.Admission {
		if first != nil {
			return decider.Admission{}
		}
		h := flow.Holder{Run: r.Run, Node: holderNode(r.Ref), Iteration: r.Ref.Iteration, Attempt: r.Attempt, Priority: r.Priority, Fairness: r.Fairness}
		if ent.takeGrant(h) {
			return decider.Admission{Granted: true} // handed over: see noteGrant
		}
		if r.Ref.Node == flow.RunNode {
			a, err := c.admitRun(ctx, r, h) // runlimit.go
			if err != nil {
				first = err
			}
			return a
		}
		g, err := c.flow.Acquire(ctx, slotOf(r.Slot), h)
		switch {
		case flow.Final(err):
			details, _ := json.Marshal(map[string]any{"limit": r.Slot.Limit, "key": r.Slot.Key, "max": r.Slot.Max})
			return decider.Admission{Failure: &events.Failure{Type: events.FailureFlowLimit,
				Message: fmt.Sprintf("node %q: %v", r.Ref.Node, err), Details: details}}
		case err != nil:
			first = err
			return decider.Admission{}
		}
		return decider.Admission{Granted: g.Granted}
	}
	return decider.Options{Admit: admit, Reserve: reserve}, func() error { return first }
}

func slotOf(s events.SlotRef) flow.Slot { return flow.Slot{Limit: s.Limit, Key: s.Key, Max: s.Max} }

// slotHolder is the attempt a node's slot is for: the attempt waiting for
// it, or the node's current attempt, which holds it.
func slotHolder(run, node string, ns *projection.NodeState) flow.Holder {
	a := ns.Attempt
	if ns.WaitingFor == "slot" {
		a++
	}
	return flow.Holder{Run: run, Node: node, Iteration: ns.Iteration, Attempt: a}
}

// slotLive reports whether, in state s, attempt h of its node still holds
// or waits for its slot.
func slotLive(s *projection.State, h flow.Holder) bool { return slotLife(s, h) != flow.Gone }

// slotLife is what state s says of attempt h's slot: it waits for it,
// holds it (readied or running), or neither.
func slotLife(s *projection.State, h flow.Holder) flow.Life {
	switch {
	case h.Node == flow.RunNode:
		return runSlotLife(s) // runlimit.go
	case s.Status.Ended():
		return flow.Gone
	}
	if node, item, ok := itemOf(h.Node); ok {
		return itemSlotLife(s, node, item, h) // mapslots.go
	}
	ns := s.Nodes[h.Node]
	if ns == nil || ns.Iteration != h.Iteration {
		return flow.Gone
	}
	switch ns.Status {
	case projection.NodeWaiting:
		if ns.WaitingFor == "slot" && ns.Attempt+1 == h.Attempt {
			return flow.Waits
		}
	case projection.NodeReady, projection.NodeRunning:
		if ns.Attempt == h.Attempt {
			return flow.Holds
		}
	}
	return flow.Gone
}

// releaseSlots gives back the slots (and places in line) of the run's
// attempts that ended, and wakes who they let in: off the handler's path
// when the coordinator runs (giveBackLater). What was given back is
// remembered in the entry only to spare the bucket a read; the bucket is
// the truth, and releasing twice changes nothing.
func (c *Coordinator) releaseSlots(ctx context.Context, ent *runEntry) error {
	if c.flow == nil {
		return nil
	}
	s := ent.state
	if err := c.releaseRunSlot(ctx, ent); err != nil { // runlimit.go
		return err
	}
	if err := c.releaseItemSlots(ctx, ent); err != nil { // mapslots.go
		return err
	}
	for id, ns := range s.Nodes {
		if err := c.backoffRate(ctx, ent, id, ns); err != nil {
			return err
		}
		if ns.Slot == nil || id == flow.RunNode {
			continue
		}
		h := slotHolder(s.RunID, id, ns)
		if slotLive(s, h) {
			continue
		}
		if _, done := ent.released[h.ID()]; done {
			continue
		}
		if c.releaseLater.Load() {
			c.giveBackLater(ctx, slotOf(*ns.Slot), h)
		} else if err := c.giveBack(ctx, slotOf(*ns.Slot), h); err != nil {
			return err // handled again: released again, woken again
		}
		if ent.released == nil {
			ent.released = map[string]struct{}{}
		}
		ent.released[h.ID()] = struct{}{}
	}
	return nil
}

// giveBack releases h's slot of s, which the same write hands over to
// the waiters first in line, and wakes them with their grant.
func (c *Coordinator) giveBack(ctx context.Context, s flow.Slot, h flow.Holder) error {
	handed, err := c.flow.Release(ctx, s, h)
	if err != nil {
		return err
	}
	for _, w := range handed {
		if err := c.wake(ctx, w, true); err != nil {
			return err
		}
	}
	return nil
}

// giveBackLater gives h's slot back off the handler's path: the handler
// goes on to its next event while the release joins the key's next batch
// (internal/flow, "The fast path"). Nothing waits on it for safety: until
// it is written the slot is held one attempt longer than needed, and one
// that is never written (the coordinator crashed, the bucket did not
// answer) is reclaimed by a sweep, as a release lost between folding an
// outcome and releasing always was. A give-back whose wakes failed is
// asked again (the release, asked again, returns the holders it handed
// slots to: flow.Limiter.Release) a few times, so a wake lost to a passing
// fault does not wait for a sweep. It finishes when the coordinator stops
// (Run waits for it), within releaseTimeout.
func (c *Coordinator) giveBackLater(ctx context.Context, s flow.Slot, h flow.Holder) {
	c.releases.Go(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := c.giveBackRetried(ctx, rctx, s, h); err != nil {
			c.log.Warn("giving a concurrency slot back (a sweep reclaims it)", logattr.RunID, h.Run, logattr.Error, err)
		}
	})
}

// giveBackRetried is giveBack within ctx, asked again after a failure
// while running (the coordinator's context) is not done.
func (c *Coordinator) giveBackRetried(running, ctx context.Context, s flow.Slot, h flow.Holder) error {
	err := c.giveBack(ctx, s, h)
	for pause := 100 * time.Millisecond; err != nil && pause < releaseTimeout; pause *= 4 {
		select {
		case <-running.Done():
			return err // stopping: a sweep wakes who was handed a slot
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		err = c.giveBack(ctx, s, h)
	}
	return err
}

// releaseTimeout bounds one release given back off the handler's path.
const releaseTimeout = 10 * time.Second

// backoffRate holds a rate limit's whole key back when an attempt of a
// node with the limit failed as RateLimited: no turn of the key comes
// before the failure's time plus its retryAfterMs (default: one turn).
// A map node's items: backoffItemRates (maprate.go).
func (c *Coordinator) backoffRate(ctx context.Context, ent *runEntry, id string, ns *projection.NodeState) error {
	if err := c.backoffItemRates(ctx, ent, id, ns); err != nil {
		return err
	}
	if ns.Rate == nil || ns.Error == nil || ns.Error.Type != events.FailureRateLimited || ns.EndedAt == nil {
		return nil
	}
	return c.holdBack(ctx, ent, id, ns.Rate, ns.Error, *ns.EndedAt, slotHolder(ent.state.RunID, id, ns))
}

// holdBack holds back key rr of node id's rate limit after failure f of
// attempt h at time at, once per attempt.
func (c *Coordinator) holdBack(ctx context.Context, ent *runEntry, id string, rr *events.RateRef, f *events.Failure, at time.Time, h flow.Holder) error {
	g, err := c.graphFor(ent.state)
	if err != nil {
		return nil // the run fails for its graph elsewhere
	}
	n, ok := g.Node(id)
	if !ok || n.Rate == nil {
		return nil
	}
	memo := "backoff/" + h.ID()
	if _, done := ent.released[memo]; done {
		return nil
	}
	var d struct {
		RetryAfterMs int64 `json:"retryAfterMs"`
	}
	_ = json.Unmarshal(f.Details, &d)
	after := time.Duration(d.RetryAfterMs) * time.Millisecond
	after = min(max(after, n.Rate.Per.D()/time.Duration(n.Rate.Limit)), maxBackoff)
	spec := flow.RateSpec{Limit: rr.Limit, Key: rr.Key, Rate: n.Rate.Limit, Per: n.Rate.Per.D()}
	if err := c.flow.Backoff(ctx, spec, at.Add(after)); err != nil {
		return err
	}
	if ent.released == nil {
		ent.released = map[string]struct{}{}
	}
	ent.released[memo] = struct{}{}
	return nil
}

// maxBackoff bounds how long one RateLimited failure holds a key back.
const maxBackoff = time.Hour

// wake makes the owner of a waiting attempt's run decide it again: a
// timer.fired notice (purpose "slot") appended to the run, which its
// partition's owner folds (it changes nothing in the state) and decides.
// granted says the attempt holds the slot already (handed over by a
// release): the owner readies it without asking the bucket (noteGrant).
// It is appended only after the hand-over was written.
func (c *Coordinator) wake(ctx context.Context, h flow.Holder, granted bool) error {
	now := c.opts.now().UTC()
	id := "slot-" + h.Node + "-" + strconv.Itoa(h.Iteration)
	ref := events.NodeRef{Node: h.Node, Iteration: h.Iteration}
	if node, item, ok := itemOf(h.Node); ok {
		id = "slot-" + node + "-" + strconv.Itoa(h.Iteration) + "-" + strconv.Itoa(item)
		ref = events.NodeRef{Node: node, Iteration: h.Iteration, Item: &item}
	}
	// A plain wake may come again (the slot it was for taken by another
	// first): each its own id. A granted wake is for one hand-over to one
	// attempt: its id derives from the attempt, so a second (the sweep,
	// reading the log before its owner decided the first) is a duplicate
	// the stream drops, and after the window the fold passes it over.
	nonce := strconv.FormatInt(now.UnixNano(), 10)
	if granted {
		nonce = "granted-" + strconv.Itoa(h.Attempt)
	}
	ev, err := events.New(h.Run, eventlog.DecisionID(h.Run, events.TimerFired, id, nonce), now,
		&events.TimerFiredData{TimerID: id, Purpose: "slot", Ref: ref, Attempt: h.Attempt, Granted: granted})
	if err != nil {
		return err
	}
	// Appended at once, as the timers' relay appends a fired timer: a
	// message schedule would fire on the server's next tick (about
	// 250ms), a delay every hand-over of a slot would pay.
	if _, err := c.store.Append(ctx, h.Run, events.AnySeq, ev); err != nil && !errors.Is(err, events.ErrRunNotFound) {
		return fmt.Errorf("waking run %s for its slot: %w", h.Run, err)
	}
	return nil
}

// sweepFlow sweeps the flow bucket every flow.SweepInterval until ctx
// ends (see flow.Limiter.Sweep).
func (c *Coordinator) sweepFlow(ctx context.Context) {
	if c.flow == nil {
		return
	}
	t := time.NewTicker(c.opts.flowSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := c.SweepFlow(ctx, c.mine)
		if n > 0 {
			c.log.Info("reclaimed concurrency slots of attempts that ended", logattr.Count, n)
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("sweeping the flow bucket", logattr.Error, err)
		}
	}
}

// SweepFlow sweeps the flow bucket once for the runs mine accepts (see
// flow.Limiter.Sweep): Run does it for the runs of its partitions every
// WithFlowSweep; the simulator calls it as one of its steps.
func (c *Coordinator) SweepFlow(ctx context.Context, mine func(run string) bool) (int, error) {
	if c.flow == nil {
		return 0, nil
	}
	return c.flow.Sweep(ctx, mine, c.slotLifeInLog, func(ctx context.Context, _ flow.Slot, h flow.Holder, granted bool) error {
		return c.wake(ctx, h, granted)
	})
}

// mine reports whether a run is in a partition this coordinator holds.
func (c *Coordinator) mine(run string) bool {
	return slices.Contains(c.Partitions(), eventlog.PartitionOf(run, c.opts.partitions))
}

// slotLifeInLog reads h's run from the log and says what it says of h's
// slot (slotLife).
func (c *Coordinator) slotLifeInLog(ctx context.Context, _ flow.Slot, h flow.Holder) (flow.Life, error) {
	s := &projection.State{}
	err := eventlog.Each(ctx, c.store, h.Run, 0, 0, func(ev *events.Event) error {
		_ = s.Apply(ev) // stale and refused events change nothing
		return nil
	})
	if errors.Is(err, events.ErrRunNotFound) {
		return flow.Gone, nil
	}
	if err != nil {
		return flow.Gone, fmt.Errorf("reading run %s: %w", h.Run, err)
	}
	return slotLife(s, h), nil
}

// noteGrant records, from a wake that says its attempt was handed the
// slot (wake), that the attempt holds it: the next decision of the run
// readies it without a compare-and-set (takeGrant). Why that is safe:
// the wake is appended after the hand-over was written, and a holder
// leaves the entry only by a release of its attempt, which its run's
// owner makes once the attempt is no longer live in the log, or the
// sweep's, which reads the same; an attempt waiting for its slot is live
// (slotLife), so the grant is there while the decision asks for it for
// that attempt. A note is this process's memory only: an entry read from
// a checkpoint misses it, and its decision asks the bucket, which finds
// the attempt a holder (asking again is a no-op).
func (ent *runEntry) noteGrant(e *events.Event) {
	if e.Type != events.TimerFired {
		return
	}
	p, err := e.Payload()
	d, ok := p.(*events.TimerFiredData)
	if err != nil || !ok || d.Purpose != "slot" || !d.Granted {
		return
	}
	h := flow.Holder{Run: e.RunID, Node: holderNode(d.Ref), Iteration: d.Ref.Iteration, Attempt: d.Attempt}
	if ent.granted == nil {
		ent.granted = map[string]struct{}{}
	}
	ent.granted[h.ID()] = struct{}{}
}

// takeGrant reports whether a wake said h was handed its slot (noteGrant),
// and forgets it: asked again (the decision was thrown away), h asks the
// bucket.
func (ent *runEntry) takeGrant(h flow.Holder) bool {
	if ent == nil {
		return false
	}
	if _, ok := ent.granted[h.ID()]; !ok {
		return false
	}
	delete(ent.granted, h.ID())
	return true
}
