package graph

import (
	"fmt"
	"time"

	wexpr "github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/graphrt"
)

// evaluator is a compiled graph's graphrt.Evaluator: the walking and
// evaluation the engine does, kept out of Graph's public methods (see
// package graphrt for what each method means).
type evaluator struct{ g *Graph }

// evalHandle embeds graphrt's Handle in Graph under an unexported name, so
// that graphrt.Of reaches a graph's evaluator and nothing else does.
type evalHandle = graphrt.Handle

func (e evaluator) Outgoing(id string) []int        { return e.g.out[id] }
func (e evaluator) Incoming(id string) []int        { return e.g.in[id] }
func (e evaluator) ForwardIncoming(id string) []int { return e.g.fwdIn[id] }
func (e evaluator) IsBackEdge(i int) bool           { return e.g.isBackEdge(i) }
func (e evaluator) IsLocal(id string) bool          { return e.g.local[id] }
func (e evaluator) MaxIterations(node string) int   { return e.g.maxIterations(node) }

func (e evaluator) EdgeTaken(i int, action string, env graphrt.Env) (bool, error) {
	return e.g.edgeTaken(i, action, env)
}

func (e evaluator) ShouldExecute(node string, env graphrt.Env) (bool, error) {
	return e.g.shouldExecute(node, env)
}

func (e evaluator) RouterActions(node string, env graphrt.Env) ([]string, error) {
	return e.g.routerActions(node, env)
}

func (e evaluator) MapItems(node string, env graphrt.Env) ([]any, error) {
	return e.g.mapItems(node, env)
}

func (e evaluator) WaitUntil(node string, env graphrt.Env, now time.Time) (time.Time, error) {
	return e.g.waitUntil(node, env, now)
}

func (e evaluator) RateKey(node string, env graphrt.Env) (string, int, error) {
	key, units := "", int64(1)
	if x := e.g.rateKey[node]; x != nil {
		k, err := x.evalString(env)
		if err != nil {
			return "", 0, fmt.Errorf("%w: node %q: rate.key: %w", ErrEvaluation, node, err)
		}
		key = k
	}
	if x := e.g.rateUnit[node]; x != nil {
		u, err := x.evalInt(env)
		if err != nil {
			return "", 0, fmt.Errorf("%w: node %q: rate.units: %w", ErrEvaluation, node, err)
		}
		units = u
	}
	return key, int(min(max(units, -1), 1<<40)), nil
}

func (e evaluator) ConcurrencyKey(node string, env graphrt.Env) (string, error) {
	x := e.g.flowKey[node]
	if x == nil {
		return "", nil
	}
	k, err := x.evalString(env)
	if err != nil {
		return "", fmt.Errorf("%w: node %q: concurrency.key: %w", ErrEvaluation, node, err)
	}
	return k, nil
}

// isBackEdge reports whether edge i closes a cycle: in a depth-first walk
// from START that follows edges in definition order, it leads to a node
// still on the walk's stack.
func (g *Graph) isBackEdge(i int) bool { return i >= 0 && i < len(g.back) && g.back[i] }

// maxIterations returns how often node may be activated in one run: the
// node's cap, else the graph's, else DefaultMaxIterations.
func (g *Graph) maxIterations(node string) int {
	if n, ok := g.Node(node); ok && n.MaxIterations > 0 {
		return n.MaxIterations
	}
	if g.def.MaxIterations > 0 {
		return g.def.MaxIterations
	}
	return DefaultMaxIterations
}

// edgeTaken reports whether edge i is taken after its source triggered
// action ("" means DefaultAction): the edge's action must match and its
// condition, if any, hold. Timeout edges are never taken here; the
// coordinator takes them when a human node's deadline passes.
func (g *Graph) edgeTaken(i int, action string, env graphrt.Env) (bool, error) {
	e := g.Edge(i)
	if e == nil {
		return false, fmt.Errorf("%w: edge %d", ErrUnknownNode, i)
	}
	if action == "" {
		action = DefaultAction
	}
	if e.Timeout || e.Action != action {
		return false, nil
	}
	c := g.cond[i]
	if c == nil {
		return true, nil
	}
	ok, err := c.evalBool(env)
	if m, missing := wexpr.IsMissingKey(err); missing {
		if e.OnMissing == OnMissingFalse {
			return false, nil
		}
		return false, fmt.Errorf("%w: edge %d (%s -> %s): %v: %s, or set onMissing: false on the edge to take a missing key as false", ErrEvaluation, i+1, e.From, e.To, m, m.Fix())
	}
	if err != nil {
		return false, fmt.Errorf("%w: edge %d (%s -> %s): %w", ErrEvaluation, i+1, e.From, e.To, err)
	}
	return ok, nil
}

// shouldExecute evaluates node's when; a node without one always executes.
func (g *Graph) shouldExecute(node string, env graphrt.Env) (bool, error) {
	if _, ok := g.nodes[node]; !ok {
		return false, fmt.Errorf("%w: node %q", ErrUnknownNode, node)
	}
	w := g.when[node]
	if w == nil {
		return true, nil
	}
	ok, err := w.evalBool(env)
	if m, missing := wexpr.IsMissingKey(err); missing {
		return false, fmt.Errorf("%w: node %q: when: %v: %s", ErrEvaluation, node, m, m.Fix())
	}
	if err != nil {
		return false, fmt.Errorf("%w: node %q: when: %w", ErrEvaluation, node, err)
	}
	return ok, nil
}

// routerActions evaluates a router node's routes (config {"routes":
// [{"when": CEL, "action": NAME}, ...], "default": NAME}) in order and
// returns the action of the first whose condition holds, else the
// default, else nil (the node triggers DefaultAction and its edges'
// conditions choose).
func (g *Graph) routerActions(node string, env graphrt.Env) ([]string, error) {
	if _, ok := g.nodes[node]; !ok {
		return nil, fmt.Errorf("%w: node %q", ErrUnknownNode, node)
	}
	r := g.routes[node]
	if r == nil {
		return nil, nil
	}
	for k, rt := range r.routes {
		ok, err := rt.when.evalBool(env)
		if err != nil {
			return nil, fmt.Errorf("%w: node %q: config.routes[%d].when: %w", ErrEvaluation, node, k, err)
		}
		if ok {
			return []string{rt.action}, nil
		}
	}
	if r.def != "" {
		return []string{r.def}, nil
	}
	return nil, nil
}

// mapItems evaluates node's map.over, giving the items to fan out over as
// plain JSON-like values.
func (g *Graph) mapItems(node string, env graphrt.Env) ([]any, error) {
	if _, ok := g.nodes[node]; !ok {
		return nil, fmt.Errorf("%w: node %q", ErrUnknownNode, node)
	}
	m := g.mapOver[node]
	if m == nil {
		return nil, fmt.Errorf("%w: node %q has no map", ErrEvaluation, node)
	}
	items, err := m.evalList(env)
	if err != nil {
		return nil, fmt.Errorf("%w: node %q: map.over: %w", ErrEvaluation, node, err)
	}
	return items, nil
}
