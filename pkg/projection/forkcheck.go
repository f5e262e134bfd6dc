package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/pkg/events"
)

// ErrInvalidForkState is wrapped by the error of a fork's start state that
// does not fit the graph the fork runs (a ForkStateError).
var ErrInvalidForkState = errors.New("invalid fork state")

// ForkProblem is one way a fork's start state does not fit its graph:
// where (the node, and the field of its state) and what is wrong.
type ForkProblem struct {
	// Node is the node whose state is wrong; empty for the run's own
	// fields (pending edge signals, timers, buffered signals).
	Node string `json:"node,omitempty"`
	// Field is the field of the node's state ("status", "attempt",
	// "items[2].status"), or of the run's ("timers[retry-b-1-2]",
	// "pending[b][0]").
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p ForkProblem) String() string {
	if p.Node != "" {
		return fmt.Sprintf("node %q: %s: %s", p.Node, p.Field, p.Message)
	}
	return p.Field + ": " + p.Message
}

// ForkStateError lists every problem of a fork's start state (see
// CheckForkState). It wraps ErrInvalidForkState.
type ForkStateError struct {
	Problems []ForkProblem
}

func (e *ForkStateError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s (%d problem(s)): %s", ErrInvalidForkState, len(e.Problems), strings.Join(parts, "; "))
}

// Unwrap returns ErrInvalidForkState.
func (e *ForkStateError) Unwrap() error { return ErrInvalidForkState }

