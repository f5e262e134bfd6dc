package decider

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Options are what a caller may give DecideWith beyond the state.
type Options struct {
	// Admit asks for a concurrency slot for an attempt of a node with a
	// concurrency limit (internal/flow), before the attempt is readied.
	// Asking again for an attempt that holds its slot, or waits for it,
	// must give the same answer until the slot is given back, so that
	// deciding again from the same state decides the same. Nil admits
	// every attempt at once (replay, and callers without flow control).
	Admit func(AdmitRequest) Admission
	// Reserve takes an attempt's turn of its node's rate limit and says
	// when it is: now (or before) to ready it at once, else the attempt
	// waits until then. Asking again for an attempt must give the same
	// time. For a map item's attempt (Ref.Item set) a later turn is not
	// recorded in the log: Reserve remembers it and has the run decided
	// again at it (maprate.go). Nil: every turn is now.
	Reserve func(ReserveRequest) Reservation
	// HistoryBudget is the coordinator's history budget: a run whose
	// graph continues as new on it drains from DrainFraction of it on
	// (continue.go). Zero: no run drains.
	HistoryBudget HistoryBudget
}

// ReserveRequest asks for an attempt's turn of a rate limit: Rate.Units
// of the key, at most Limit units per Per.
type ReserveRequest struct {
	// Now is the decision's time, the time of the node-ready a turn
	// that is now leads to.
	Now     time.Time
	Run     string
	Ref     events.NodeRef
	Attempt int
	Rate    events.RateRef
	Limit   int
	Per     time.Duration
}

// Reservation answers a ReserveRequest.
type Reservation struct {
	// At is the attempt's turn; the zero time, or any time not after the
	// decision's, is now.
	At      time.Time
	Failure *events.Failure
}

// AdmitRequest asks for a slot for one attempt.
type AdmitRequest struct {
	// Priority (1 to 5) and Fairness are the run's: they rank the
	// attempt among the key's waiters.
	Priority int
	Fairness string
	Run      string
	Ref      events.NodeRef
	Attempt  int
	Slot     events.SlotRef
	// Strategy is, for a run's own slot (Ref.Node START), its graph's
	// run limit strategy (graph.RunQueue, RunCancelNewest or
	// RunCancelOldest); empty for a node's slot, which is queued.
	Strategy string
}

// Admission answers an AdmitRequest.
type Admission struct {
	// Granted says the attempt holds its slot: it is readied now.
	// Otherwise it waits for the slot (a node.waiting for "slot").
	Granted bool
	// Failure, when set, is final for the attempt (a bound of the limit
	// was passed): the run fails with it.
	Failure *events.Failure
	// Full says, for a run's own slot with the cancel-newest strategy,
	// that the key is full: the run is cancelled (not queued).
	Full bool
}

// MaxKeyLen is the longest concurrency key a node's expression may give.
const MaxKeyLen = 256

// DecideWith is Decide with options.
func DecideWith(g *graph.Graph, s *projection.State, now time.Time, o Options) Decision {
	d := &decider{g: g, ev: graphrt.Of(g), s: s, now: now.UTC(), admitFn: o.Admit, reserveFn: o.Reserve, budget: o.HistoryBudget}
	d.run()
	d.flushRoutes()
	return d.out
}

// slotFor is the slot an attempt of n needs, or nil when n has no limit;
// ok is false when the run failed evaluating its key.
func (d *decider) slotFor(n *graph.Node, local []byte) (*events.SlotRef, bool) {
	c := n.Concurrency
	if c == nil {
		return nil, true
	}
	env := d.env(nil)
	env.Local = decode(local)
	key, err := d.ev.ConcurrencyKey(n.ID, env)
	if err == nil && len(key) > MaxKeyLen {
		err = fmt.Errorf("concurrency.key gave %d bytes, the limit is %d", len(key), MaxKeyLen)
	}
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureFlowLimit, Message: fmt.Sprintf("node %q: %v", n.ID, err)}, n.ID)
		return nil, false
	}
	return &events.SlotRef{Limit: graph.LimitName(d.g.Definition(), n), Key: key, Max: c.Max}, true
}

// admit asks for slot for an attempt; ok is false when the run failed.
func (d *decider) admit(ref events.NodeRef, attempt int, slot *events.SlotRef) (granted, ok bool) {
	if d.admitFn == nil {
		return true, true
	}
	a := d.admitFn(AdmitRequest{Priority: priorityOf(d.s.Priority), Fairness: d.s.FairnessKey, Run: d.s.RunID, Ref: ref, Attempt: attempt, Slot: *slot})
	if a.Failure != nil {
		d.failRun(*a.Failure, ref.Node)
		return false, false
	}
	return a.Granted, true
}

