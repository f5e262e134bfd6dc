package decider

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

func (d *decider) env(ns *projection.NodeState) graphrt.Env {
	env := graphrt.Env{State: d.s.VarsMap(), Invocation: d.s.InvocationMap()}
	if ns != nil {
		env.Output = decode(ns.Output)
		env.Local = decode(ns.Local)
	}
	return env
}

func decode(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

func (d *decider) startRouted() bool { return d.s.EntryRouted }

// routeStart routes START's edges: the run's entry points.
func (d *decider) routeStart() {
	env := d.env(nil)
	var sigs []events.Signal
	for _, i := range d.ev.Outgoing(graph.Start) {
		e := d.g.Edge(i)
		taken, err := d.ev.EdgeTaken(i, graph.DefaultAction, env)
		if err != nil {
			d.failRun(conditionFailure(err), "")
			return
		}
		sigs = append(sigs, events.Signal{Edge: i, To: e.To, Taken: taken})
	}
	ref := events.NodeRef{Node: graph.Start, Iteration: 1}
	d.emitRouted(&events.NodeRoutedData{NodeRef: ref, Signals: sigs}, eventlog.DecisionID(d.s.RunID, events.NodeRouted, ref.Key()))
}

// conditionFailure is the failure of an edge's condition; err names the
// edge (1-based, once) and, for a missing key, the field and the fix.
func conditionFailure(err error) events.Failure {
	return events.Failure{Type: events.FailureCondition, Message: strings.TrimPrefix(err.Error(), graph.ErrEvaluation.Error()+": ")}
}

// route records which outgoing edges of a finished activation are taken.
func (d *decider) route(n *graph.Node, ns *projection.NodeState) {
	env := d.env(ns)
	actions := ns.Actions
	if len(actions) == 0 {
		actions = []events.Action{{Name: graph.DefaultAction}}
	}
	var sigs []events.Signal
	for _, i := range d.ev.Outgoing(n.ID) {
		e := d.g.Edge(i)
		sig := events.Signal{Edge: i, To: e.To, Back: d.ev.IsBackEdge(i)}
		switch ns.Status {
		case projection.NodeSucceeded:
			if e.Timeout {
				break
			}
			for _, a := range actions {
				aenv := env
				if len(a.Data) > 0 {
					aenv.Local = decode(a.Data)
				}
				taken, err := d.ev.EdgeTaken(i, a.Name, aenv)
				if err != nil {
					d.failRun(conditionFailure(err), n.ID)
					return
				}
				if taken {
					sig.Taken, sig.Data = true, a.Data
					break
				}
			}
		case projection.NodeFailed: // a human node's deadline passed
			sig.Taken = e.Timeout
		}
		sigs = append(sigs, sig)
	}
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	d.emitRouted(&events.NodeRoutedData{NodeRef: ref, Signals: sigs}, eventlog.DecisionID(d.s.RunID, events.NodeRouted, ref.Key()))
}

// join fires the next round of a node's incoming signals, if it can: a
// taken back edge starts the next iteration at once; forward signals fire
// when the node's join condition is met, or skip it when it no longer can
// be.
func (d *decider) join(n *graph.Node) bool {
	q := d.s.Pending[n.ID]
	if len(q) == 0 {
		return false
	}
	if ns := d.s.Nodes[n.ID]; ns != nil && ns.Status.Active() {
		return false // one activation of a node at a time; signals wait
	}
	if sig, ok := takenBackEdge(q); ok {
		d.activate(n, []int{sig.Edge}, nil, sig.Data, true)
		return true
	}
	fwd := d.ev.ForwardIncoming(n.ID)
	r := nextRound(q, fwd)
	switch need := joinNeed(n, len(fwd)); {
	case n.Join.Kind == graph.JoinAll || n.Join.Kind == "":
		if len(r.owed) > 0 {
			return false
		}
		d.activate(n, r.order, nil, r.local, r.taken > 0)
	case r.taken >= need:
		d.activate(n, r.order, r.owed, r.local, true)
	case r.taken+len(r.owed) < need:
		d.activate(n, r.order, r.owed, nil, false)
	default:
		return false
	}
	return true
}

// takenBackEdge returns the first taken back-edge signal among a node's
// pending ones.
func takenBackEdge(q []events.Signal) (events.Signal, bool) {
	for _, sig := range q {
		if sig.Back && sig.Taken {
			return sig, true
		}
	}
	return events.Signal{}, false
}

// joinRound is the next round of a node's forward signals: the first
// pending signal of each incoming forward edge, in the order they came.
type joinRound struct {
	order []int           // the edges signalled, in order
	owed  []int           // forward edges with no signal yet
	taken int             // how many of order were taken
	local json.RawMessage // the taken edges' local data, merged in order
}

// nextRound gathers the next round from a node's pending signals; fwd is
// its incoming forward edges.
func nextRound(q []events.Signal, fwd []int) joinRound {
	var r joinRound
	seen := map[int]bool{}
	for _, sig := range q {
		if sig.Back || seen[sig.Edge] {
			continue
		}
		seen[sig.Edge] = true
		r.order = append(r.order, sig.Edge)
		if sig.Taken {
			r.taken++
			r.local = mergeLocal(r.local, sig.Data)
		}
	}
	for _, e := range fwd {
		if !seen[e] {
			r.owed = append(r.owed, e)
		}
	}
	return r
}

// joinNeed is how many taken edges fire a node: one for any, n for n,
// all of its fwd forward edges otherwise.
func joinNeed(n *graph.Node, fwd int) int {
	switch n.Join.Kind {
	case graph.JoinAny:
		return 1
	case graph.JoinN:
		return n.Join.N
	}
	return fwd
}

// mergeLocal merges branch-local data from several taken edges: objects
// merge key by key (later edges win), anything else: the last one.
func mergeLocal(a, b json.RawMessage) json.RawMessage {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	var am, bm map[string]json.RawMessage
	if json.Unmarshal(a, &am) != nil || json.Unmarshal(b, &bm) != nil || am == nil || bm == nil {
		return b
	}
	for k, v := range bm {
		am[k] = v
	}
	return mustJSON(am)
}

// activation is one activation of a node being decided: which it is, the
// edges it consumes and owes, and the local data its taken edges carry.
type activation struct {
	ref      events.NodeRef
	consumed []int
	owed     []int
	local    json.RawMessage
}

// activate starts a new activation of n (or skips it): past its iteration
// cap the run fails; with no edge taken, or its when condition false, it
// is skipped; else it starts the way its kind does.
func (d *decider) activate(n *graph.Node, consumed, owed []int, local json.RawMessage, run bool) {
	ref, ok := d.nextIteration(n)
	if !ok {
		return
	}
	a := &activation{ref: ref, consumed: consumed, owed: owed, local: local}
	if !run {
		d.skip(a, "no incoming edge was taken")
		return
	}
	pred := d.predOutput(n.ID, consumed)
	env := d.env(nil)
	env.Local, env.Output = decode(local), decode(pred)
	ok, err := d.ev.ShouldExecute(n.ID, env)
	if err != nil {
		d.failRun(conditionFailure(err), n.ID)
		return
	}
	if !ok {
		d.skip(a, "its when condition is false")
		return
	}
	switch {
	case n.Map != nil:
		d.startMap(n, a, env)
	case n.Type == graph.TypeRouter:
		d.startRouter(n, a, env, pred)
	case n.Type == graph.TypeHuman:
		d.startHuman(n, a)
	case n.Type == graph.TypeSubgraph:
		d.startChild(n, ref, consumed, owed, local)
	case n.Type == graph.TypeWait:
		d.startWait(n, a, env)
	default:
		d.ready(n, ref, 1, local, consumed, owed)
	}
}

// nextIteration is the node's next activation, unless it would pass the
// node's iteration cap: then the run fails.
func (d *decider) nextIteration(n *graph.Node) (events.NodeRef, bool) {
	iter := 1
	if ns := d.s.Nodes[n.ID]; ns != nil {
		iter = ns.Iteration + 1
	}
	if limit := d.ev.MaxIterations(n.ID); iter > limit {
		d.failRun(events.Failure{Type: events.FailureIterationCap, Message: fmt.Sprintf("node %q reached its iteration cap of %d", n.ID, limit)}, n.ID)
		return events.NodeRef{}, false
	}
	return events.NodeRef{Node: n.ID, Iteration: iter}, true
}

// skip records an activation skipped, and why.
func (d *decider) skip(a *activation, reason string) {
	d.emit(&events.NodeSkippedData{NodeRef: a.ref, Reason: reason, Consumed: a.consumed, Owed: a.owed},
		eventlog.DecisionID(d.s.RunID, events.NodeSkipped, a.ref.Key()))
}

// wait records an activation waiting (for its map items, its route, a
// signal).
func (d *decider) wait(a *activation, p *events.NodeWaitingData) {
	p.NodeRef, p.Consumed, p.Owed, p.Local = a.ref, a.consumed, a.owed, a.local
	d.emit(p, eventlog.DecisionID(d.s.RunID, events.NodeWaiting, a.ref.Key()))
}

// startMap starts a map node: it waits for its items, listed now from its
// map.over (mapItems readies them).
func (d *decider) startMap(n *graph.Node, a *activation, env graphrt.Env) {
	items, err := d.ev.MapItems(n.ID, env)
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureCondition, Message: fmt.Sprintf("node %q: map.over: %v", n.ID, err)}, n.ID)
		return
	}
	if items == nil {
		items = []any{}
	}
	d.wait(a, &events.NodeWaitingData{For: "map", Items: mustJSON(items)})
}

