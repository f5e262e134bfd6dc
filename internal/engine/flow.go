package engine

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
}

// AdmitRequest asks for a slot for one attempt.
type AdmitRequest struct {
	Run     string
	Ref     events.NodeRef
	Attempt int
	Slot    events.SlotRef
}

// Admission answers an AdmitRequest.
type Admission struct {
	// Granted says the attempt holds its slot: it is readied now.
	// Otherwise it waits for the slot (a node.waiting for "slot").
	Granted bool
	// Failure, when set, is final for the attempt (a bound of the limit
	// was passed): the run fails with it.
	Failure *events.Failure
}

// MaxKeyLen is the longest concurrency key a node's expression may give.
const MaxKeyLen = 256

// DecideWith is Decide with options.
func DecideWith(g *graph.Graph, s *projection.State, now time.Time, o Options) Decision {
	d := &decider{g: g, ev: graphrt.Of(g), s: s, now: now.UTC(), admitFn: o.Admit}
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
	a := d.admitFn(AdmitRequest{Run: d.s.RunID, Ref: ref, Attempt: attempt, Slot: *slot})
	if a.Failure != nil {
		d.failRun(*a.Failure, ref.Node)
		return false, false
	}
	return a.Granted, true
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
	d.readyWith(n, ref, ns.Attempt+1, ns.Local, nil, nil, d.input(n), ns.Slot)
	return true
}
