// Package decider decides what a run does next. Decide is a pure function of
// the run's graph, its folded state and the time: it returns the events that
// move the run forward (routing, activations, retries, the run's end), and
// applies them to the state as it goes so that one call reaches a fixpoint.
// The coordinator appends what Decide returns; because Decide looks only at
// the state, deciding again from the same state gives the same events with
// the same ids, which JetStream de-duplicates, and a decision that was
// already appended is seen in the state and not made again.
//
// Semantics, briefly (pkg/graph has the full account):
//
//   - A finished activation is routed once: each outgoing edge is taken when
//     the node triggered the edge's action (no action named: "default") and
//     the edge's condition holds over state, output, invocation and local;
//     a skipped activation sends "not taken" on every edge. The result is a
//     NodeRouted event, so conditions are evaluated exactly once.
//   - A node's forward incoming edges join by its policy: all (default), any
//     or n-of. A round fires as soon as the policy can be decided: run when
//     enough edges were taken, skip when that is no longer possible. Edges of
//     a round that signal after an any or n-of fired are absorbed. A taken
//     back edge (closing a cycle) re-activates its target on its own.
//   - A node activation counts against the node's iteration cap; passing it
//     fails the run with an error naming the node and the cap.
//   - A failed attempt is retried by the node's policy after a durable timer;
//     after the last attempt the fallback output stands in if the node has
//     one, a timeout edge is taken for a human node that timed out, and
//     otherwise the run fails.
//   - A node's when and map.over, and a router's routes, see as output the
//     output of the predecessor whose taken edge activated it; a router
//     passes that output on as its own. An edge's condition sees as local
//     the forking data of the action that would take it.
//   - The run completes when nothing is active, no timer is pending and no
//     join can fire any more, once an edge to END was taken; its output is
//     the shared state. Signals a join can no longer use are left behind;
//     without END reached the run fails, naming the joins that wait.
//   - A subgraph node starts a child run: its id is derived from the
//     parent, the activation and the parent's nonce (ChildRunID), and its
//     run-started is a decision of the child run (on the child's decision
//     subject, which only the coordinator may write), naming the parent.
//     The coordinator appends it first, and never takes a run another
//     writer put under that id for the child: PreemptedNotice fails the
//     node instead (ChildRunPreempted, not retryable).
//   - An edge to CONTINUE ends the run at rest, as END does, by continuing
//     it as new: it completes naming its continuation, whose start (a
//     decision of the continuation, Decision.Continue, under an id derived
//     from the ending run: ContinuationRunID) carries the state as input and
//     the chain. A graph with continueAsNew.onHistoryBudget drains from
//     DrainFraction of the history budget on and continues the same way
//     (continue.go).
//   - Cancelling a run, or its failure, cancels the child runs its
//     subgraph nodes wait for.
//   - A forked run whose start state the fold refused
//     (projection.CheckForkState; State.ForkRefused) fails at its first
//     decision with the problems, and decides nothing else.
//   - A local node (graphrt.Evaluator.IsLocal) is readied like any other, with
//     events.LocalQueue as its queue: the coordinator runs it and records
//     its outcome; retries, timeouts and fallbacks are the same.
//     Routers are decided here directly (NodeWaiting, then the router's
//     NodeInvoked), with no work item at all.
package decider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Decision is what one call of Decide wants done.
type Decision struct {
	// Events are appended to the run's log in order, each conditioned on
	// the one before (events.Store.Append): a crash may land a prefix,
	// which deciding again from the folded state completes.
	Events []*events.Event
	// Timers are the durable timers this decision asks for. They are in
	// the state too (projection.State.Timers), and the coordinator arms
	// what the state says is pending once Events are in; Timers serve
	// callers that drive the engine themselves (its tests).
	Timers []Timer
	// Children are child runs to start (their run-started events).
	Children []*events.Event
	// CancelChildren lists child runs to cancel.
	CancelChildren []string
	// Continue is the start of the run's continuation, when the run
	// continues as new (continue.go): appended before Events, on a run
	// that must have no events.
	Continue *events.Event
}