// startRouter runs a router node here: its routes are evaluated now, and
// it is invoked with the actions they name.
func (d *decider) startRouter(n *graph.Node, a *activation, env graphrt.Env, pred json.RawMessage) {
	names, err := d.ev.RouterActions(n.ID, env)
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureCondition, Message: fmt.Sprintf("router %q: %v", n.ID, err)}, n.ID)
		return
	}
	var actions []events.Action
	for _, name := range names {
		actions = append(actions, events.Action{Name: name})
	}
	d.wait(a, &events.NodeWaitingData{For: "router"})
	// A router passes its predecessor's output on, so the conditions of
	// its edges see it as output.
	d.emit(&events.NodeInvokedData{NodeRef: a.ref, Output: pred, Actions: actions, Worker: "coordinator"},
		eventlog.DecisionID(d.s.RunID, events.NodeInvoked, a.ref.Key(), "0"))
}

// startHuman starts a human node: it waits for a signal, up to its
// timeout if it has one (a deadline timer).
func (d *decider) startHuman(n *graph.Node, a *activation) {
	p := &events.NodeWaitingData{For: "signal", Input: d.input(n)}
	var cfg struct {
		Timeout graph.Duration `json:"timeout"`
	}
	_ = json.Unmarshal(n.Config, &cfg)
	if cfg.Timeout > 0 {
		at := d.now.Add(cfg.Timeout.D())
		p.Deadline = &at
	}
	d.wait(a, p)
	if p.Deadline != nil {
		id := projection.DeadlineTimerID(a.ref)
		d.timer(id, *p.Deadline, &events.TimerFiredData{TimerID: id, Purpose: "deadline", Ref: a.ref})
	}
}

