package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	wexpr "github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/suggest"
)

// CheckConditionReads reports the edge conditions of a compiled graph that
// read a field nothing provides, where the graph says what exists: a
// condition on an edge from START reads an output there is none of, and
// one on an edge from a node with an outputSchema that lists its
// properties (and describes no others: no additionalProperties or
// patternProperties) reads a property the schema does not list (a human node's
// output is the signal's data, so its outputSchema is what a signal
// brings). Each problem is a located *Error (the edge, 1-based, and
// "when"), naming the field; a field tested with has(...) is not reported.
//
// Graph loading does not run this check: a graph recorded in a run's log
// keeps loading as it did. 'weft validate' runs it, and a graph that
// fails it fails validation.
func CheckConditionReads(g *Graph) error {
	p := &problems{}
	for i := range g.def.Edges {
		e := &g.def.Edges[i]
		c := g.cond[i]
		if c == nil || c.prog == nil {
			continue
		}
		for _, path := range c.prog.Paths() {
			if path.Guarded || path.Var != "output" {
				continue
			}
			if msg := outputProvides(g, e, path); msg != "" {
				p.edge(i, e, "when", "%s", msg)
			}
		}
	}
	return p.err()
}

// outputProvides says why a path of output that an edge's condition
// reads is not provided by the edge's source, or "" when it may be.
func outputProvides(g *Graph, e *Edge, path wexpr.Path) string {
	fix := fmt.Sprintf("guard it with has(%s) && ...", path)
	if e.From == Start {
		return fmt.Sprintf("reads %s, but edges from START have no output (read state or invocation); %s", path, fix)
	}
	n, ok := g.Node(e.From)
	if !ok || n.Type == TypeRouter || len(path.Keys) == 0 {
		return "" // a router passes its predecessor's output on
	}
	props, ok := schemaProperties(n.OutputSchema)
	if !ok || slices.Contains(props, path.Keys[0]) {
		return ""
	}
	msg := fmt.Sprintf("reads %s, but node %q provides no field %q: its outputSchema lists %s", path, n.ID, path.Keys[0], quoteList(props))
	if near := nearest(path.Keys[0], props); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg + "; add it to the schema, or " + fix
}

// schemaProperties lists an object schema's top-level properties, and
// whether the schema declares them.
func schemaProperties(raw json.RawMessage) ([]string, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	var s struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		PatternProperties    json.RawMessage            `json:"patternProperties"`
	}
	if json.Unmarshal(raw, &s) != nil || s.Properties == nil || len(s.PatternProperties) > 0 {
		return nil, false
	}
	if a := strings.TrimSpace(string(s.AdditionalProperties)); a != "" && a != "false" {
		return nil, false // extra fields are described: any may come
	}
	return sortedKeys(s.Properties), true
}

// nearest is the name of names that s is likely a typo of, if any.
func nearest(s string, names []string) string { return suggest.ClosestFold(s, names) }
