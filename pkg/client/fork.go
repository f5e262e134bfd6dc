package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// ErrIncompatibleGraph means a fork's graph lacks a node or an edge the
// run's state at the fork point refers to.
var ErrIncompatibleGraph = errors.New("graph incompatible with the run's state")

// ErrNodeNeverRan means Reset was asked to reset to a node that the run
// never activated.
var ErrNodeNeverRan = errors.New("node never ran")

// ForkOption configures Fork and Reset.
type ForkOption func(*forkOptions)

type forkOptions struct {
	runID       string
	graph       *graph.Graph
	state       json.RawMessage
	set         map[string]any
	invocation  json.RawMessage
	invSet      map[string]any
	replaceInv  bool
	replaceVars bool
	reason      string
}

// WithForkRunID gives the forked run an id instead of a new one (see
// WithRunID).
func WithForkRunID(id string) ForkOption { return func(o *forkOptions) { o.runID = id } }

// WithForkGraph runs the fork with g instead of the parent's graph. g must
// have every node the state at the fork point refers to, and the same
// edges (by index, from and to) for the edge signals pending there; else
// Fork fails with ErrIncompatibleGraph.
func WithForkGraph(g *graph.Graph) ForkOption { return func(o *forkOptions) { o.graph = g } }

// SetState sets one key of the fork's shared state to v (any JSON value;
// json.RawMessage and []byte are taken as JSON text).
func SetState(key string, v any) ForkOption {
	return func(o *forkOptions) {
		if o.set == nil {
			o.set = map[string]any{}
		}
		o.set[key] = v
	}
}

// ReplaceState replaces the fork's shared state with v, a JSON object;
// SetState options apply on top of it.
func ReplaceState(v any) ForkOption {
	return func(o *forkOptions) { o.state, o.replaceVars = toRaw(v), true }
}

// SetInvocation sets one key of the fork's invocation state.
func SetInvocation(key string, v any) ForkOption {
	return func(o *forkOptions) {
		if o.invSet == nil {
			o.invSet = map[string]any{}
		}
		o.invSet[key] = v
	}
}

// ReplaceInvocation replaces the fork's invocation state with v, a JSON
// object; SetInvocation options apply on top of it.
func ReplaceInvocation(v any) ForkOption {
	return func(o *forkOptions) { o.invocation, o.replaceInv = toRaw(v), true }
}

// withReason records why the run was forked (Reset's "reset to node b").
func withReason(r string) ForkOption { return func(o *forkOptions) { o.reason = r } }

// toRaw keeps JSON text as it is and encodes anything else, leaving the
// errors to jsonObject.
func toRaw(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return x
	case []byte:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error())) // reported as not an object
	}
	return b
}

// Fork starts a new run from the state of run runID after the event at
// position pos (1-based, see Events) and returns the new run's id.
//
// The new run's run-started event carries everything it needs: the graph
// (the parent's, or WithForkGraph's), the invocation state, a reference to
// the parent run and position (events.ForkRef), and the parent's folded
// state at pos with the fork's edits (projection.ForkState says what
// changes: nodes that were ready or running at pos run again, completed
// ones do not). The coordinator then decides from that state, as for any
// run.
//
// The start state travels in that one event: a fork whose state does not
// fit the server's largest message (its max_payload) fails with
// events.ErrPayloadTooLarge.
//
// Nothing is written when the position is out of range
// (ErrNoSuchPosition), an edit is not JSON or not an object
// (ErrInvalidInput), the graph is incompatible with the state
// (ErrIncompatibleGraph), a node waits for a child run at pos
// (projection.ErrForkChild), or the state does not pass the checks the
// engine makes before it believes a fork's state
// (projection.ErrInvalidForkState, a *projection.ForkStateError listing
// each problem by node and field: a router caught between its two
// decisions at pos, say).
func (c *Client) Fork(ctx context.Context, runID string, pos int, opts ...ForkOption) (string, error) {
	var o forkOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !eventlog.ValidToken(runID) {
		return "", fmt.Errorf("forking run %s: run id %q: %w", runID, runID, events.ErrInvalidID)
	}
	evs, err := c.foldable(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("forking run %s: %w", runID, err)
	}
	return c.fork(ctx, runID, evs, pos, &o)
}

