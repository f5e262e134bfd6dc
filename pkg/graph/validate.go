package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/suggest"
)

// Node ids and graph names become NATS subject tokens and CloudEvents
// extension values, so they are restricted to letters, digits, '_' and '-'.
var (
	idPattern    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	tokenPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

const idRule = "must start with a letter and hold only letters, digits, '_' and '-'"

// Subject token limits. A subject token (a run id, a queue name, a timer
// id) holds at most maxTokenLen characters (eventlog.MaxTokenLen; the two
// are checked equal by a test, since this package does not import events).
// A node id is one part of tokens the engine derives from it, so it must
// leave room for the rest:
//
//	retry-<node>-<iteration>-<item>-<attempt>  a retry timer's id
//	deadline-<node>-<iteration>                a human node's deadline timer
//
// with each number up to 19 digits (an int64). Child run ids
// ("<parent run>-<node>-<iteration>") need no limit here: the engine
// shortens one that would be too long to a digest (engine.ChildRunID).
const (
	// maxTokenLen is eventlog.MaxTokenLen.
	maxTokenLen = 128
	// MaxNodeIDLen is the longest node id: maxTokenLen less "retry-" and
	// three numbers of up to 19 digits with their '-' separators.
	MaxNodeIDLen = maxTokenLen - len("retry-") - 3*(1+19)
	// MaxQueueLen is the longest queue name: one subject token.
	MaxQueueLen = maxTokenLen
)

// validate checks one normalised definition (not its nested graphs) and
// compiles its expressions into g.
func validate(g *Graph, scope []*Definition, o *options, p *problems) {
	def := g.def
	validateGraphValues(def, p)
	validateSearchAttributes(def.SearchAttributes, p)
	validateReducers(def.State.Reducers, p)
	validateGraphNames(def.Graphs, p)
	validateContinue(def, scope, p)
	if len(def.Nodes) == 0 {
		p.top("nodes", "graph has no nodes")
	}

	g.when = map[string]*expr{}
	g.mapOver = map[string]*expr{}
	g.flowKey = map[string]*expr{}
	g.rateKey = map[string]*expr{}
	g.rateUnit = map[string]*expr{}
	g.waitFor = map[string]*expr{}
	g.routes = map[string]*router{}
	first := map[string]int{}
	lowerLimits(g, o, p) // nodelimits.go
	for i := range def.Nodes {
		validateNode(g, i, first, scope, o, p)
	}
	validateRunConcurrency(g, o, p)
	endsOK := validateEdges(g, o, p)
	if endsOK && len(def.Nodes) > 0 {
		validateReach(g, p)
	}
}

func validateGraphValues(def *Definition, p *problems) {
	if strings.TrimSpace(def.Name) == "" {
		p.top("name", "missing graph name")
	}
	if def.MaxIterations < 0 {
		p.top("maxIterations", "must not be negative, got %d", def.MaxIterations)
	}
	if def.Retention != "" {
		if d, err := time.ParseDuration(def.Retention); err != nil {
			p.top("retention", "want a duration such as 720h, got %q", def.Retention)
		} else if d < 0 {
			p.top("retention", "must not be negative, got %s", def.Retention)
		}
	}
}

// validateContinue checks continueAsNew: its graph must be one the
// graph's graphs (or an enclosing graph's) hold.
func validateContinue(def *Definition, scope []*Definition, p *problems) {
	c := def.ContinueAsNew
	if c == nil {
		return
	}
	if c.MaxStateBytes < 0 {
		p.top("continueAsNew.maxStateBytes", "must not be negative, got %d", c.MaxStateBytes)
	}
	if c.Graph == "" {
		return
	}
	if _, ok := def.Graphs[c.Graph]; ok {
		return
	}
	for _, d := range scope {
		if _, ok := d.Graphs[c.Graph]; ok {
			return
		}
	}
	p.top("continueAsNew.graph", "no graph %q in graphs (the continuation's graph is shipped with this one)", c.Graph)
}

func validateSearchAttributes(attrs []string, p *problems) {
	if len(attrs) > MaxSearchAttributes {
		p.top("searchAttributes", "at most %d, got %d", MaxSearchAttributes, len(attrs))
	}
	for i, a := range attrs {
		if !idPattern.MatchString(a) {
			p.top(fmt.Sprintf("searchAttributes[%d]", i), "attribute %q %s", a, idRule)
		} else if slices.Contains(attrs[:i], a) {
			p.top(fmt.Sprintf("searchAttributes[%d]", i), "attribute %q given twice", a)
		}
	}
}

func validateReducers(reducers map[string]Reducer, p *problems) {
	for _, key := range sortedKeys(reducers) {
		if key == "" {
			p.top("state.reducers", "empty state key")
		}
		switch r := reducers[key]; r {
		case Replace, Append, Merge, Sum:
		default:
			p.top("state.reducers."+key, "unknown reducer %q (want replace, append, merge or sum)", r)
		}
	}
}

// validateGraphNames checks the names of the nested graphs (their
// contents are validated on their own).
func validateGraphNames(graphs map[string]*Definition, p *problems) {
	for _, name := range sortedKeys(graphs) {
		sub := graphs[name]
		switch {
		case !idPattern.MatchString(name):
			p.top("graphs", "graph name %q %s", name, idRule)
		case sub == nil:
			p.top("graphs."+name, "missing graph definition")
		case sub.Name != name:
			p.top("graphs."+name, "graph's name %q differs from its key %q", sub.Name, name)
		}
	}
}

// validateNode checks one node, step by step, and compiles its
// expressions into g.
func validateNode(g *Graph, i int, first map[string]int, scope []*Definition, o *options, p *problems) {
	n := &g.def.Nodes[i]
	id, prefix := n.ID, ""
	if id == "" {
		prefix = fmt.Sprintf("nodes[%d].", i)
	}
	bad := func(field, format string, args ...any) { p.node(id, prefix+field, format, args...) }

	validateNodeID(n, i, first, bad)
	validateNodeType(n, o, bad)
	validatePlacement(n, bad)
	validateNodeValues(n, bad)
	validateRetry(n.Retry, bad)
	validateJoin(n, len(g.fwdIn[id]), bad)
	validateNodeExprs(g, n, o, bad)
	validateConcurrency(g, n, o, bad)
	validateRate(g, n, o, bad)
	switch n.Type {
	case TypeSubgraph:
		validateSubgraphRef(g.def, n, scope, bad)
		if n.Map != nil {
			// Its items would go to workers as work items: none starts a
			// child run.
			bad("map", "a subgraph node cannot run once per item yet: map a node inside the subgraph, or start one run per item")
		}
	case "agent":
		validateToolGraphs(g.def, n, scope, bad)
	case TypeRouter:
		if r := validateRouter(g, n, o, bad); r != nil && id != "" {
			g.routes[id] = r
		}
	case TypeWait:
		compileWait(g, n, o)
		if n.Map != nil {
			bad("map", "a wait node has no items to run: wait before or after the map node")
		}
	}
	validateExecutorConfig(n, o, bad)
}

// coordinatorType reports whether nodes of a type are the coordinator's
// own: they take no worker, queue, slot or rate.
func coordinatorType(t string) bool {
	return t == TypeRouter || t == TypeHuman || t == TypeSubgraph || t == TypeWait
}

// validateNodeID checks the id and records its first use in first.
func validateNodeID(n *Node, i int, first map[string]int, bad badFunc) {
	id := n.ID
	switch j, dup := first[id]; {
	case id == "":
		bad("id", "missing node id")
	case id == Start || id == End || id == Continue:
		bad("id", "%s is reserved and cannot be a node id", id)
	case !idPattern.MatchString(id):
		bad("id", "node id %s", idRule)
	case len(id) > MaxNodeIDLen:
		bad("id", "node id is %d characters, the limit is %d (the ids of its timers become subject tokens of at most %d)", len(id), MaxNodeIDLen, maxTokenLen)
	case dup:
		bad("id", "duplicate node id (first used by nodes[%d])", j)
	default:
		first[id] = i
	}
}

func validateNodeType(n *Node, o *options, bad badFunc) {
	switch {
	case n.Type == "":
		bad("type", "missing type")
	case !o.anyType && !o.types[n.Type]:
		known := sortedKeys(o.types)
		hint := ""
		if near := suggest.Closest(n.Type, known); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
		bad("type", "unknown type %q%s (known: %s; %s)", n.Type, hint, strings.Join(known, ", "), o.typeHint)
	}
}

// validatePlacement checks where the node runs: its queue and local.
func validatePlacement(n *Node, bad badFunc) {
	switch {
	case !tokenPattern.MatchString(n.Queue):
		bad("queue", "queue name %q must start with a letter or digit and hold only letters, digits, '_' and '-' (names starting with '_', such as \"_local\", the coordinator's own, are reserved)", n.Queue)
	case len(n.Queue) > MaxQueueLen:
		bad("queue", "queue name is %d characters, the limit is %d (it is a subject token)", len(n.Queue), MaxQueueLen)
	}
	if n.Local != nil {
		switch {
		case *n.Local:
			bad("local", "only local: false is a setting (it forces the node onto a worker queue); a node runs in the coordinator by its type, when the coordinator has a local executor for it")
		case coordinatorType(n.Type):
			bad("local", "a %s node is always run by the coordinator; it has no worker queue to be forced onto", n.Type)
		}
	}
}

// validateNodeValues checks the node's plain values: bounds, state keys
// and enumerations.
func validateNodeValues(n *Node, bad badFunc) {
	if n.MaxIterations < 0 {
		bad("maxIterations", "must not be negative, got %d", n.MaxIterations)
	}
	if n.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	if n.Heartbeat < 0 {
		bad("heartbeat", "must not be negative")
	}
	for k, s := range n.Inputs {
		if s == "" {
			bad(fmt.Sprintf("inputs[%d]", k), "empty state key")
		}
	}
	for k, s := range n.Outputs {
		if s == "" {
			bad(fmt.Sprintf("outputs[%d]", k), "empty state key")
		}
	}
	switch n.Effect {
	case EffectPure, EffectRead, EffectWrite, EffectExternal, EffectHuman:
	default:
		bad("effect", "unknown effect %q (want pure, read, write, external or human)", n.Effect)
	}
	switch n.Checkpoint {
	case CheckpointNone, CheckpointBefore, CheckpointAfter, CheckpointBoth:
	default:
		bad("checkpoint", "unknown checkpoint %q (want none, before, after or both)", n.Checkpoint)
	}
}

func validateRetry(r *RetryPolicy, bad badFunc) {
	if r == nil {
		return
	}
	if r.MaxAttempts < 0 {
		bad("retry.maxAttempts", "must not be negative, got %d", r.MaxAttempts)
	}
	if r.BackoffCoefficient < 1 {
		bad("retry.backoffCoefficient", "must be at least 1, got %g", r.BackoffCoefficient)
	}
	if r.Jitter != nil && (*r.Jitter < 0 || *r.Jitter > 1) {
		bad("retry.jitter", "must be between 0 and 1, got %g", *r.Jitter)
	}
	if r.InitialInterval < 0 {
		bad("retry.initialInterval", "must not be negative")
	}
	if r.MaxInterval < 0 {
		bad("retry.maxInterval", "must not be negative")
	}
	if r.InitialInterval > 0 && r.MaxInterval > 0 && r.InitialInterval > r.MaxInterval {
		bad("retry.maxInterval", "%s is less than initialInterval %s", r.MaxInterval.D(), r.InitialInterval.D())
	}
}

// validateJoin checks the join against fwd, the node's incoming forward
// edges.
func validateJoin(n *Node, fwd int, bad badFunc) {
	switch n.Join.Kind {
	case JoinAll, JoinAny:
	case JoinN:
		switch {
		case n.Join.N < 1:
			bad("join", "n-of needs n ≥ 1, got %d", n.Join.N)
		case n.Join.N > fwd && n.ID != "":
			bad("join", "join waits for %d incoming edges but the node has only %d (not counting back edges)", n.Join.N, fwd)
		}
	default:
		bad("join", "unknown join %q (want \"all\", \"any\" or a number)", n.Join.Kind)
	}
}

// validateConcurrency checks a node's concurrency limit and compiles its
// key into g.
func validateConcurrency(g *Graph, n *Node, o *options, bad badFunc) {
	c := n.Concurrency
	if c == nil {
		return
	}
	switch {
	case c.Max < 1:
		bad("concurrency.max", "must be at least 1, got %d", c.Max)
	case c.Max > MaxConcurrency:
		bad("concurrency.max", "must be at most %d, got %d", MaxConcurrency, c.Max)
	}
	if len(c.Name) > MaxLimitNameLen {
		bad("concurrency.name", "is %d characters, the limit is %d", len(c.Name), MaxLimitNameLen)
	}
	if coordinatorType(n.Type) {
		bad("concurrency", "a %s node runs in the coordinator and takes no slot; limit the nodes that do the work", n.Type)
	}
	if strings.TrimSpace(c.Key) == "" {
		return
	}
	if x, msg := compileExpr(c.Key, strExpr, o); msg != "" {
		bad("concurrency.key", "%s", msg)
	} else if x.fn != nil {
		bad("concurrency.key", "a key must be a CEL expression, not a Go condition")
	} else {
		g.flowKey[n.ID] = x
	}
}

// validateRunConcurrency checks the graph's run limit and compiles its
// key into g (under START, the run's entry).
func validateRunConcurrency(g *Graph, o *options, p *problems) {
	c := g.def.Concurrency
	if c == nil {
		return
	}
	switch {
	case c.Max < 1:
		p.top("concurrency.max", "must be at least 1, got %d", c.Max)
	case c.Max > MaxConcurrency:
		p.top("concurrency.max", "must be at most %d, got %d", MaxConcurrency, c.Max)
	}
	if len(c.Name) > MaxLimitNameLen {
		p.top("concurrency.name", "is %d characters, the limit is %d", len(c.Name), MaxLimitNameLen)
	}
	switch c.Strategy {
	case "", RunQueue, RunCancelNewest, RunCancelOldest:
	default:
		p.top("concurrency.strategy", "unknown strategy %q (want %q, %q or %q)", c.Strategy, RunQueue, RunCancelNewest, RunCancelOldest)
	}
	if x := compileCEL(c.Key, strExpr, "concurrency.key", "a key", o, p.top); x != nil {
		g.flowKey[Start] = x
	}
}

// validateRate checks a node's rate limit and compiles its key and units
// into g.
func validateRate(g *Graph, n *Node, o *options, bad badFunc) {
	r := n.Rate
	if r == nil {
		return
	}
	switch {
	case r.Limit < 1:
		bad("rate.limit", "must be at least 1, got %d", r.Limit)
	case r.Limit > MaxRate:
		bad("rate.limit", "must be at most %d, got %d", MaxRate, r.Limit)
	}
	if r.Per < Duration(time.Millisecond) {
		bad("rate.per", "must be at least 1ms, got %s", time.Duration(r.Per))
	}
	if len(r.Name) > MaxLimitNameLen {
		bad("rate.name", "is %d characters, the limit is %d", len(r.Name), MaxLimitNameLen)
	}
	switch {
	case coordinatorType(n.Type):
		bad("rate", "a %s node runs in the coordinator; limit the nodes that do the work", n.Type)
	case n.Concurrency != nil:
		bad("rate", "a node with a concurrency limit cannot have a rate limit too, yet")
	}
	if x := compileCEL(r.Key, strExpr, "rate.key", "a key", o, bad); x != nil {
		g.rateKey[n.ID] = x
	}
	if x := compileCEL(r.Units, intExpr, "rate.units", "units", o, bad); x != nil {
		g.rateUnit[n.ID] = x
	}
}

// compileCEL compiles src, if it is not blank, as a CEL expression of kind
// k (a Go condition refused), reporting a problem at field; what names it
// in the refusal.
func compileCEL(src string, k exprKind, field, what string, o *options, bad badFunc) *expr {
	if strings.TrimSpace(src) == "" {
		return nil
	}
	x, msg := compileExpr(src, k, o)
	switch {
	case msg != "":
		bad(field, "%s", msg)
	case x.fn != nil:
		bad(field, "%s must be a CEL expression, not a Go condition", what)
	default:
		return x
	}
	return nil
}

// validateNodeExprs compiles the node's when and map.over into g.
func validateNodeExprs(g *Graph, n *Node, o *options, bad badFunc) {
	if n.When != "" {
		if x, msg := compileExpr(n.When, boolExpr, o); msg != "" {
			bad("when", "%s", msg)
		} else {
			g.when[n.ID] = x
		}
	}
	m := n.Map
	if m == nil {
		return
	}
	if strings.TrimSpace(m.Over) == "" {
		bad("map.over", "missing list expression")
	} else if x, msg := compileExpr(m.Over, listExpr, o); msg != "" {
		bad("map.over", "%s", msg)
	} else {
		g.mapOver[n.ID] = x
	}
	if m.Concurrency < 0 {
		bad("map.concurrency", "must not be negative, got %d", m.Concurrency)
	}
}

// router is a router node's compiled config.
type router struct {
	routes []route
	def    string
}

type route struct {
	when   *expr
	action string
}

// routerConfig is a router node's config.
type routerConfig struct {
	Routes []struct {
		When   string `json:"when"`
		Action string `json:"action"`
	} `json:"routes"`
	Default string `json:"default"`
}

// validateRouter compiles a router's config: {"routes": [{"when": CEL,
// "action": NAME}], "default": NAME}, both optional. Every action it names
// must label an edge leaving the router, so a typo is a load error rather
// than a run that comes to rest.
//
// (Long by its checks, each a line or two, in the config's order.)
func validateRouter(g *Graph, n *Node, o *options, bad badFunc) *router {
	if len(n.Config) == 0 {
		return nil
	}
	var cfg routerConfig
	dec := json.NewDecoder(bytes.NewReader(n.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		bad("config", `router config: %v (want {"routes": [{"when": CEL, "action": NAME}], "default": NAME})`, err)
		return nil
	}
	labels := map[string]bool{}
	for _, i := range g.out[n.ID] {
		labels[g.def.Edges[i].Action] = true
	}
	labelled := func(field, action string) bool {
		if !labels[action] {
			bad(field, "action %q labels no edge leaving the router", action)
			return false
		}
		return true
	}
	r := &router{def: cfg.Default}
	ok := true
	for k, rt := range cfg.Routes {
		field := fmt.Sprintf("config.routes[%d]", k)
		if rt.Action == "" {
			bad(field+".action", "missing action")
			ok = false
		} else if !labelled(field+".action", rt.Action) {
			ok = false
		}
		x := validateRouteWhen(rt.When, field+".when", o, bad)
		if x == nil {
			ok = false
			continue
		}
		r.routes = append(r.routes, route{when: x, action: rt.Action})
	}
	if cfg.Default != "" && !labelled("config.default", cfg.Default) {
		ok = false
	}
	if !ok {
		return nil
	}
	return r
}

// validateRouteWhen compiles a route's condition, or reports why not.
func validateRouteWhen(when, field string, o *options, bad badFunc) *expr {
	if strings.TrimSpace(when) == "" {
		bad(field, "missing condition")
		return nil
	}
	x, msg := compileExpr(when, boolExpr, o)
	if msg != "" {
		bad(field, "%s", msg)
		return nil
	}
	return x
}

// validateSubgraphRef checks that a subgraph node's config names a graph
// in scope: the node's own graph's Graphs or an enclosing graph's.
func validateSubgraphRef(def *Definition, n *Node, scope []*Definition, bad badFunc) {
	var cfg struct {
		Graph string `json:"graph"`
	}
	if len(n.Config) > 0 && !isNull(n.Config) && json.Unmarshal(n.Config, &cfg) != nil {
		return // validateExecutorConfig reports it
	}
	if cfg.Graph == "" {
		bad("config.graph", `subgraph node needs config {"graph": NAME} naming one of the graphs`)
		return
	}
	chain := append(slices.Clip(scope), def)
	for k := len(chain) - 1; k >= 0; k-- {
		target, ok := chain[k].Graphs[cfg.Graph]
		if !ok {
			continue
		}
		if slices.Contains(chain, target) {
			bad("config.graph", "graph %q contains this node: a subgraph cannot start itself", cfg.Graph)
		}
		return
	}
	bad("config.graph", "unknown graph %q (not in graphs)", cfg.Graph)
}

// validateToolGraphs checks that each subgraph tool of an agent node
// (config.tools[i].graph) names a graph in scope, as a subgraph node's
// config.graph must.
func validateToolGraphs(def *Definition, n *Node, scope []*Definition, bad badFunc) {
	var cfg struct {
		Tools []agentToolConfig `json:"tools"`
	}
	if len(n.Config) == 0 || json.Unmarshal(n.Config, &cfg) != nil {
		return // validateExecutorConfig reports it
	}
	chain := append(slices.Clip(scope), def)
	for i, t := range cfg.Tools {
		if t.Graph == "" {
			continue
		}
		found := false
		for k := len(chain) - 1; k >= 0 && !found; k-- {
			_, found = chain[k].Graphs[t.Graph]
		}
		if !found {
			bad(fmt.Sprintf("config.tools[%d].graph", i), "unknown graph %q (not in graphs)", t.Graph)
		}
	}
}

// validateEdges checks the edges and compiles their conditions. It reports
// whether every edge's ends are known, which reachability needs.
//
// Size: one check per edge field, in the field's order.
func validateEdges(g *Graph, o *options, p *problems) bool {
	def := g.def
	g.cond = make([]*expr, len(def.Edges))
	endsOK := true
	seen := map[Edge]int{}
	for i := range def.Edges {
		e := &def.Edges[i]
		bad := func(field, format string, args ...any) { p.edge(i, e, field, format, args...) }
		if !validateEnds(g, e, bad) {
			endsOK = false
		}
		if e.From == Start && e.Action != DefaultAction {
			bad("action", "edges from START take the default action only, got %q", e.Action)
		}
		if e.Timeout {
			if n, ok := g.Node(e.From); !ok || n.Type != TypeHuman && !awaitsApproval(n) {
				bad("timeout", "timeout edges must leave a human node (or an agent node with a tool whose approval is required)")
			}
		}
		switch e.OnMissing {
		case "", OnMissingFail, OnMissingFalse:
			if e.OnMissing != "" && e.Condition == "" {
				bad("onMissing", "the edge has no condition (when) to read a key")
			}
		default:
			bad("onMissing", "want %q or %q, got %q", OnMissingFalse, OnMissingFail, e.OnMissing)
		}
		if e.Condition != "" {
			if x, msg := compileExpr(e.Condition, boolExpr, o); msg != "" {
				bad("when", "%s", msg)
			} else {
				g.cond[i] = x
			}
		}
		if j, dup := seen[*e]; dup {
			bad("", "duplicate of edge %d", j+1)
		} else {
			seen[*e] = i
		}
	}
	if len(def.Nodes) > 0 && len(g.out[Start]) == 0 {
		p.top("edges", "no edge leaves START")
	}
	if len(def.Nodes) > 0 && len(g.in[End]) == 0 && len(g.in[Continue]) == 0 {
		p.top("edges", "no edge enters END (or CONTINUE)")
	}
	return endsOK
}

// validateEnds checks an edge's source and target, and reports whether
// both are known.
func validateEnds(g *Graph, e *Edge, bad badFunc) bool {
	ok := true
	switch {
	case e.From == "":
		bad("from", "missing source node")
		ok = false
	case e.From == End || e.From == Continue:
		bad("from", "no edge can leave %s", e.From)
		ok = false
	case !g.known(e.From):
		bad("from", "unknown node %q", e.From)
		ok = false
	}
	switch {
	case e.To == "":
		bad("to", "missing target node")
		ok = false
	case e.To == Start:
		bad("to", "no edge can enter START")
		ok = false
	case !g.known(e.To):
		bad("to", "unknown node %q", e.To)
		ok = false
	}
	return ok
}

// validateReach reports nodes that no run can activate and nodes from which
// no run can finish.
func validateReach(g *Graph, p *problems) {
	fromStart := walk(Start, func(id string) []string {
		var next []string
		for _, i := range g.out[id] {
			next = append(next, g.def.Edges[i].To)
		}
		return next
	})
	prevOf := func(id string) []string {
		var prev []string
		for _, i := range g.in[id] {
			prev = append(prev, g.def.Edges[i].From)
		}
		return prev
	}
	toEnd := walk(End, prevOf)
	for id := range walk(Continue, prevOf) {
		toEnd[id] = true // a run may finish by continuing as new
	}
	reported := map[string]bool{}
	for _, n := range g.def.Nodes {
		if n.ID == "" || reported[n.ID] {
			continue
		}
		reported[n.ID] = true
		if !fromStart[n.ID] {
			p.node(n.ID, "", "not reachable from START")
		} else if !toEnd[n.ID] {
			p.node(n.ID, "", "no path to END")
		}
	}
}

func walk(from string, next func(string) []string) map[string]bool {
	seen := map[string]bool{from: true}
	stack := []string{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range next(id) {
			if !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	return seen
}