// startWait starts a wait node: it waits until the time its config gives
// (a duration from now, or its until over the state), on a durable timer
// and no worker. A time already reached ends the wait in the same event
// (the fold sees its deadline is not after the decision). An until that
// gives no time fails the run, naming the node and the value.
func (d *decider) startWait(n *graph.Node, a *activation, env graphrt.Env) {
	at, err := d.ev.WaitUntil(n.ID, env, d.now)
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureInvalidWait, Message: strings.TrimPrefix(err.Error(), graph.ErrEvaluation.Error()+": ")}, n.ID)
		return
	}
	at = at.UTC()
	d.wait(a, &events.NodeWaitingData{For: projection.WaitingForTimer, Deadline: &at})
	if at.After(d.now) {
		id := projection.WaitTimerID(a.ref)
		d.timer(id, at, &events.TimerFiredData{TimerID: id, Purpose: projection.PurposeWait, Ref: a.ref})
	}
}

// timer records a durable timer in the state and asks for it to be scheduled.
func (d *decider) timer(id string, at time.Time, p *events.TimerFiredData) {
	e, err := events.New(d.s.RunID, eventlog.DecisionID(d.s.RunID, events.TimerFired, id), at, p)
	if err != nil {
		d.err = err
		return
	}
	// The state records the timer from the event that asks for it: a retry
	// timer from its RetryScheduled, a deadline from its NodeWaiting.
	d.out.Timers = append(d.out.Timers, Timer{ID: id, At: at, Event: e})
}