func (c *Client) fork(ctx context.Context, runID string, evs []*events.Event, pos int, o *forkOptions) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("forking run %s at position %d: %w", runID, pos, err)
	}
	if err := checkPosition(runID, pos, len(evs)); err != nil {
		return "", fmt.Errorf("forking run %s: %w", runID, err)
	}
	at := projection.Fold(evs[:pos])
	if at.Status == projection.RunPending {
		return fail(errors.New("the run has not started at that position"))
	}
	g, st, err := forkGraphState(runID, at, o)
	if err != nil {
		return fail(err)
	}
	invocation, err := editObject("invocation", at.Invocation, o.invocation, o.replaceInv, o.invSet)
	if err != nil {
		return fail(err)
	}
	newID, err := runIDOf(o.runID)
	if err != nil {
		return fail(err)
	}
	data := &events.RunStartedData{
		GraphName:   g.Definition().Name,
		GraphDigest: g.Digest(),
		Graph:       g.Canonical(),
		Invocation:  invocation,
		StartedBy:   c.identity,
		Fork:        &events.ForkRef{RunID: runID, Position: pos, Seq: evs[pos-1].Seq, Reason: o.reason},
		State:       st.Marshal(),
		Nonce:       events.NewNonce(),
	}
	ev, err := events.New(newID, newID, time.Time{}, data)
	if err != nil {
		return fail(err)
	}
	// The fork is a run of its own, in a trace of its own (or the
	// caller's), linked to the parent run's.
	ctx = telemetry.WithProviders(ctx, c.providers)
	ctx, span := telemetry.StartRun(ctx, newID, g.Definition().Name, ev.Subject(), forkLinks(evs[0], runID)...)
	defer span.End()
	telemetry.Inject(ctx, ev)
	if _, err := c.store.LastSeq(ctx, newID); err == nil {
		return fail(fmt.Errorf("run %s: %w", newID, events.ErrRunExists))
	} else if !errors.Is(err, events.ErrRunNotFound) {
		return fail(err)
	}
	if _, err := c.append(ctx, newID, 0, ev); err != nil {
		telemetry.Fail(span, err)
		return fail(fmt.Errorf("starting run %s: %w", newID, err))
	}
	c.log.DebugContext(ctx, "run forked", logattr.RunID, newID, logattr.Parent, runID, logattr.Position, pos)
	return newID, nil
}

// forkGraphState is the graph and the start state of a fork of run runID
// from its state at the fork's position: the run's graph or the one the
// options give (which must fit the state), with the options' edits made,
// checked as the coordinator will check it before it believes the state
// (the fold refuses a fork state that does not fit its graph, and the run
// fails with the problems): said here, and nothing written.
func forkGraphState(runID string, at *projection.State, o *forkOptions) (*graph.Graph, *projection.State, error) {
	st, err := projection.ForkState(at)
	if err != nil {
		return nil, nil, err
	}
	g := o.graph
	if g == nil {
		g, err = graph.Parse(at.Graph, "run "+runID, graph.AllowAnyType())
		if err != nil {
			return nil, nil, fmt.Errorf("the run's graph: %w", err)
		}
	} else if err := compatible(g, st); err != nil {
		return nil, nil, err
	}
	if err := editState(st, o); err != nil {
		return nil, nil, err
	}
	if err := projection.CheckForkState(g.Canonical(), st); err != nil {
		return nil, nil, err
	}
	return g, st, nil
}

// forkLinks links a fork's trace to its parent run's, whose run-started is
// first.
func forkLinks(first *events.Event, runID string) []trace.Link {
	sc := telemetry.SpanContextOf(first)
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc, Attributes: []attribute.KeyValue{telemetry.AttrForkOf.String(runID)}}}
}

// editState applies a fork's state edits to its start state.
func editState(st *projection.State, o *forkOptions) error {
	cur, err := json.Marshal(st.Vars)
	if err != nil {
		return err
	}
	vars, err := editObject("state", cur, o.state, o.replaceVars, o.set)
	if err != nil {
		return err
	}
	st.Vars = nil
	if len(vars) > 0 {
		if err := json.Unmarshal(vars, &st.Vars); err != nil {
			return err
		}
		if len(st.Vars) == 0 {
			st.Vars = nil
		}
	}
	return nil
}

