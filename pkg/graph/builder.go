package graph

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// Builder assembles a Definition in Go. Build validates it exactly as Parse
// validates a file, and a builder and a file that say the same thing give
// equal Definitions and the same Digest.
//
// A Builder is not safe for concurrent use.
type Builder struct {
	def   Definition
	funcs map[string]any
	errs  []string
}

// NodeOption sets a field of a node being built.
type NodeOption func(*Node)

// EdgeOption sets a field of an edge being built.
type EdgeOption func(*edgeSpec)

type edgeSpec struct {
	edge  *Edge
	funcs map[string]any
}

// DefinitionSource is what Builder.Subgraph accepts: a *Builder or a
// *Definition.
type DefinitionSource interface {
	definitionSource() (*Definition, map[string]any)
}

func (b *Builder) definitionSource() (*Definition, map[string]any) { return b.Definition(), b.funcs }

func (d *Definition) definitionSource() (*Definition, map[string]any) {
	return cloneDefinition(d), nil
}

// New starts a graph called name.
func New(name string) *Builder {
	return &Builder{def: Definition{Name: name}, funcs: map[string]any{}}
}

// Version sets the graph's version label.
func (b *Builder) Version(v string) *Builder { b.def.Version = v; return b }

// Description sets the graph's description.
func (b *Builder) Description(s string) *Builder { b.def.Description = s; return b }

// Metadata sets one metadata entry of the graph.
func (b *Builder) Metadata(key, value string) *Builder {
	if b.def.Metadata == nil {
		b.def.Metadata = map[string]string{}
	}
	b.def.Metadata[key] = value
	return b
}

// Node adds a node of the given executor type.
func (b *Builder) Node(id, typ string, opts ...NodeOption) *Builder {
	n := Node{ID: id, Type: typ}
	for _, o := range opts {
		o(&n)
	}
	b.def.Nodes = append(b.def.Nodes, n)
	return b
}

// Edge adds an edge; from may be Start and to may be End.
func (b *Builder) Edge(from, to string, opts ...EdgeOption) *Builder {
	e := Edge{From: from, To: to}
	spec := edgeSpec{edge: &e, funcs: map[string]any{}}
	for _, o := range opts {
		o(&spec)
	}
	for name, fn := range spec.funcs {
		b.addFunc(name, fn)
	}
	b.def.Edges = append(b.def.Edges, e)
	return b
}

// Reducer sets the reducer that merges updates to the state key.
func (b *Builder) Reducer(key string, r Reducer) *Builder {
	if b.def.State.Reducers == nil {
		b.def.State.Reducers = map[string]Reducer{}
	}
	b.def.State.Reducers[key] = r
	return b
}

// Concurrency limits how many attempts of the node run at once, per key
// (key: a CEL expression giving a string; "" for one key), across every
// run of every graph that names the same limit (name; "" for
// "<graph>/<node>").
func Concurrency(max int, key, name string) NodeOption {
	return func(n *Node) { n.Concurrency = &ConcurrencyLimit{Max: max, Key: key, Name: name} }
}

// RunConcurrency limits the graph's runs in progress at once, per key
// (key: a CEL expression over input and invocation giving a string; ""
// for one key), across every graph that names the same limit (name; ""
// for the graph's name); strategy is RunQueue ("" too), RunCancelNewest
// or RunCancelOldest.
func (b *Builder) RunConcurrency(max int, key, name, strategy string) *Builder {
	b.def.Concurrency = &RunConcurrency{Max: max, Key: key, Name: name, Strategy: strategy}
	return b
}

// MaxIterations sets the graph's per-node activation cap.
func (b *Builder) MaxIterations(n int) *Builder { b.def.MaxIterations = n; return b }

// Subgraph adds a graph that subgraph nodes can name in their config
// ({"graph": name}). A child builder's Go conditions come along.
func (b *Builder) Subgraph(name string, child DefinitionSource) *Builder {
	if child == nil || (reflect.ValueOf(child).Kind() == reflect.Pointer && reflect.ValueOf(child).IsNil()) {
		b.errs = append(b.errs, fmt.Sprintf("subgraph %q: nil definition", name))
		return b
	}
	def, funcs := child.definitionSource()
	if b.def.Graphs == nil {
		b.def.Graphs = map[string]*Definition{}
	}
	b.def.Graphs[name] = def
	for fname, fn := range funcs {
		b.addFunc(fname, fn)
	}
	return b
}

func (b *Builder) addFunc(name string, fn any) {
	if old, ok := b.funcs[name]; ok && reflect.ValueOf(old).Pointer() != reflect.ValueOf(fn).Pointer() {
		b.errs = append(b.errs, fmt.Sprintf("condition %q: registered twice with different functions", name))
		return
	}
	b.funcs[name] = fn
}

// Definition returns a copy of the definition built so far, as written:
// defaults are filled in by Build.
func (b *Builder) Definition() *Definition { return cloneDefinition(&b.def) }

// Build validates and compiles the graph, registering its Go conditions.
func (b *Builder) Build(opts ...Option) (*Graph, error) {
	if len(b.errs) > 0 {
		p := &problems{}
		for _, e := range b.errs {
			p.top("", "%s", e)
		}
		return nil, p.err()
	}
	opts = append(slices.Clip(opts), WithConditions(maps.Clone(b.funcs)))
	return compile(&b.def, "", opts)
}