// forkGraph is what CheckForkState reads of a graph's JSON: its nodes'
// ids, kinds and caps, and its edges by index. The canonical JSON a
// run-started carries (graph.Canonical) holds every default resolved; a
// cap missing from a graph written by hand is not checked here (the
// engine holds it when it acts).
type forkGraph struct {
	MaxIterations int `json:"maxIterations"`
	Nodes         []struct {
		ID            string          `json:"id"`
		Type          string          `json:"type"`
		Map           json.RawMessage `json:"map"`
		MaxIterations int             `json:"maxIterations"`
		Retry         *struct {
			MaxAttempts int `json:"maxAttempts"`
		} `json:"retry"`
	} `json:"nodes"`
	Edges []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"edges"`
}

// forkNode is one node of a forkGraph, with its caps (0: not known).
type forkNode struct {
	kind          string // "human", "router", "subgraph", "wait", "map" or "" (a worker's or local node)
	maxIterations int
	maxAttempts   int
}

// Node kinds a fork's state is checked against (pkg/graph's types).
const (
	kindHuman    = "human"
	kindRouter   = "router"
	kindSubgraph = "subgraph"
	kindMap      = "map"
	kindWait     = "wait"
)

// CheckForkState checks a fork's start state (what events.RunStartedData
// State carries: ForkState's result, with the fork's edits) against the
// graph the fork runs, given as its JSON (events.RunStartedData.Graph),
// as the engine checks a decision of its own: the state must be one that
// deciding from the graph can lead to, and one the engine can carry on
// from. It returns nil, or a ForkStateError listing every problem, each
// located (node, field):
//
//   - every node it has a record of, pending signals for or buffered
//     signals for is a node of the graph; every pending edge signal and
//     every owed edge names an edge of the graph (by index) into its node;
//   - node statuses are statuses, iterations are at least 1 and within
//     the node's iteration cap, attempts within its retry policy, routings
//     not ahead of the activation;
//   - no node (nor map item) is ready or running: in a new run there is
//     no work item for it (ForkState makes such attempts due again);
//   - a node waits only for what its kind waits for: a human node for a
//     signal, a map node for its items; never for a child run (it would
//     report to the run that started it, not to the fork) nor as a router
//     between its two decisions; items belong to map nodes only;
//   - timers are retries, human deadlines and waits only (timeouts and heartbeats
//     are armed anew when a worker takes the work), each of a node (or
//     item) at its current activation that is backing off, or waiting for
//     a signal until that deadline (or, a wait node, for its timer),
//     under the id the engine gives it; and every node backing off has
//     its retry timer, every deadline and wait its timer, so nothing
//     waits forever;
//   - buffered signals are within MaxBufferedSignals and
//     MaxBufferedSignalsPerRun;
//   - no child run's end is kept for a node's wait to come
//     (EarlyChildEnds).
//
// The fold runs it on every forked run-started (a fork's state is written
// by a client, and is believed only once checked): a state that fails is
// not taken, and the engine fails the run with the problems
// (State.ForkRefused). pkg/client runs it before writing a fork.
func CheckForkState(graphJSON json.RawMessage, st *State) error {
	var g forkGraph
	if err := json.Unmarshal(graphJSON, &g); err != nil {
		return &ForkStateError{Problems: []ForkProblem{{Field: "graph", Message: "not a graph: " + err.Error()}}}
	}
	c := &forkCheck{g: &g, nodes: map[string]forkNode{}}
	for _, n := range g.Nodes {
		fn := forkNode{maxIterations: n.MaxIterations, kind: n.Type}
		if fn.maxIterations == 0 {
			fn.maxIterations = g.MaxIterations
		}
		if n.Retry != nil {
			fn.maxAttempts = n.Retry.MaxAttempts
		}
		switch {
		case len(n.Map) > 0 && string(n.Map) != "null":
			fn.kind = kindMap
		case n.Type != kindHuman && n.Type != kindRouter && n.Type != kindSubgraph && n.Type != kindWait:
			fn.kind = ""
		}
		c.nodes[n.ID] = fn
	}
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		c.node(id, st.Nodes[id])
	}
	c.pending(st)
	c.timers(st)
	c.signals(st)
	if len(st.EarlyChildEnds) > 0 {
		// They are the ends of child runs the run that was forked started.
		c.add("", "earlyChildEnds", "a fork starts no child run before its first decision: no child's end can have come")
	}
	if len(c.probs) == 0 {
		return nil
	}
	return &ForkStateError{Problems: c.probs}
}

type forkCheck struct {
	g     *forkGraph
	nodes map[string]forkNode
	probs []ForkProblem
}

func (c *forkCheck) add(node, field, format string, args ...any) {
	c.probs = append(c.probs, ForkProblem{Node: node, Field: field, Message: fmt.Sprintf(format, args...)})
}

// known reports whether id is a node of the graph, adding a problem if not.
func (c *forkCheck) known(id, field string) (forkNode, bool) {
	fn, ok := c.nodes[id]
	if !ok {
		c.add(id, field, "the graph has no such node")
	}
	return fn, ok
}

var nodeStatuses = []NodeStatus{NodeIdle, NodeReady, NodeRunning, NodeWaiting, NodeRetrying, NodeRetryDue, NodeSucceeded, NodeFailed, NodeSkipped, NodeCancelled}

// waitsFor is the kind of node that waits for each WaitingFor.
var waitsFor = map[string]string{"signal": kindHuman, "map": kindMap, "child": kindSubgraph, "router": kindRouter, WaitingForTimer: kindWait}

func (c *forkCheck) node(id string, n *NodeState) {
	fn, ok := c.known(id, "node")
	if !ok {
		return
	}
	c.status(id, "status", n.Status)
	if n.Status != NodeIdle || n.Iteration != 0 {
		if n.Iteration < 1 {
			c.add(id, "iteration", "%d: an activation is numbered from 1", n.Iteration)
		} else if fn.maxIterations > 0 && n.Iteration > fn.maxIterations {
			c.add(id, "iteration", "%d: past the node's iteration cap of %d", n.Iteration, fn.maxIterations)
		}
	}
	if n.Routed < 0 || n.Routed > n.Iteration {
		c.add(id, "routed", "%d: not an activation of the node (its iteration is %d)", n.Routed, n.Iteration)
	}
	c.attempt(id, "attempt", n.Attempt, fn)
	if n.Delivery < 0 || n.Executions < 0 {
		c.add(id, "delivery", "delivery %d, executions %d: counts are never negative", n.Delivery, n.Executions)
	}
	c.waiting(id, n, fn)
	if n.Child != "" && fn.kind != kindSubgraph {
		c.add(id, "child", "%q: only a subgraph node starts a child run", n.Child)
	}
	c.items(id, n, fn)
	for j, e := range n.Owed {
		c.edge(id, "owed["+strconv.Itoa(j)+"]", e, id)
	}
}

// waiting checks what a node waits for: something its kind waits for, and
// something a fork can wait for.
func (c *forkCheck) waiting(id string, n *NodeState, fn forkNode) {
	if want, ok := waitsFor[n.WaitingFor]; n.WaitingFor != "" && (!ok || want != fn.kind) {
		c.add(id, "waitingFor", "%q: a %s node never waits for that", n.WaitingFor, kindName(fn.kind))
	}
	if n.Status != NodeWaiting {
		return
	}
	switch n.WaitingFor {
	case "child":
		c.add(id, "waitingFor", "waits for child run %q: a child run reports to the run that started it, not to a fork (fork from before the node was activated)", n.Child)
	case "router":
		c.add(id, "waitingFor", "a router waits only between its two decisions (fork from before or after them)")
	case "":
		c.add(id, "waitingFor", "waiting, for nothing")
	}
}

// items checks a map node's items.
func (c *forkCheck) items(id string, n *NodeState, fn forkNode) {
	if len(n.Items) > 0 && fn.kind != kindMap {
		c.add(id, "items", "%d item(s): only a map node has items", len(n.Items))
	}
	for i, it := range n.Items {
		if it == nil {
			continue
		}
		f := "items[" + strconv.Itoa(i) + "]."
		c.status(id, f+"status", it.Status)
		c.attempt(id, f+"attempt", it.Attempt, fn)
		if it.Delivery < 0 {
			c.add(id, f+"delivery", "%d: never negative", it.Delivery)
		}
	}
}

// status checks a node's (or item's) status: a status, and not one that
// needs a work item the new run does not have.
func (c *forkCheck) status(id, field string, s NodeStatus) {
	switch {
	case !slices.Contains(nodeStatuses, s):
		c.add(id, field, "%q is not a node status", s)
	case s == NodeReady || s == NodeRunning:
		c.add(id, field, "%s: a forked run has no work item for it (a fork makes such an attempt due again)", s)
	}
}

func (c *forkCheck) attempt(id, field string, attempt int, fn forkNode) {
	switch {
	case attempt < 0:
		c.add(id, field, "%d: never negative", attempt)
	case fn.maxAttempts > 0 && attempt > fn.maxAttempts:
		c.add(id, field, "%d: past the node's retry policy of %d attempt(s)", attempt, fn.maxAttempts)
	}
}

// edge checks that edge i of the graph goes into node to.
func (c *forkCheck) edge(node, field string, i int, to string) {
	switch {
	case i < 0 || i >= len(c.g.Edges):
		c.add(node, field, "edge %d: the graph has edges 0 to %d", i, len(c.g.Edges)-1)
	case c.g.Edges[i].To != to:
		c.add(node, field, "edge %d goes %s -> %s, not into %q", i, c.g.Edges[i].From, c.g.Edges[i].To, to)
	}
}

// pending checks the edge signals routed and not yet used up.
func (c *forkCheck) pending(st *State) {
	for _, to := range slices.Sorted(maps.Keys(st.Pending)) {
		field := "pending[" + to + "]"
		if _, ok := c.nodes[to]; !ok {
			c.add("", field, "signals pending for %q, which the graph does not have", to)
			continue
		}
		for j, sig := range st.Pending[to] {
			f := field + "[" + strconv.Itoa(j) + "]"
			c.edge("", f, sig.Edge, to)
			if sig.To != to {
				c.add("", f, "a signal to %q queued for %q", sig.To, to)
			}
		}
	}
}

// timers checks the pending timers, both ways: each is one the engine
// would have asked for, and each node that waits on a timer has it.
func (c *forkCheck) timers(st *State) {
	for _, id := range slices.Sorted(maps.Keys(st.Timers)) {
		c.timer(st, id, st.Timers[id])
	}
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		if _, ok := c.nodes[id]; ok {
			c.nodeTimers(st, id, st.Nodes[id])
		}
	}
}

// nodeTimers checks that node id, if it waits on a timer (a retry of it
// or of one of its items, a signal's deadline, a wait), has it pending.
func (c *forkCheck) nodeTimers(st *State, id string, n *NodeState) {
	ref := events.NodeRef{Node: id, Iteration: n.Iteration}
	c.retryTimers(st, id, ref, n)
	if n.Status == NodeWaiting && n.WaitingFor == "signal" && n.Deadline != nil {
		if _, ok := st.Timers[DeadlineTimerID(ref)]; !ok {
			c.add(id, "deadline", "no deadline timer %q pending: the deadline would never pass", DeadlineTimerID(ref))
		}
	}
	if n.Status == NodeWaiting && n.WaitingFor == WaitingForTimer && c.nodes[id].kind == kindWait {
		if _, ok := st.Timers[WaitTimerID(ref)]; !ok || n.Deadline == nil {
			c.add(id, "deadline", "no wait timer %q pending: the wait would never end", WaitTimerID(ref))
		}
	}
}

// retryTimers checks that node id, if it or one of its items is
// retrying, has the timer for the next attempt pending.
func (c *forkCheck) retryTimers(st *State, id string, ref events.NodeRef, n *NodeState) {
	if n.Status == NodeRetrying && len(n.Items) == 0 {
		if _, ok := st.Timers[RetryTimerID(ref, n.Attempt+1)]; !ok {
			c.add(id, "status", "retrying, with no retry timer %q pending: it would wait forever", RetryTimerID(ref, n.Attempt+1))
		}
	}
	for i, it := range n.Items {
		if it != nil && it.Status == NodeRetrying {
			r := ref
			r.Item = &i
			if _, ok := st.Timers[RetryTimerID(r, it.Attempt+1)]; !ok {
				c.add(id, "items["+strconv.Itoa(i)+"].status", "retrying, with no retry timer %q pending: it would wait forever", RetryTimerID(r, it.Attempt+1))
			}
		}
	}
}

func (c *forkCheck) timer(st *State, id string, t Timer) {
	field := "timers[" + id + "]"
	n := st.Nodes[t.Ref.Node]
	if _, ok := c.nodes[t.Ref.Node]; !ok || n == nil {
		c.add("", field, "a timer of node %q, which has no activation in the state", t.Ref.Node)
		return
	}
	if t.Ref.Iteration != n.Iteration {
		c.add(t.Ref.Node, field, "a timer of activation %d; the node is at %d", t.Ref.Iteration, n.Iteration)
		return
	}
	switch t.Purpose {
	case "retry":
		c.retryTimer(id, field, t, n)
	case "deadline":
		c.deadlineTimer(id, field, t, n)
	case PurposeWait:
		c.waitTimer(id, field, t, n)
	case PurposeTimeout, PurposeHeartbeat:
		c.add(t.Ref.Node, field, "a %s timer: a fork arms timeouts anew when a worker takes the work", t.Purpose)
	default:
		c.add(t.Ref.Node, field, "%q is not a timer purpose (retry, deadline, wait)", t.Purpose)
	}
}

// retryTimer checks a retry timer: of an attempt that is retrying, as the
// attempt after it, under its own id.
func (c *forkCheck) retryTimer(id, field string, t Timer, n *NodeState) {
	status, attempt := n.Status, n.Attempt
	if t.Ref.Item != nil {
		i := *t.Ref.Item
		if i < 0 || i >= len(n.Items) || n.Items[i] == nil {
			c.add(t.Ref.Node, field, "a retry of item %d, which the node does not have", i)
			return
		}
		status, attempt = n.Items[i].Status, n.Items[i].Attempt
	}
	switch {
	case status != NodeRetrying:
		c.add(t.Ref.Node, field, "a retry timer of an attempt that is %s, not retrying", orIdle(status))
	case t.Attempt != attempt+1:
		c.add(t.Ref.Node, field, "retries as attempt %d; attempt %d failed", t.Attempt, attempt)
	case id != RetryTimerID(t.Ref, t.Attempt):
		c.add(t.Ref.Node, field, "the retry's timer is %q", RetryTimerID(t.Ref, t.Attempt))
	}
}

// waitTimer checks a wait node's timer: of a node waiting for its time,
// at that time, under its own id.
func (c *forkCheck) waitTimer(id, field string, t Timer, n *NodeState) {
	switch {
	case t.Ref.Item != nil:
		c.add(t.Ref.Node, field, "a wait of a map item")
	case n.Status != NodeWaiting || n.WaitingFor != WaitingForTimer:
		c.add(t.Ref.Node, field, "a wait timer of a node that is %s, not waiting for a timer", orIdle(n.Status))
	case n.Deadline == nil || !n.Deadline.Equal(t.At):
		c.add(t.Ref.Node, field, "a wait until %s; the node's is %v", t.At.Format("2006-01-02T15:04:05.999Z07:00"), n.Deadline)
	case id != WaitTimerID(t.Ref):
		c.add(t.Ref.Node, field, "the wait's timer is %q", WaitTimerID(t.Ref))
	}
}

// deadlineTimer checks a human node's deadline timer: of a node waiting
// for a signal, at its deadline, under its own id.
func (c *forkCheck) deadlineTimer(id, field string, t Timer, n *NodeState) {
	switch {
	case t.Ref.Item != nil:
		c.add(t.Ref.Node, field, "a deadline of a map item")
	case n.Status != NodeWaiting || n.WaitingFor != "signal":
		c.add(t.Ref.Node, field, "a deadline of a node that is %s, not waiting for a signal", orIdle(n.Status))
	case n.Deadline == nil || !n.Deadline.Equal(t.At):
		c.add(t.Ref.Node, field, "a deadline at %s; the node's is %v", t.At.Format("2006-01-02T15:04:05.999Z07:00"), n.Deadline)
	case id != DeadlineTimerID(t.Ref):
		c.add(t.Ref.Node, field, "the deadline's timer is %q", DeadlineTimerID(t.Ref))
	}
}

// signals checks the signals buffered for nodes that did not wait yet.
func (c *forkCheck) signals(st *State) {
	total := 0
	for _, id := range slices.Sorted(maps.Keys(st.Signals)) {
		field := "signals[" + id + "]"
		if _, ok := c.nodes[id]; !ok {
			c.add("", field, "signals buffered for %q, which the graph does not have", id)
		}
		if n := len(st.Signals[id]); n > MaxBufferedSignals {
			c.add("", field, "%d signals buffered; at most %d per node", n, MaxBufferedSignals)
		}
		total += len(st.Signals[id])
	}
	if total > MaxBufferedSignalsPerRun {
		c.add("", "signals", "%d signals buffered; at most %d per run", total, MaxBufferedSignalsPerRun)
	}
}

// RetryTimerID is the id of the durable timer after which attempt of the
// activation (or map item) ref runs: the retry-scheduled event that asks
// for it records it under this id.
func RetryTimerID(ref events.NodeRef, attempt int) string {
	id := "retry-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
	if ref.Item != nil {
		id += "-" + strconv.Itoa(*ref.Item)
	}
	return id + "-" + strconv.Itoa(attempt)
}

func kindName(k string) string {
	if k == "" {
		return "worker"
	}
	return k
}