// editObject returns cur, or replacement when replace is set, with the
// keys of set set: a compact JSON object, or nil when empty.
func editObject(what string, cur, replacement json.RawMessage, replace bool, set map[string]any) (json.RawMessage, error) {
	base := cur
	if replace {
		r, err := jsonObject(what, replacement)
		if err != nil {
			return nil, err
		}
		base = r
	}
	if len(set) == 0 {
		return base, nil
	}
	m := map[string]json.RawMessage{}
	if len(base) > 0 && string(base) != "null" {
		if err := json.Unmarshal(base, &m); err != nil {
			return nil, fmt.Errorf("%w: %s is not a JSON object: %v", ErrInvalidInput, what, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if k == "" {
			return nil, fmt.Errorf("%w: %s: an empty key", ErrInvalidInput, what)
		}
		v, err := jsonData(set[k])
		if err != nil || v == nil {
			return nil, fmt.Errorf("%w: %s key %q: the value is not JSON", ErrInvalidInput, what, k)
		}
		m[k] = v
	}
	return json.Marshal(m)
}

// compatible checks that g can run a run in state s: every node the state
// has a record of, or signals pending for, is a node of g, and every
// pending edge signal (and every edge an activation still owes a signal
// on) names an edge of g with the same index, source and target. The error
// wraps ErrIncompatibleGraph and lists every problem.
func compatible(g *graph.Graph, s *projection.State) error {
	var probs []string
	for _, id := range slices.Sorted(maps.Keys(s.Nodes)) {
		if _, ok := g.Node(id); !ok {
			probs = append(probs, fmt.Sprintf("node %q (%s in the run) is not in graph %q", id, orIdleStatus(s.Nodes[id].Status), g.Definition().Name))
		}
	}
	for _, to := range slices.Sorted(maps.Keys(s.Pending)) {
		if _, ok := g.Node(to); !ok {
			probs = append(probs, fmt.Sprintf("node %q has edge signals pending but is not in graph %q", to, g.Definition().Name))
			continue
		}
		for _, sig := range s.Pending[to] {
			e := g.Edge(sig.Edge)
			if e == nil || e.To != to {
				probs = append(probs, fmt.Sprintf("edge %d (to %q) has a signal pending; in graph %q it %s", sig.Edge, to, g.Definition().Name, edgeSays(e)))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Nodes)) {
		for _, i := range s.Nodes[id].Owed {
			if e := g.Edge(i); e == nil || e.To != id {
				probs = append(probs, fmt.Sprintf("edge %d (to %q) owes node %q a signal; in graph %q it %s", i, id, id, g.Definition().Name, edgeSays(e)))
			}
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncompatibleGraph, strings.Join(probs, "; "))
}

func edgeSays(e *graph.Edge) string {
	if e == nil {
		return "does not exist"
	}
	return fmt.Sprintf("goes %s -> %s", e.From, e.To)
}

func orIdleStatus(s projection.NodeStatus) string {
	if s == "" {
		return "idle"
	}
	return string(s)
}

// ResetTarget says where Reset forks from: just before Node was last
// activated, or after the event at Position.
type ResetTarget struct {
	Node     string
	Position int
}

// Reset ends run runID and forks it, the way Temporal's reset does: from
// just before the node target.Node was last activated (its last
// activation's first node-ready, or its waiting or skipped decision), or
// from after the event at target.Position. The run, if it has not ended,
// is then cancelled with the reason "reset to …, new run X", which its
// log records. It returns the new run's id. ForkOption edits apply to the
// fork.
//
// A node the graph does not have wraps graph.ErrUnknownNode; a node that
// never ran wraps ErrNodeNeverRan; nothing is written then.
func (c *Client) Reset(ctx context.Context, runID string, target ResetTarget, opts ...ForkOption) (string, error) {
	if (target.Node == "") == (target.Position == 0) {
		return "", fmt.Errorf("resetting run %s: give a node or a position, not both or neither", runID)
	}
	if !eventlog.ValidToken(runID) {
		return "", fmt.Errorf("resetting run %s: run id %q: %w", runID, runID, events.ErrInvalidID)
	}
	evs, err := c.foldable(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("resetting run %s: %w", runID, err)
	}
	pos, what := target.Position, fmt.Sprintf("position %d", target.Position)
	if target.Node != "" {
		p, err := lastActivation(evs, target.Node)
		if err != nil {
			return "", fmt.Errorf("resetting run %s: %w", runID, err)
		}
		pos, what = p-1, fmt.Sprintf("node %s (activated at position %d)", target.Node, p)
	}
	var o forkOptions
	for _, opt := range append(opts, withReason("reset to "+what)) {
		opt(&o)
	}
	newID, err := c.fork(ctx, runID, evs, pos, &o)
	if err != nil {
		return "", fmt.Errorf("resetting run %s: %w", runID, err)
	}
	if st := projection.Fold(evs); !st.Status.Ended() {
		err := c.Cancel(ctx, runID, fmt.Sprintf("reset to %s, new run %s", what, newID))
		if err != nil && !errors.Is(err, ErrRunEnded) {
			return newID, fmt.Errorf("resetting run %s: forked as %s, but cancelling it failed: %w", runID, newID, err)
		}
	}
	return newID, nil
}

// lastActivation returns the position of the event that began node's last
// activation: the first of its decisions (ready, waiting or skipped, not
// of a map item) that counted for the highest iteration.
func lastActivation(evs []*events.Event, node string) (int, error) {
	s := &projection.State{}
	pos, iter := 0, 0
	for i, e := range evs {
		counted := s.Apply(e) == nil
		if !counted || e.NodeID != node {
			continue
		}
		p, err := e.Payload()
		if err != nil {
			continue
		}
		var ref events.NodeRef
		switch d := p.(type) {
		case *events.NodeReadyData:
			ref = d.NodeRef
		case *events.NodeWaitingData:
			ref = d.NodeRef
		case *events.NodeSkippedData:
			ref = d.NodeRef
		default:
			continue
		}
		if ref.Item == nil && ref.Iteration > iter {
			pos, iter = i+1, ref.Iteration
		}
	}
	if pos > 0 {
		return pos, nil
	}
	st := projection.Fold(evs)
	nodes, err := nodeIDs(st.Graph)
	if err == nil && !slices.Contains(nodes, node) {
		return 0, fmt.Errorf("%w: graph %q has no node %q (its nodes: %s)", graph.ErrUnknownNode, st.GraphName, node, strings.Join(nodes, ", "))
	}
	return 0, fmt.Errorf("%w: node %q was never activated in run %s", ErrNodeNeverRan, node, st.RunID)
}