// Node options.

// Name sets the node's display name.
func Name(s string) NodeOption { return func(n *Node) { n.Name = s } }

// Describe sets the node's description.
func Describe(s string) NodeOption { return func(n *Node) { n.Description = s } }

// Meta sets one metadata entry of the node.
func Meta(key, value string) NodeOption {
	return func(n *Node) {
		if n.Metadata == nil {
			n.Metadata = map[string]string{}
		}
		n.Metadata[key] = value
	}
}

// Config sets the executor's configuration; v is encoded as JSON.
func Config(v any) NodeOption { return func(n *Node) { n.Config = rawJSON(v) } }

// InputSchema sets the node's input JSON schema; v is encoded as JSON.
func InputSchema(v any) NodeOption { return func(n *Node) { n.InputSchema = rawJSON(v) } }

// OutputSchema sets the node's output JSON schema; v is encoded as JSON.
func OutputSchema(v any) NodeOption { return func(n *Node) { n.OutputSchema = rawJSON(v) } }

// Fallback sets the output used after the last attempt failed.
func Fallback(v any) NodeOption { return func(n *Node) { n.Fallback = rawJSON(v) } }

// rawJSON encodes v. A value that cannot be encoded leaves the error's text,
// which is not JSON, so that Build reports it against the node and field.
func rawJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(err.Error())
	}
	return b
}

// Queue puts the node on a task queue.
func Queue(name string) NodeOption { return func(n *Node) { n.Queue = name } }

// Timeout bounds each attempt of the node.
func Timeout(d time.Duration) NodeOption { return func(n *Node) { n.Timeout = Duration(d) } }

// Heartbeat sets the interval within which a running node must heartbeat.
func Heartbeat(d time.Duration) NodeOption { return func(n *Node) { n.Heartbeat = Duration(d) } }

// Retry sets the node's retry policy; zero fields take the defaults.
func Retry(p RetryPolicy) NodeOption { return func(n *Node) { n.Retry = &p } }

// OutputAs promotes the node's output into the run's artifacts under key.
func OutputAs(key string) NodeOption { return func(n *Node) { n.OutputAs = key } }

// Inputs lists the state keys the node reads.
func Inputs(keys ...string) NodeOption { return func(n *Node) { n.Inputs = keys } }

// Outputs lists the state keys the node may write.
func Outputs(keys ...string) NodeOption { return func(n *Node) { n.Outputs = keys } }

// When sets the CEL condition under which the node executes (else it is
// skipped).
func When(expr string) NodeOption { return func(n *Node) { n.When = expr } }

// WaitAll makes the node wait for all incoming forward edges (the default).
func WaitAll() NodeOption { return func(n *Node) { n.Join = Join{Kind: JoinAll} } }

// WaitAny makes the node run when any one incoming forward edge is taken.
func WaitAny() NodeOption { return func(n *Node) { n.Join = Join{Kind: JoinAny} } }

// WaitN makes the node run when k of its incoming forward edges are taken.
func WaitN(k int) NodeOption { return func(n *Node) { n.Join = Join{Kind: JoinN, N: k} } }

// Map runs the node once per item of the list the CEL expression over
// gives, at most concurrency at a time (0: no cap).
func Map(over string, concurrency int) NodeOption {
	return func(n *Node) { n.Map = &MapSpec{Over: over, Concurrency: concurrency} }
}

// MaxIterations caps how often the node may be activated in one run.
func MaxIterations(k int) NodeOption { return func(n *Node) { n.MaxIterations = k } }

// WithEffect sets the node's effect class.
func WithEffect(e Effect) NodeOption { return func(n *Node) { n.Effect = e } }

// WithCheckpoint sets when snapshots are stored around the node.
func WithCheckpoint(c Checkpoint) NodeOption { return func(n *Node) { n.Checkpoint = c } }

// Edge options.

// OnAction labels the edge with the action that takes it.
func OnAction(action string) EdgeOption { return func(s *edgeSpec) { s.edge.Action = action } }

// If sets the edge's CEL condition.
func If(expr string) EdgeOption { return func(s *edgeSpec) { s.edge.Condition = expr } }

// Conditions are the Go conditions registered by the builder's IfFunc
// (and its subgraphs'), by name: what an engine that runs the graph needs
// (weft.WithConditions, graph.WithConditions).
func (b *Builder) Conditions() map[string]any {
	out := make(map[string]any, len(b.funcs))
	for name, fn := range b.funcs {
		out[name] = fn
	}
	return out
}

// IfFunc sets the edge's condition to the Go function fn, registered under
// name: the definition records "func:name", and the Graph Build returns
// resolves it. A process that compiles the definition again (say, read back
// from a run's log) passes the same functions to WithConditions.
func IfFunc[F ConditionFunc](name string, fn F) EdgeOption {
	return func(s *edgeSpec) {
		s.edge.Condition = funcPrefix + name
		s.funcs[name] = fn
	}
}

// OnTimeout marks the edge a human node takes when its deadline passes.
func OnTimeout() EdgeOption { return func(s *edgeSpec) { s.edge.Timeout = true } }
