// Package graphrt is the engine's side of a compiled graph: the evaluation
// methods of a *graph.Graph that the coordinator's decider (internal/decider),
// the coordinator and the UI call, and that graph authors and validators do
// not. Package graph stays what a user reads and writes (definitions,
// loading, the Builder, validation); how a compiled graph is walked and its
// expressions evaluated is here.
//
// Of gives a graph's Evaluator:
//
//	ev := graphrt.Of(g) // g is a *graph.Graph
//	for _, i := range ev.Outgoing(graph.Start) {
//		taken, err := ev.EdgeTaken(i, graph.DefaultAction, graphrt.Env{State: state})
//		...
//	}
//
// The seam has no hook to set: package graph embeds a Handle in its Graph
// (as an unexported field), so only a compiled *graph.Graph has the
// unexported method Graph asks for, and Of is checked by the compiler. This
// package imports nothing of Weft's, so that package graph can import it.
package graphrt

import "time"

// Env is what expressions see. Its values are plain JSON-decoded Go values:
// map[string]any, []any, float64, string, bool and nil.
type Env struct {
	State      map[string]any // the run's shared state
	Output     any            // the output of the node whose edges are evaluated (or the predecessor's, for when and map.over)
	Invocation map[string]any // the run's invocation state, read-only
	Local      any            // branch-local data: the forking data of an action, or the item of a map
}

// Evaluator walks and evaluates one compiled graph. It is safe for
// concurrent use; the slices it returns are shared and must not be
// modified. Node and edge ids are a graph's own: edge i is the i-th edge of
// its definition.
type Evaluator interface {
	// Outgoing returns the indexes of the edges leaving id (which may be
	// START), in definition order.
	Outgoing(id string) []int
	// Incoming returns the indexes of the edges entering id (which may be
	// END), in definition order.
	Incoming(id string) []int
	// ForwardIncoming returns the incoming edges of id that are not back
	// edges: the edges a join counts.
	ForwardIncoming(id string) []int
	// IsBackEdge reports whether edge i closes a cycle: in a depth-first
	// walk from START that follows edges in definition order, it leads to
	// a node still on the walk's stack.
	IsBackEdge(i int) bool
	// IsLocal reports whether a node is local: its type is one the graph
	// was compiled with graph.WithLocalTypes for (DefaultLocalTypes
	// without the option), it names no queue but graph.DefaultQueue, and it
	// does not say local: false. A local node's work is not put on a
	// queue: the coordinator that owns the run runs it
	// (events.LocalQueue). Routers, human and subgraph nodes are the
	// coordinator's own and are never local in this sense.
	IsLocal(id string) bool
	// MaxIterations returns how often node may be activated in one run:
	// the node's cap, else the graph's, else graph.DefaultMaxIterations.
	MaxIterations(node string) int
	// EdgeTaken reports whether edge i is taken after its source
	// triggered action ("" means graph.DefaultAction): the edge's action
	// must match and its condition, if any, hold. Timeout edges are never
	// taken here; the coordinator takes them when a human node's deadline
	// passes.
	EdgeTaken(i int, action string, env Env) (bool, error)
	// ShouldExecute evaluates node's when; a node without one always
	// executes.
	ShouldExecute(node string, env Env) (bool, error)
	// RouterActions evaluates a router node's routes (config {"routes":
	// [{"when": CEL, "action": NAME}, ...], "default": NAME}) in order and
	// returns the action of the first whose condition holds, else the
	// default, else nil (the node triggers graph.DefaultAction and its
	// edges' conditions choose).
	RouterActions(node string, env Env) ([]string, error)
	// MapItems evaluates node's map.over, giving the items to fan out over
	// as plain JSON-like values.
	MapItems(node string, env Env) ([]any, error)
	// ConcurrencyKey evaluates node's concurrency.key (the key of its
	// concurrency limit); "" when it has none.
	ConcurrencyKey(node string, env Env) (string, error)
	// RateKey evaluates node's rate.key and rate.units (the key of its
	// rate limit, "" when it has none, and the units an attempt takes, 1
	// when it names none).
	RateKey(node string, env Env) (key string, units int, err error)
	// WaitUntil is when a wait node activated at now stops waiting: now
	// plus its config.duration, or its config.until evaluated (a
	// timestamp or an RFC 3339 string; anything else is an error naming
	// the node and the value). The time may be before now: the wait then
	// ends at once.
	WaitUntil(node string, env Env, now time.Time) (time.Time, error)
}

// DefaultLocalTypes are the node types a stock coordinator runs itself
// (local nodes, see Evaluator.IsLocal): what package graph compiles a graph
// with when no graph.WithLocalTypes option says otherwise, so that a replay
// of a recorded run (package replay) decides as the coordinator did.
// Callers must not modify it.
var DefaultLocalTypes = []string{"transform"}

// Handle carries a compiled graph's Evaluator. Package graph embeds one in
// its Graph; nothing else should.
type Handle struct{ ev Evaluator }

// NewHandle returns the Handle of ev, for package graph's compiler.
func NewHandle(ev Evaluator) Handle { return Handle{ev: ev} }

func (h Handle) evaluator() Evaluator { return h.ev }

// Graph is a compiled graph: in practice a *graph.Graph, the type that
// embeds a Handle.
type Graph interface{ evaluator() Evaluator }

// Of returns g's Evaluator. g must come from package graph's compiler
// (LoadFile, Parse, Compile, Builder.Build or Subgraph); Of panics on a nil
// or zero graph.
func Of(g Graph) Evaluator {
	ev := g.evaluator()
	if ev == nil {
		panic("graphrt.Of: the graph was not compiled by package graph")
	}
	return ev
}
