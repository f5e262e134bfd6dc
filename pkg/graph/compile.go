package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/weft-dev/weft/internal/graphrt"
)

// Option configures loading and compiling a graph.
type Option func(*options)

type options struct {
	types     map[string]bool
	anyType   bool
	funcs     map[string]condFn
	badFuncs  []string
	costLimit uint64
	typeHint  string
	condHint  string
	local     map[string]bool
}

// builtinTypes are the executors of the stock worker plus the types the
// coordinator runs itself.
var builtinTypes = []string{"echo", "noop", "sleep", "fail", "http", "transform", "llm", "agent", TypeRouter, TypeHuman, TypeSubgraph, TypeWait}

// WithTypes adds executor types to the known set, for workers that register
// their own executors.
func WithTypes(names ...string) Option {
	return func(o *options) {
		for _, n := range names {
			o.types[n] = true
		}
	}
}

// WithTypeHint replaces the hint an unknown node type's error gives (by
// default "add more with graph.WithTypes") with the way the caller's user
// names more types, for example a command's flag.
func WithTypeHint(hint string) Option { return func(o *options) { o.typeHint = hint } }

// WithConditionHint replaces the hint an unregistered Go condition's error
// gives (by default "register it with the builder's IfFunc or
// graph.WithConditions") with the way the caller's user registers one.
func WithConditionHint(hint string) Option { return func(o *options) { o.condHint = hint } }

// AllowAnyType turns off the check that every node's type is known.
func AllowAnyType() Option { return func(o *options) { o.anyType = true } }

// WithConditions registers Go conditions by name, for edges and whens
// written "func:NAME". The values must be StateCondition or
// InvocationCondition functions (or plain funcs of the same signatures).
// A coordinator uses it to resolve the functions of a graph it read back
// from a run's log.
func WithConditions(fns map[string]any) Option {
	return func(o *options) {
		for name, f := range fns {
			fn, ok := toCondFn(f)
			if !ok {
				o.badFuncs = append(o.badFuncs, name)
				continue
			}
			o.funcs[name] = fn
		}
	}
}

// WithLocalTypes names the node types the coordinator runs itself, with
// no queue hop (local nodes, see "Local nodes" in the package doc), in
// place of the default, the built-in transform (no types: no local
// nodes). The coordinator compiles a run's graph with the
// types it has local executors for; every coordinator of a deployment must
// have the same ones, and a replay of its runs must name them too.
func WithLocalTypes(types ...string) Option {
	return func(o *options) {
		o.local = map[string]bool{}
		for _, t := range types {
			o.local[t] = true
		}
	}
}

// WithCostLimit sets the cost limit of each expression evaluation (see
// DefaultCostLimit); an evaluation that exceeds it fails with ErrEvaluation.
func WithCostLimit(units uint64) Option {
	return func(o *options) {
		if units > 0 {
			o.costLimit = units
		}
	}
}

func newOptions(opts []Option) *options {
	o := &options{types: map[string]bool{}, funcs: map[string]condFn{}, costLimit: DefaultCostLimit, typeHint: "add more with graph.WithTypes",
		condHint: "register it with the builder's IfFunc or graph.WithConditions"}
	for _, t := range builtinTypes {
		o.types[t] = true
	}
	for _, opt := range opts {
		opt(o)
	}
	if o.local == nil {
		o.local = map[string]bool{}
		for _, t := range graphrt.DefaultLocalTypes {
			o.local[t] = true
		}
	}
	return o
}

// Graph is a validated, compiled graph: its normalised Definition with
// indexes over nodes and edges and compiled expressions. It is immutable
// and safe for concurrent use. The values it returns (the Definition,
// nodes and edges) are shared and must not be modified.
type Graph struct {
	evalHandle // the engine's Evaluator (internal/graphrt)

	def       *Definition
	canonical []byte
	digest    string

	nodes    map[string]int   // id -> index in def.Nodes
	out, in  map[string][]int // node id (and START, END) -> edge indexes
	fwdIn    map[string][]int
	back     []bool
	cond     []*expr // per edge; nil when unconditional
	when     map[string]*expr
	mapOver  map[string]*expr
	flowKey  map[string]*expr // node id → its concurrency key
	rateKey  map[string]*expr // node id → its rate key
	rateUnit map[string]*expr // node id → its rate units
	waitFor  map[string]*expr // wait node id → its until
	routes   map[string]*router
	children map[string]*Graph
	parent   *Graph
	local    map[string]bool // node id → runs in the coordinator
}

// Compile validates def and compiles it. def is not modified; the Graph
// holds a normalised copy.
func Compile(def *Definition, opts ...Option) (*Graph, error) {
	return compile(def, "", opts)
}

func compile(def *Definition, source string, opts []Option) (*Graph, error) {
	p := &problems{source: source}
	if def == nil {
		p.top("", "no definition")
		return nil, p.err()
	}
	o := newOptions(opts)
	slices.Sort(o.badFuncs)
	for _, name := range o.badFuncs {
		p.top("", "condition %q: want a StateCondition or InvocationCondition function", name)
	}
	def = cloneDefinition(def)
	if !checkCounts(def, p) { // limits.go
		return nil, p.err()
	}
	g := build(def, nil, nil, o, p)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return g, nil
}