// priorityOf is a run's priority, the default when it names none and
// within the bounds otherwise.
func priorityOf(p int) int {
	if p == 0 {
		return eventlog.DefaultPriority
	}
	return min(max(p, eventlog.MinPriority), eventlog.MaxPriority)
}

// waitForSlot records an attempt waiting for its slot.
func (d *decider) waitForSlot(ref events.NodeRef, attempt int, slot *events.SlotRef, local []byte, consumed, owed []int) {
	d.emit(&events.NodeWaitingData{NodeRef: ref, For: "slot", Slot: slot, Attempt: attempt, Local: local, Consumed: consumed, Owed: owed},
		eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key(), "slot", strconv.Itoa(attempt)))
}

// slotWait readies an attempt waiting for its slot once it is granted;
// it reports whether it decided anything.
func (d *decider) slotWait(n *graph.Node, ns *projection.NodeState) bool {
	if ns.Slot == nil {
		return false
	}
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	granted, ok := d.admit(ref, ns.Attempt+1, ns.Slot)
	if !ok {
		return true
	}
	if !granted {
		return false
	}
	// Granted now: readyWith does not ask the bucket again.
	d.readyWith(n, ref, ns.Attempt+1, ns.Local, nil, nil, d.input(n), &cleared{slot: ns.Slot, granted: true})
	return true
}

// rateWait readies an attempt whose turn of its rate limit came (the
// wait's timer fired); it reports whether it decided anything.
func (d *decider) rateWait(n *graph.Node, ns *projection.NodeState) bool {
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	if ns.Rate == nil {
		return false
	}
	if _, pending := d.s.Timers[projection.RateTimerID(ref, ns.Attempt+1)]; pending {
		return false
	}
	d.readyWith(n, ref, ns.Attempt+1, ns.Local, nil, nil, d.input(n), &cleared{rate: ns.Rate})
	return true
}

// takeTurn takes an attempt's turn of its node's rate limit: ok with the
// limit's reference when the turn is now; otherwise the attempt waits for
// it (a node.waiting for "rate" with a durable timer), or the run failed.
func (d *decider) takeTurn(n *graph.Node, ref events.NodeRef, attempt int, local []byte, consumed, owed []int) (*events.RateRef, bool) {
	rr, ok := d.rateRefFor(n, local)
	if !ok {
		return nil, false
	}
	if d.reserveFn == nil {
		return rr, true
	}
	r := d.reserveFn(ReserveRequest{Now: d.now, Run: d.s.RunID, Ref: ref, Attempt: attempt, Rate: *rr, Limit: n.Rate.Limit, Per: n.Rate.Per.D()})
	if r.Failure != nil {
		d.failRun(*r.Failure, n.ID)
		return nil, false
	}
	if !r.At.After(d.now) {
		return rr, true
	}
	at := r.At.UTC()
	d.emit(&events.NodeWaitingData{NodeRef: ref, For: "rate", Rate: rr, Attempt: attempt, Deadline: &at, Local: local, Consumed: consumed, Owed: owed},
		eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key(), "rate", strconv.Itoa(attempt)))
	id := projection.RateTimerID(ref, attempt)
	d.timer(id, at, &events.TimerFiredData{TimerID: id, Purpose: projection.PurposeRate, Ref: ref, Attempt: attempt})
	return nil, false
}

// rateRefFor is the key and units of n's rate limit an attempt with local
// takes; ok is false when the run failed evaluating them.
func (d *decider) rateRefFor(n *graph.Node, local []byte) (*events.RateRef, bool) {
	env := d.env(nil)
	env.Local = decode(local)
	key, units, err := d.ev.RateKey(n.ID, env)
	switch {
	case err != nil:
	case len(key) > MaxKeyLen:
		err = fmt.Errorf("rate.key gave %d bytes, the limit is %d", len(key), MaxKeyLen)
	case units < 1 || units > n.Rate.Limit:
		err = fmt.Errorf("rate.units gave %d, want 1 to the limit, %d", units, n.Rate.Limit)
	}
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureFlowLimit, Message: fmt.Sprintf("node %q: %v", n.ID, err)}, n.ID)
		return nil, false
	}
	return &events.RateRef{Limit: graph.RateName(d.g.Definition(), n), Key: key, Units: units}, true
}