// predOutput is the output of the predecessor an activation follows: the
// source of the last taken edge among the consumed ones (nil from START).
// A node's when and map.over, and a router's routes, see it as output.
func (d *decider) predOutput(node string, consumed []int) json.RawMessage {
	taken := map[int]bool{}
	seen := map[int]bool{}
	for _, sig := range d.s.Pending[node] {
		if !seen[sig.Edge] {
			seen[sig.Edge], taken[sig.Edge] = true, sig.Taken
		}
	}
	for k := len(consumed) - 1; k >= 0; k-- {
		if !taken[consumed[k]] {
			continue
		}
		if e := d.g.Edge(consumed[k]); e != nil && e.From != graph.Start {
			if ns := d.s.Nodes[e.From]; ns != nil {
				return ns.Output
			}
		}
		return nil
	}
	return nil
}

// input is a node's view of the shared state: the keys it declares, or all.
func (d *decider) input(n *graph.Node) json.RawMessage {
	if len(n.Inputs) == 0 {
		if len(d.s.Vars) == 0 {
			return nil
		}
		return mustJSON(d.s.Vars)
	}
	view := make(map[string]json.RawMessage, len(n.Inputs))
	for _, k := range n.Inputs {
		if v, ok := d.s.Vars[k]; ok {
			view[k] = v
		}
	}
	return mustJSON(view)
}

// ready publishes work for one attempt of a worker node (or of one item).
func (d *decider) ready(n *graph.Node, ref events.NodeRef, attempt int, local json.RawMessage, consumed, owed []int) {
	d.readyWith(n, ref, attempt, local, consumed, owed, d.input(n), nil)
}

// cleared is what an attempt has cleared before it is readied: the slot
// it waited for (held, when granted says the bucket granted it in this
// decision: it is not asked again), the rate limit whose turn came, what
// the attempt before it awaited (resume: await.go).
type cleared struct {
	slot    *events.SlotRef
	granted bool
	rate    *events.RateRef
	resume  json.RawMessage
}

// MaxWorkItemData is the most state a work item carries: its input (the
// node's view of the state) and its local data together. It stays under
// NATS's default max_payload (1 MiB) with room for the rest of the event,
// so that a work item fits any server's limit; a node whose view of the
// state is larger fails the run with a PayloadTooLarge error naming the
// node, the size and the limit, rather than a decision that can never be
// written.
const MaxWorkItemData = 1<<20 - 32<<10