// build normalises, validates and indexes one definition and its nested
// graphs. scope lists the enclosing definitions, innermost last.
func build(def *Definition, parent *Graph, scope []*Definition, o *options, p *problems) *Graph {
	normalise(def, p)
	g := &Graph{def: def, parent: parent}
	g.evalHandle = graphrt.NewHandle(evaluator{g})
	g.index()
	validate(g, scope, o, p)
	g.markLocal(o)
	if len(def.Graphs) > 0 {
		g.children = make(map[string]*Graph, len(def.Graphs))
		inner := append(slices.Clip(scope), def)
		for _, name := range sortedKeys(def.Graphs) {
			q := p.sub(name)
			g.children[name] = build(def.Graphs[name], g, inner, o, q)
			p.merge(q)
		}
	}
	if len(p.errs) == 0 {
		var err error
		g.canonical, err = json.Marshal(def)
		if err != nil {
			p.top("", "encoding the definition: %v", err)
		}
		sum := sha256.Sum256(g.canonical)
		g.digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	return g
}

// normalise fills defaults so that the canonical form says everything a
// replay needs, and puts embedded JSON in canonical form.
func normalise(def *Definition, p *problems) {
	if def.MaxIterations == 0 {
		def.MaxIterations = DefaultMaxIterations
	}
	if len(def.Metadata) == 0 {
		def.Metadata = nil
	}
	if len(def.State.Reducers) == 0 {
		def.State.Reducers = nil
	}
	if len(def.Graphs) == 0 {
		def.Graphs = nil
	}
	for name, sub := range def.Graphs {
		if sub != nil && sub.Name == "" {
			sub.Name = name
		}
	}
	if def.Nodes == nil {
		def.Nodes = []Node{}
	}
	if def.Edges == nil {
		def.Edges = []Edge{}
	}
	for i := range def.Nodes {
		normaliseNode(&def.Nodes[i], p)
	}
	for i := range def.Edges {
		if def.Edges[i].Action == "" {
			def.Edges[i].Action = DefaultAction
		}
	}
}

// normaliseNode fills a node's defaults and puts its embedded JSON in
// canonical form.
func normaliseNode(n *Node, p *problems) {
	if n.Queue == "" {
		n.Queue = DefaultQueue
	}
	if n.Join.Kind == "" {
		n.Join.Kind = JoinAll
	}
	if n.Effect == "" {
		n.Effect = defaultEffect(n.Type)
	}
	if n.Checkpoint == "" {
		n.Checkpoint = CheckpointNone
	}
	n.Retry = withRetryDefaults(n.Retry)
	if len(n.Metadata) == 0 {
		n.Metadata = nil
	}
	if len(n.Inputs) == 0 {
		n.Inputs = nil
	}
	if len(n.Outputs) == 0 {
		n.Outputs = nil
	}
	for _, f := range []struct {
		name string
		raw  *json.RawMessage
	}{{"config", &n.Config}, {"inputSchema", &n.InputSchema}, {"outputSchema", &n.OutputSchema}, {"fallback", &n.Fallback}} {
		c, err := canonicalJSON(*f.raw)
		if err != nil {
			p.node(n.ID, f.name, "not valid JSON: %v", err)
			continue
		}
		*f.raw = c
	}
}

func defaultEffect(typ string) Effect {
	switch typ {
	case "echo", "noop", "sleep", "fail", "transform", TypeRouter, TypeWait:
		return EffectPure
	case TypeHuman:
		return EffectHuman
	}
	return EffectExternal
}

// withRetryDefaults fills a policy's zero fields from DefaultRetryPolicy, so
// that the canonical form does not depend on this package's defaults.
func withRetryDefaults(r *RetryPolicy) *RetryPolicy {
	d := DefaultRetryPolicy
	if r == nil {
		return &d
	}
	out := *r
	if out.MaxAttempts == 0 {
		out.MaxAttempts = d.MaxAttempts
	}
	if out.InitialInterval == 0 {
		out.InitialInterval = d.InitialInterval
	}
	if out.BackoffCoefficient == 0 {
		out.BackoffCoefficient = d.BackoffCoefficient
	}
	if out.MaxInterval == 0 {
		out.MaxInterval = d.MaxInterval
	}
	if len(out.NonRetryableErrors) == 0 {
		out.NonRetryableErrors = nil
	}
	return &out
}

// canonicalJSON re-encodes raw with sorted keys and no insignificant space;
// null and empty become nil.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s", truncate(raw))
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	if v == nil {
		return nil, nil
	}
	out, err := json.Marshal(normNumbers(v))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// normNumbers writes numbers the way YAML-to-JSON conversion does, so that
// 1.0 in a JSON file and 1.0 in a YAML file give the same bytes.
func normNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return v
		}
		if _, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return v
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = normNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normNumbers(e)
		}
	}
	return v
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// cloneDefinition copies def deeply enough that normalising the copy leaves
// def untouched.
func cloneDefinition(def *Definition) *Definition {
	if def == nil {
		return nil
	}
	c := *def
	c.Metadata = maps.Clone(def.Metadata)
	c.State.Reducers = maps.Clone(def.State.Reducers)
	c.Nodes = slices.Clone(def.Nodes)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		n.Metadata = maps.Clone(n.Metadata)
		n.Config = bytes.Clone(n.Config)
		n.Inputs = slices.Clone(n.Inputs)
		n.Outputs = slices.Clone(n.Outputs)
		n.InputSchema = bytes.Clone(n.InputSchema)
		n.OutputSchema = bytes.Clone(n.OutputSchema)
		n.Fallback = bytes.Clone(n.Fallback)
		if n.Map != nil {
			m := *n.Map
			n.Map = &m
		}
		if n.Retry != nil {
			r := *n.Retry
			r.NonRetryableErrors = slices.Clone(r.NonRetryableErrors)
			n.Retry = &r
		}
	}
	c.Edges = slices.Clone(def.Edges)
	if def.Graphs != nil {
		c.Graphs = make(map[string]*Definition, len(def.Graphs))
		for k, v := range def.Graphs {
			c.Graphs[k] = cloneDefinition(v)
		}
	}
	return &c
}