// Timer is a durable delayed event.
type Timer struct {
	ID    string
	At    time.Time
	Event *events.Event
}

// Empty reports whether there is nothing to do.
func (d *Decision) Empty() bool {
	return len(d.Events) == 0 && len(d.Timers) == 0 && len(d.Children) == 0 && len(d.CancelChildren) == 0 && d.Continue == nil
}

// maxSteps bounds one Decide call; a graph needs far fewer steps than this
// per event, so reaching it means a bug, reported as a run failure rather
// than a coordinator that spins.
const maxSteps = 100000

type decider struct {
	g   *graph.Graph
	ev  graphrt.Evaluator // g's evaluation: edges, whens, routers, maps
	s   *projection.State
	now time.Time
	out Decision
	err error
	// routes are routings decided and applied, waiting to be written.
	routes []pendingRoute
	// admitFn is Options.Admit (flow.go).
	admitFn   func(AdmitRequest) Admission
	reserveFn func(ReserveRequest) Reservation
	// turnsAhead counts, per rate key, the later turns of map items asked
	// for in this decision (maprate.go).
	turnsAhead map[string]int
	// budget is Options.HistoryBudget; drain is set once the run drains
	// (continue.go).
	budget HistoryBudget
	drain  bool
	// nodes are g's nodes in order; settled[i] says nodes[i] had nothing
	// due when step last looked, and no decision touched it since; applied
	// counts the decisions applied (step, touch).
	nodes   []*graph.Node
	settled []bool
	applied int
}

// Decide returns what must happen next for the run in state s of graph g,
// applying the returned events to s. Only s's events must have come from
// the log; on an error from appending the decision, throw s away and fold
// the run again.
func Decide(g *graph.Graph, s *projection.State, now time.Time) Decision {
	return DecideWith(g, s, now, Options{})
}

func (d *decider) run() {
	s := d.s
	if s.Status.Ended() || s.Status == projection.RunPending {
		return
	}
	if s.ForkRefused != nil {
		// A fork whose start state does not fit its graph: the fold did
		// not take the state, and the run ends saying why.
		d.failRun(*s.ForkRefused, "")
		return
	}
	if s.Status == projection.RunCancelling {
		d.cancel()
		return
	}
	d.drain = d.draining()
	for step := 0; step < maxSteps; step++ {
		if s.Status.Ended() {
			return
		}
		if !d.step() {
			d.finishIfQuiet()
			return
		}
	}
	d.failRun(events.Failure{Type: "EngineError", Message: "decision did not settle"}, "")
}

// fullScan makes step look at every node each time, as it did before
// nodes were settled: the tests compare the two.
var fullScan = false

// step makes the first decision that is due, in graph order, and reports
// whether it made one. A node found with nothing due is settled: later
// steps of the same call pass over it until an event the decider applies
// touches it (touch), so that a step costs what changed, not the whole
// graph (a node's due decisions read only its own state and signals). A
// node that waits in the coordinator (waitOver) is never settled: a slot
// or a rate turn may come from what other nodes do.
func (d *decider) step() bool {
	if d.nodes == nil {
		d.nodes = d.g.Nodes()
		d.settled = make([]bool, len(d.nodes))
	}
	for i, n := range d.nodes {
		if (!d.settled[i] || fullScan) && d.nodeStep(i, n) {
			return true
		}
	}
	// Entry: START's edges are routed once, when the run starts.
	if d.s.Stats.Events > 0 && !d.startRouted() && !d.drain {
		switch d.admitRun() { // runlimit.go
		case runWaits:
			return false
		case runEnded:
			return true
		}
		d.routeStart()
		return true
	}
	return false
}