// readyWith is ready with the node's input already encoded, for callers
// that ready many items of one node at once.
//
// A work item is small: what the node is (type, queue, the policy a worker
// applies: timeout, heartbeat, attempts, effect, outputs) and what it works
// on (the state view and local data). What the run's start already holds,
// the node's config and schemas (in the graph) and the invocation state, is
// not copied into every item: a worker reads the run's run-started event
// once per run (pkg/worker) and takes them from there. The decision's log
// position is not in the item either: the same decision, retried from a
// later state, must encode to the same bytes, since a duplicate is
// confirmed against the stored message.
//
// A node with a concurrency limit is readied only once its attempt holds a
// slot (flow.go): slot is the one it waited for, or nil to work it out;
// without one the attempt waits for it.
func (d *decider) readyWith(n *graph.Node, ref events.NodeRef, attempt int, local json.RawMessage, consumed, owed []int, input json.RawMessage, done *cleared) {
	if d.s.Status.Ended() { // a sibling item's failure ended the run
		return
	}
	slot, rate, ok := d.flowClears(n, ref, attempt, local, consumed, owed, done)
	if !ok {
		return
	}
	var resume json.RawMessage
	if done != nil {
		resume = done.resume
	}
	if d.tooLargeToReady(n, len(input)+len(local)) {
		return
	}
	p := &events.NodeReadyData{
		NodeRef:        ref,
		Attempt:        attempt,
		Type:           n.Type,
		Queue:          d.queueOf(n),
		Input:          input,
		Local:          local,
		IdempotencyKey: eventlog.IdempotencyKey(d.s.RunID, ref, attempt),
		StartSeq:       d.s.StartSeq,
		TimeoutMs:      n.Timeout.D().Milliseconds(),
		HeartbeatMs:    n.Heartbeat.D().Milliseconds(),
		MaxAttempts:    d.maxAttempts(n, ref),
		Effect:         string(n.Effect),
		Outputs:        n.Outputs,
		Consumed:       consumed,
		Owed:           owed,
		Slot:           slot,
		Rate:           rate,
		Resume:         resume,
	}
	d.emit(p, eventlog.DecisionID(d.s.RunID, events.NodeReady, ref.Key(), strconv.Itoa(attempt)))
}

// maxAttempts is the number of the last attempt activation ref may make
// by n's retry policy: its MaxAttempts, plus the attempts of the
// activation that ended awaiting (await.go), which were no failures.
func (d *decider) maxAttempts(n *graph.Node, ref events.NodeRef) int {
	m := policy(n).MaxAttempts
	if ns := d.s.Nodes[n.ID]; ns != nil && ref.Item == nil && ns.Iteration == ref.Iteration {
		m += ns.Awaits
	}
	return m
}

// flowClears is whether the node's rate and concurrency limits (flow.go)
// let this attempt be readied now, and the turn and slot it holds: done's,
// when it waited for them, else taken here. ok is false when the attempt
// is not readied now: it waits for a turn or a slot, or the run failed
// working out which.
// A map item's slot is taken before (readyItem, mapslots.go) and comes in
// done.
func (d *decider) flowClears(n *graph.Node, ref events.NodeRef, attempt int, local json.RawMessage, consumed, owed []int, done *cleared) (slot *events.SlotRef, rate *events.RateRef, ok bool) {
	if done != nil {
		slot, rate = done.slot, done.rate
	}
	if n.Rate != nil && ref.Item == nil && rate == nil {
		if rate, ok = d.takeTurn(n, ref, attempt, local, consumed, owed); !ok {
			return nil, nil, false
		}
	}
	if n.Concurrency == nil || ref.Item != nil || done != nil && done.granted {
		return slot, rate, true // no limit, or the slot granted in this decision
	}
	if slot == nil {
		if slot, ok = d.slotFor(n, local); !ok {
			return nil, nil, false
		}
	}
	granted, ok := d.admit(ref, attempt, slot)
	if !ok {
		return nil, nil, false
	}
	if !granted {
		d.waitForSlot(ref, attempt, slot, local, consumed, owed)
		return nil, nil, false
	}
	return slot, rate, true
}

