package graph

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorPositions checks that each problem names the line and column a
// person would point at, in YAML written wrong in the common ways.
func TestErrorPositions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the problem's text, position included
	}{
		{"bad indent", "name: t\nnodes:\n  - id: a\n    type: echo\n   bad: 1\n",
			"line 5, column 4: invalid YAML: did not find expected '-' indicator"},
		{"unclosed double quote", "name: t\nnodes:\n  - id: \"a\n    type: echo\n",
			"line 3, column 9: invalid YAML: found unexpected end of stream (the \" here is never closed)"},
		{"unclosed single quote", "name: 'it''s\nnodes: []\n",
			"line 1, column 7: invalid YAML: found unexpected end of stream (the ' here is never closed)"},
		{"unclosed quote after a comment with an apostrophe", "# it's a graph\nname: t\nnodes:\n  - {id: \"a, type: echo}\n",
			"line 4, column 10: invalid YAML: found unexpected end of stream"},
		{"tab indent", "name: t\nnodes:\n\t- id: a\n",
			"line 3, column 1: invalid YAML: found character that cannot start any token (YAML indents with spaces, not tabs)"},
		{"second colon", "name: t\nnodes:\n  - id: a\n    type: echo: x\n",
			"line 4, column 15: invalid YAML: mapping values are not allowed in this context"},
		{"unclosed flow list", "name: t\nnodes: [\n",
			"line 2, column 8: invalid YAML: did not find expected node content (the [ here is never closed)"},
		{"unclosed flow list before a key", "name: t\nnodes: [{id: a, type: echo}\nedges: []\n",
			"line 2, column 8: invalid YAML: did not find expected ',' or ']' (the [ here is never closed)"},
		{"duplicated key", "name: t\nnodes:\n  - id: a\n    type: echo\n    type: sleep\nedges: [{from: START, to: a}, {from: a, to: END}]\n",
			`line 5, column 5: field "nodes[0].type": duplicate key (first given at line 4, column 5)`},
		{"wrong type", "name: t\nnodes:\n  - id: a\n    type: echo\n    join: many\nedges: [{from: START, to: a}, {from: a, to: END}]\n",
			`line 5, column 11: node "a": field "join": `},
		{"wrong type in a nested field", "name: t\nnodes:\n  - id: a\n    type: echo\n    retry:\n      maxAttempts: lots\nedges: [{from: START, to: a}, {from: a, to: END}]\n",
			`line 6, column 20: node "a": field "retry.maxAttempts": want an integer, got string`},
		{"unknown field", "name: t\nnodes:\n  - id: a\n    type: echo\n    timeot: 1s\nedges: [{from: START, to: a}, {from: a, to: END}]\n",
			`line 5, column 5: node "a": field "timeot": unknown field (did you mean "timeout"?)`},
		{"unknown type", "name: t\nnodes:\n  - id: a\n    type: ecko\nedges: [{from: START, to: a}, {from: a, to: END}]\n",
			`line 4, column 11: node "a": field "type": unknown type "ecko" (did you mean echo?)`},
		{"unknown edge field", "name: t\nnodes: [{id: a, type: echo}]\nedges:\n  - {from: START, to: a, wehn: x}\n  - {from: a, to: END}\n",
			`line 4, column 26: edge 1 (START -> a): field "wehn": unknown field (did you mean "when"?)`},
		{"unknown node in an edge", "name: t\nnodes: [{id: a, type: echo}]\nedges:\n  - {from: START, to: b}\n",
			`line 4, column 23: edge 1 (START -> b): field "to": unknown node "b"`},
		{"in a subgraph", "name: t\nnodes: [{id: a, type: echo}]\nedges: [{from: START, to: a}, {from: a, to: END}]\ngraphs:\n  child:\n    nodes:\n      - {id: b, type: ecko}\n    edges: [{from: START, to: b}, {from: b, to: END}]\n",
			`line 7, column 23: graph "child": node "b": field "type": unknown type "ecko" (did you mean echo?)`},
		{"JSON", "{\"name\": \"t\",\n \"nodes\": [{\"id\": \"a\", \"type\": \"ecko\"}],\n \"edges\": []}",
			`line 2, column 32: node "a": field "type": unknown type "ecko"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "x.yaml")
			if !errors.Is(err, ErrInvalidGraph) {
				t.Fatalf("got %v, want ErrInvalidGraph", err)
			}
			if !strings.Contains(err.Error(), "x.yaml: "+tt.want) {
				t.Errorf("error does not contain %q:\n%v", tt.want, err)
			}
		})
	}
}