// nodeStep makes the first decision due for node n, nodes[i], and reports
// whether it made one (or the run ended); with nothing due, n is settled.
func (d *decider) nodeStep(i int, n *graph.Node) bool {
	applied := d.applied
	ns := d.s.Nodes[n.ID]
	if ns != nil && (d.timedOut(n, ns) || d.afterOutcome(n, ns) || d.waitOver(n, ns)) {
		return true
	}
	if !d.drain && d.join(n) || d.s.Status.Ended() {
		return true
	}
	d.settled[i] = d.applied == applied && (ns == nil || ns.Status != projection.NodeWaiting)
	return false
}

// waitOver makes the decision a node that waits in the coordinator may be
// due: map items to ready, a slot or a rate limit's turn come.
func (d *decider) waitOver(n *graph.Node, ns *projection.NodeState) bool {
	if ns.Status != projection.NodeWaiting {
		return false
	}
	switch ns.WaitingFor {
	case "map":
		return d.mapItems(n, ns)
	case "slot":
		return d.slotWait(n, ns)
	case "rate":
		return d.rateWait(n, ns)
	case projection.WaitingForAwait:
		return d.awaitWait(n, ns)
	}
	return false
}

// emit appends an event to the decision and applies it to the state.
// Routings waiting to be written go with it when it is an activation, or
// before it otherwise.
func (d *decider) emit(p events.Payload, id string) *events.Event {
	var attach func([]events.NodeRoutedData)
	switch q := p.(type) {
	case *events.NodeReadyData:
		attach = func(r []events.NodeRoutedData) { q.Routed = r }
	case *events.NodeSkippedData:
		attach = func(r []events.NodeRoutedData) { q.Routed = r }
	case *events.NodeWaitingData:
		attach = func(r []events.NodeRoutedData) { q.Routed = r }
	default:
		d.flushRoutes()
	}
	if attach == nil || len(d.routes) == 0 {
		e := d.build(p, id)
		if e == nil {
			return nil
		}
		d.apply(e)
		d.out.Events = append(d.out.Events, e)
		return e
	}
	// The routings are in the state already: the activation is applied
	// without them (unencoded: the fold reads a decision's payload, not
	// its data), and the event written records them, encoded once.
	pre := eventlog.NewUnencoded(d.s.RunID, id, d.now, p)
	eventlog.MarkDecision(pre)
	d.apply(pre)
	r := make([]events.NodeRoutedData, len(d.routes))
	for i, pr := range d.routes {
		r[i] = pr.data
	}
	attach(r)
	d.routes = nil
	e := d.build(p, id)
	if e == nil {
		return nil
	}
	d.out.Events = append(d.out.Events, e)
	return e
}

// pendingRoute is a routing applied to the state and not yet written.
type pendingRoute struct {
	data  events.NodeRoutedData
	event *events.Event
}

// emitRouted records a routing: it is applied to the state at once and
// written with the next activation (the common step, a node finished and
// its successor starts, is then one event), or on its own if none follows.
func (d *decider) emitRouted(p *events.NodeRoutedData, id string) {
	e := d.build(p, id)
	if e == nil {
		return
	}
	d.apply(e)
	d.routes = append(d.routes, pendingRoute{data: *p, event: e})
}

// flushRoutes writes pending routings as events of their own.
func (d *decider) flushRoutes() {
	for _, pr := range d.routes {
		d.out.Events = append(d.out.Events, pr.event)
	}
	d.routes = nil
}

func (d *decider) build(p events.Payload, id string) *events.Event {
	e, err := events.New(d.s.RunID, id, d.now, p)
	if err != nil {
		d.err = err
		return nil
	}
	eventlog.MarkDecision(e)
	return e
}

func (d *decider) apply(e *events.Event) {
	if err := d.s.Apply(e); err != nil {
		// A decision the fold cannot apply is a bug; fail loudly in the log.
		panic(fmt.Sprintf("engine: decided %s that the fold rejects: %v", e.Type, err))
	}
	d.applied++
	d.touch(e)
}