// index builds the lookup tables and finds the back edges. Edges naming
// unknown nodes are left out; validate reports them.
func (g *Graph) index() {
	def := g.def
	g.nodes = make(map[string]int, len(def.Nodes))
	for i, n := range def.Nodes {
		if _, dup := g.nodes[n.ID]; !dup {
			g.nodes[n.ID] = i
		}
	}
	g.out = map[string][]int{}
	g.in = map[string][]int{}
	for i, e := range def.Edges {
		if !g.known(e.From) || !g.known(e.To) || e.From == End || e.From == Continue || e.To == Start {
			continue
		}
		g.out[e.From] = append(g.out[e.From], i)
		g.in[e.To] = append(g.in[e.To], i)
	}
	g.markBackEdges()
	g.fwdIn = map[string][]int{}
	for id, edges := range g.in {
		for _, i := range edges {
			if !g.back[i] {
				g.fwdIn[id] = append(g.fwdIn[id], i)
			}
		}
	}
}

// markBackEdges walks depth-first from START in definition order: an edge
// to a node still on the stack closes a cycle.
func (g *Graph) markBackEdges() {
	g.back = make([]bool, len(g.def.Edges))
	const (
		unseen = iota
		onStack
		done
	)
	mark := map[string]int{}
	var visit func(id string)
	visit = func(id string) {
		mark[id] = onStack
		for _, i := range g.out[id] {
			to := g.def.Edges[i].To
			switch mark[to] {
			case onStack:
				g.back[i] = true
			case unseen:
				visit(to)
			}
		}
		mark[id] = done
	}
	visit(Start)
}

func (g *Graph) known(id string) bool {
	if id == Start || id == End || id == Continue {
		return true
	}
	_, ok := g.nodes[id]
	return ok
}

// markLocal records which nodes run in the coordinator (see isLocal).
func (g *Graph) markLocal(o *options) {
	for i := range g.def.Nodes {
		n := &g.def.Nodes[i]
		if o.local[n.Type] && n.Queue == DefaultQueue && (n.Local == nil || *n.Local) {
			if g.local == nil {
				g.local = map[string]bool{}
			}
			g.local[n.ID] = true
		}
	}
}

// Definition returns the normalised definition: defaults filled in (queue,
// join, effect, checkpoint, retry policy, edge actions, iteration cap) and
// embedded JSON in canonical form.
func (g *Graph) Definition() *Definition { return g.def }

// Canonical returns the canonical JSON encoding of the normalised
// definition. It is what a run-started event records.
func (g *Graph) Canonical() []byte { return g.canonical }

// Digest returns "sha256:<hex>" of Canonical, identifying the graph's content.
func (g *Graph) Digest() string { return g.digest }

// Node returns the node with the given id.
func (g *Graph) Node(id string) (*Node, bool) {
	i, ok := g.nodes[id]
	if !ok {
		return nil, false
	}
	return &g.def.Nodes[i], true
}

// NodeIndex returns the index of the node with the given id in Nodes.
func (g *Graph) NodeIndex(id string) (int, bool) {
	i, ok := g.nodes[id]
	return i, ok
}

// Nodes returns the nodes in definition order.
func (g *Graph) Nodes() []*Node {
	out := make([]*Node, len(g.def.Nodes))
	for i := range g.def.Nodes {
		out[i] = &g.def.Nodes[i]
	}
	return out
}

// Edge returns the edge with index i (definition order), or nil.
func (g *Graph) Edge(i int) *Edge {
	if i < 0 || i >= len(g.def.Edges) {
		return nil
	}
	return &g.def.Edges[i]
}

// Subgraph returns the compiled graph a subgraph node names: one of this
// graph's Graphs or, failing that, of an enclosing graph's.
func (g *Graph) Subgraph(name string) (*Graph, bool) {
	for s := g; s != nil; s = s.parent {
		if c, ok := s.children[name]; ok {
			return c, true
		}
	}
	return nil, false
}