// queueOf is the queue a node's work items go to: the coordinator's own
// for a node it runs, else the node's, else the default.
func (d *decider) queueOf(n *graph.Node) string {
	switch {
	case d.ev.IsLocal(n.ID):
		return events.LocalQueue // the coordinator runs it
	case n.Queue == "":
		return graph.DefaultQueue
	}
	return n.Queue
}

// tooLargeToReady fails the run when a work item of n would carry size
// bytes of state, more than MaxWorkItemData, and reports whether it did.
func (d *decider) tooLargeToReady(n *graph.Node, size int) bool {
	if size <= MaxWorkItemData {
		return false
	}
	d.failRun(events.Failure{
		Type:    events.FailurePayloadTooLarge,
		Message: fmt.Sprintf("node %q: its work item would carry %d bytes of state (input and local data), the limit is %d; declare the state keys it needs as its inputs, or keep large values out of the state", n.ID, size, MaxWorkItemData),
		Details: mustJSON(map[string]any{"node": n.ID, "size": size, "limit": MaxWorkItemData}),
	}, n.ID)
	return true
}

// mapItems readies a map node's items, up to its concurrency cap, and
// handles their failures and retries. The item list and the node's input
// are decoded and encoded once per call, not once per item.
func (d *decider) mapItems(n *graph.Node, ns *projection.NodeState) bool {
	// The input is encoded only when an item is readied: most calls (an
	// item finished, another is running) ready nothing.
	var input json.RawMessage
	full := map[string]bool{} // keys of the node's limit found full
	readyItem := func(i, attempt int) bool {
		if input == nil {
			input = d.input(n)
		}
		return d.readyItem(n, ns, i, attempt, input, full) // mapslots.go
	}
	active := 0
	for i, it := range ns.Items {
		switch it.Status {
		case projection.NodeRetryDue:
			if readyItem(i, it.Attempt+1) {
				return true
			}
		case projection.NodeFailed:
			return d.onFailure(n, ns, &i)
		case projection.NodeReady, projection.NodeRunning, projection.NodeRetrying:
			active++
		}
	}
	limit := n.Map.Concurrency
	did := false
	for i, it := range ns.Items {
		if limit > 0 && active >= limit {
			break
		}
		if it.Status == projection.NodeIdle && readyItem(i, 1) {
			active++
			did = true
		}
	}
	return did
}

func itemRef(n *graph.Node, ns *projection.NodeState, i int) events.NodeRef {
	idx := i
	return events.NodeRef{Node: n.ID, Iteration: ns.Iteration, Item: &idx}
}

// itemLocal is the local data of a map item: {"item": value, "index": i}.
func itemLocal(item json.RawMessage, i int) json.RawMessage {
	if item == nil {
		item = json.RawMessage("null")
	}
	return mustJSON(map[string]any{"item": item, "index": i})
}

// afterOutcome makes the decision a finished activation calls for.
func (d *decider) afterOutcome(n *graph.Node, ns *projection.NodeState) bool {
	switch ns.Status {
	case projection.NodeSucceeded, projection.NodeSkipped, projection.NodeCancelled:
		if ns.Routed < ns.Iteration {
			d.route(n, ns)
			return true
		}
	case projection.NodeFailed:
		if ns.Routed < ns.Iteration {
			if len(ns.Items) > 0 {
				for i, it := range ns.Items {
					if it.Status == projection.NodeFailed {
						return d.onFailure(n, ns, &i)
					}
				}
			}
			return d.onFailure(n, ns, nil)
		}
	case projection.NodeRetryDue:
		ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
		if ns.Resume != nil { // an await's wait is over (await.go)
			d.readyWith(n, ref, ns.Attempt+1, ns.Local, nil, nil, d.input(n), &cleared{resume: ns.Resume})
			return true
		}
		d.ready(n, ref, ns.Attempt+1, ns.Local, nil, nil)
		return true
	}
	return false
}