// touch unsettles (step) the nodes whose state or signals an applied
// decision may have changed: the node it is about, and for a routing the
// targets of its signals (also of the routings an activation carries).
// Any other event (the run's end, say) unsettles every node.
func (d *decider) touch(e *events.Event) {
	if d.settled == nil {
		return
	}
	p, _ := e.Payload()
	switch q := p.(type) {
	case *events.NodeRoutedData:
		d.touchRouted(q)
	case *events.NodeReadyData:
		d.touchNode(q.Node)
		d.touchAll(q.Routed)
	case *events.NodeSkippedData:
		d.touchNode(q.Node)
		d.touchAll(q.Routed)
	case *events.NodeWaitingData:
		d.touchNode(q.Node)
		d.touchAll(q.Routed)
	case *events.NodeInvokedData:
		d.touchNode(q.Node)
	case *events.NodeFailedData:
		d.touchNode(q.Node)
	case *events.RetryScheduledData:
		d.touchNode(q.Node)
	case *events.ChildRunStartedData:
		d.touchNode(q.Node)
	default:
		clear(d.settled)
	}
}

func (d *decider) touchAll(rs []events.NodeRoutedData) {
	for i := range rs {
		d.touchRouted(&rs[i])
	}
}

func (d *decider) touchRouted(r *events.NodeRoutedData) {
	d.touchNode(r.Node)
	for _, sig := range r.Signals {
		d.touchNode(sig.To)
	}
}

func (d *decider) touchNode(id string) {
	if i, ok := d.g.NodeIndex(id); ok && i < len(d.settled) {
		d.settled[i] = false
	}
}

func (d *decider) failRun(f events.Failure, node string) {
	children := d.waitingChildren()
	d.emit(&events.RunFailedData{Error: f, Node: node}, eventlog.DecisionID(d.s.RunID, events.RunFailed))
	d.out.CancelChildren = append(d.out.CancelChildren, children...)
}

func (d *decider) cancel() {
	c := d.s.Cancel
	// Collected first: folding run-cancelled marks the waiting nodes
	// cancelled.
	children := d.waitingChildren()
	d.emit(&events.RunCancelledData{By: c.By, Reason: c.Reason, Terminated: c.Terminate}, eventlog.DecisionID(d.s.RunID, events.RunCancelled))
	d.out.CancelChildren = append(d.out.CancelChildren, children...)
}

// waitingChildren lists the child runs the run's nodes wait for, in node
// order.
func (d *decider) waitingChildren() []string {
	var out []string
	for _, n := range d.g.Nodes() {
		if ns := d.s.Nodes[n.ID]; ns != nil && ns.Child != "" && ns.Status == projection.NodeWaiting {
			out = append(out, ns.Child)
		}
	}
	return out
}

// finishIfQuiet ends the run when nothing is left to happen.
func (d *decider) finishIfQuiet() {
	s := d.s
	if len(s.Timers) > 0 {
		return
	}
	for _, ns := range s.Nodes {
		if ns.Status.Active() {
			return
		}
	}
	if s.ContinueFrom != nil || d.drain {
		d.continueAsNew() // continue.go
		return
	}
	// Nothing is active and no timer is pending, so no signal can come:
	// a join still holding signals (say, an all-join inside a loop whose
	// other input ran only once) can never fire.
	var stuck []string
	for _, n := range d.g.Nodes() {
		if len(s.Pending[n.ID]) > 0 {
			stuck = append(stuck, n.ID)
		}
	}
	if !s.EndReached {
		msg := "the run came to rest without reaching END"
		if len(stuck) > 0 {
			msg += fmt.Sprintf("; nodes %q wait for incoming edges that can no longer be taken", stuck)
		}
		d.failRun(events.Failure{Type: events.FailureNoPathToEnd, Message: msg}, "")
		return
	}
	out := mustJSON(s.VarsMap())
	d.emit(&events.RunCompletedData{Output: out}, eventlog.DecisionID(s.RunID, events.RunCompleted))
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("engine: " + err.Error())
	}
	return b
}
