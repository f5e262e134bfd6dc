package graph

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Limits. A graph comes from outside (a file, a client's run-started
// event, which every coordinator compiles), so what it may cost is
// bounded before it is compiled; exceeding a limit rejects the graph with
// a located error (ErrInvalidGraph), in time linear in its size:
//
//	MaxGraphBytes       8 MiB  the file, and its JSON form after YAML
//	                           conversion (anchors cannot inflate it)
//	MaxDocumentDepth    64     nesting of objects and lists in the document
//	MaxSubgraphDepth    8      graphs within graphs ("graphs" in a graph)
//	MaxNodes            1000   nodes of one graph (edges: 4 per node, and
//	                           at least 1000)
//	MaxTotalNodes       5000   nodes of the document, all its graphs
//	MaxExpandedNodes    10000  nodes a run can reach through its subgraph
//	                           nodes, each counted as often as it can be
//	                           started (a subgraph's nodes once per
//	                           subgraph node that starts it, recursively)
//	MaxExpressionLength 4096   bytes of one CEL expression (when, map.over,
//	                           router conditions)
//
// The depth limits are checked by a scan of the document before it is
// decoded (decoding and canonicalising cost a pass per level of nesting);
// the counts on the decoded definition before it is validated.
const (
	MaxGraphBytes       = maxFileSize
	MaxDocumentDepth    = 64
	MaxSubgraphDepth    = 8
	MaxNodes            = 1000
	MaxTotalNodes       = 5000
	MaxExpandedNodes    = 10000
	MaxExpressionLength = 4096
)

// maxEdges is the most edges one graph may have.
func maxEdges(nodes int) int { return max(4*nodes, MaxNodes) }

// checkDocument checks a graph document's JSON form against the limits
// that must hold before it is decoded: its size, and the depth of its
// nesting and of its graphs. It reports whether the document is within
// them.
func checkDocument(js []byte, p *problems) bool {
	if len(js) > MaxGraphBytes {
		p.top("", "graph is %d bytes as JSON, larger than the limit of %d", len(js), MaxGraphBytes)
		return false
	}
	if d, at := jsonDepth(js); d > MaxDocumentDepth {
		line, col := position(js, int64(at))
		p.top("", "line %d, column %d (of the JSON form): nesting deeper than the limit of %d", line, col, MaxDocumentDepth)
		return false
	}
	return checkSubgraphDepth(js, 0, "", p)
}

// jsonDepth returns the deepest nesting of objects and lists in valid
// JSON, and the offset where it is first reached: one pass, no
// allocation.
func jsonDepth(js []byte) (deepest, at int) {
	depth, inString, escaped := 0, false, false
	for i, c := range js {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > deepest {
				deepest, at = depth, i
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest, at
}

// checkSubgraphDepth follows the "graphs" members of a document (whose
// nesting is bounded already) and reports a graph nested deeper than
// MaxSubgraphDepth, by its path.
func checkSubgraphDepth(js []byte, depth int, path string, p *problems) bool {
	var top struct {
		Graphs map[string]json.RawMessage `json:"graphs"`
	}
	if json.Unmarshal(js, &top) != nil || len(top.Graphs) == 0 {
		return true // not this check's to report
	}
	if depth+1 > MaxSubgraphDepth {
		p.top("graphs", "graph %q: subgraphs nested deeper than the limit of %d", path, MaxSubgraphDepth)
		return false
	}
	for _, name := range sortedKeys(top.Graphs) {
		sub := name
		if path != "" {
			sub = path + "/" + name
		}
		if !checkSubgraphDepth(top.Graphs[name], depth+1, sub, p) {
			return false
		}
	}
	return true
}

// checkCounts checks a decoded definition's node and edge counts, its
// subgraph nesting and how many nodes its runs can reach through subgraph
// nodes (which also finds subgraphs that start each other: a run could
// start child runs forever). It reports whether the definition is within
// the limits.
func checkCounts(def *Definition, p *problems) bool {
	total, ok := 0, true
	var walk func(d *Definition, depth int, q *problems)
	walk = func(d *Definition, depth int, q *problems) {
		if d == nil {
			return
		}
		if depth > MaxSubgraphDepth {
			q.top("graphs", "subgraphs nested deeper than the limit of %d", MaxSubgraphDepth)
			ok = false
			return
		}
		if len(d.Nodes) > MaxNodes {
			q.top("nodes", "%d nodes, more than the limit of %d", len(d.Nodes), MaxNodes)
			ok = false
		}
		if len(d.Edges) > maxEdges(len(d.Nodes)) {
			q.top("edges", "%d edges, more than the limit of %d for %d nodes", len(d.Edges), maxEdges(len(d.Nodes)), len(d.Nodes))
			ok = false
		}
		total += len(d.Nodes)
		for _, name := range sortedKeys(d.Graphs) {
			sub := q.sub(name)
			walk(d.Graphs[name], depth+1, sub)
			q.merge(sub)
		}
	}
	walk(def, 0, p)
	if total > MaxTotalNodes {
		p.top("", "%d nodes in all, more than the limit of %d", total, MaxTotalNodes)
		ok = false
	}
	if !ok {
		return false
	}
	return checkExpanded(def, p)
}

// checkExpanded counts the nodes a run of def can reach, expanding each
// subgraph node into the graph it starts, with the scoping rule of
// validateSubgraphRef (the nearest enclosing graph that has the name).
// Each graph's expansion is computed once (memoised), so the check is
// linear in the document even when the expansion is exponential.
func checkExpanded(def *Definition, p *problems) bool {
	x := &expander{p: p, memo: map[*Definition]int{}}
	_, ok := x.expand(def, nil, "")
	return ok
}

// expander counts the nodes a graph expands to, once per graph.
type expander struct {
	p    *problems
	memo map[*Definition]int // a graph's count, or visiting
}

const visiting = -1

// expand counts d's nodes and, for each subgraph node, those of the graph
// it starts; scope lists the enclosing graphs, path names d.
func (x *expander) expand(d *Definition, scope []*Definition, path string) (int, bool) {
	switch n, seen := x.memo[d]; {
	case seen && n == visiting:
		x.p.top("graphs", "graph %q starts itself through its subgraphs: a run could start child runs without end", path)
		return 0, false
	case seen:
		return n, true
	}
	x.memo[d] = visiting
	chain := append(slices.Clip(scope), d)
	n := len(d.Nodes)
	for i := range d.Nodes {
		node := &d.Nodes[i]
		k, ok := x.expandNode(node, chain, path)
		if !ok {
			return 0, false
		}
		if n += k; n > MaxExpandedNodes {
			q := &problems{source: x.p.source, graph: path}
			q.node(node.ID, "config.graph", "a run of this graph can reach more than %d nodes through its subgraphs (the limit)", MaxExpandedNodes)
			x.p.merge(q)
			return 0, false
		}
	}
	x.memo[d] = n
	return n, true
}

// expandNode counts the nodes of the graph a subgraph node starts (none
// for other nodes, and for references validate reports).
func (x *expander) expandNode(node *Node, chain []*Definition, path string) (int, bool) {
	if node.Type != TypeSubgraph {
		return 0, true
	}
	var cfg struct {
		Graph string `json:"graph"`
	}
	if json.Unmarshal(node.Config, &cfg) != nil {
		return 0, true // validate reports it
	}
	target, tscope, tpath := resolveGraph(chain, cfg.Graph, path)
	if target == nil || slices.Contains(chain, target) {
		return 0, true // validate reports it
	}
	return x.expand(target, tscope, tpath)
}

// resolveGraph finds the graph name refers to from the innermost graph of
// chain outwards, with the scope and path it is defined in.
func resolveGraph(chain []*Definition, name, path string) (*Definition, []*Definition, string) {
	for k := len(chain) - 1; k >= 0; k-- {
		if target, ok := chain[k].Graphs[name]; ok && target != nil {
			// The path of chain[k] is path with len(chain)-1-k names
			// dropped from its end.
			base := path
			for range len(chain) - 1 - k {
				base = parentPath(base)
			}
			tpath := name
			if base != "" {
				tpath = base + "/" + name
			}
			return target, slices.Clip(chain[:k+1]), tpath
		}
	}
	return nil, nil, ""
}

func parentPath(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return ""
}

// checkExpression bounds one expression's source before it is compiled.
func checkExpression(src string) string {
	if len(src) > MaxExpressionLength {
		return fmt.Sprintf("expression is %d bytes, longer than the limit of %d", len(src), MaxExpressionLength)
	}
	return ""
}
