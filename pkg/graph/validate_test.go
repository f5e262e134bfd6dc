package graph

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const base = `name: t
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		opts []Option
		want []string // substrings of the error, each with its location
	}{
		{"missing name", `nodes: [{id: a, type: echo}]
edges: [{from: START, to: a}, {from: a, to: END}]`, nil,
			[]string{`x.yaml: field "name": missing graph name`}},
		{"no nodes", `{name: t, nodes: [], edges: []}`, nil,
			[]string{`x.yaml: field "nodes": graph has no nodes`}},
		{"executor configs, every problem at once", `name: t
nodes:
  - {id: t, type: transform, config: {set: {a: "state.x +", b: "1"}, output: "][" }}
  - {id: s, type: sleep, config: {duration: banana}}
  - {id: neg, type: sleep, config: {duration: -5}}
  - {id: h, type: http, config: {url: "ftp://example.com/x"}}
  - {id: ok, type: sleep, config: {duration: 1.5s}}
edges: [{from: START, to: t}, {from: t, to: s}, {from: s, to: neg}, {from: neg, to: h}, {from: h, to: ok}, {from: ok, to: END}]`, nil,
			[]string{`node "t": field "config.set.a": CEL "state.x +"`, `node "t": field "config.output": CEL "]["`,
				`node "s": field "config.duration": "banana" is not a duration`, `node "neg": field "config.duration": must not be negative`,
				`node "h": field "config.url": "ftp://example.com/x" is not an absolute http or https URL`}},
		{"human node acceptance", `name: t
nodes:
  - {id: h, type: human, outputSchema: {type: 7}, config: {checks: [{expr: "output.x +"}, {message: "no expr"}]}}
edges: [{from: START, to: h}, {from: h, to: END}]`, nil,
			[]string{`node "h": field "outputSchema": does not compile`, `node "h": field "config.checks[0].expr": CEL "output.x +"`,
				`node "h": field "config.checks[1].expr": missing expr`}},
		{"empty node id", `name: t
nodes: [{type: echo}]
edges: [{from: START, to: END}]`, nil,
			[]string{`field "nodes[0].id": missing node id`}},
		{"duplicate node id", `name: t
nodes: [{id: a, type: echo}, {id: a, type: noop}]
edges: [{from: START, to: a}, {from: a, to: END}]`, nil,
			[]string{`node "a": field "id": duplicate node id (first used by nodes[0])`}},
		{"START as id", `name: t
nodes: [{id: START, type: echo}]
edges: [{from: START, to: END}]`, nil,
			[]string{`node "START": field "id": START is reserved`}},
		{"END as id", `name: t
nodes: [{id: END, type: echo}]
edges: [{from: START, to: END}]`, nil,
			[]string{`node "END": field "id": END is reserved`}},
		{"dot in id", `name: t
nodes: [{id: a.b, type: echo}]
edges: [{from: START, to: a.b}, {from: a.b, to: END}]`, nil,
			[]string{`node "a.b": field "id": node id must start with a letter`}},
		{"wildcard and space in id", `name: t
nodes: [{id: "a*", type: echo}, {id: "b c", type: echo}]
edges: [{from: START, to: "a*"}, {from: "a*", to: "b c"}, {from: "b c", to: END}]`, nil,
			[]string{`node "a*": field "id"`, `node "b c": field "id"`}},
		{"edge to unknown node", base + `  - {from: a, to: b}`, nil,
			[]string{`x.yaml: edge 3 (a -> b): field "to": unknown node "b"`}},
		{"edge from unknown node", base + `  - {from: zz, to: a}`, nil,
			[]string{`edge 3 (zz -> a): field "from": unknown node "zz"`}},
		{"edge to START", base + `  - {from: a, to: START}`, nil,
			[]string{`edge 3 (a -> START): field "to": no edge can enter START`}},
		{"edge from END", base + `  - {from: END, to: a}`, nil,
			[]string{`edge 3 (END -> a): field "from": no edge can leave END`}},
		{"edge missing ends", base + `  - {action: x}`, nil,
			[]string{`edge 3 ("" -> ""): field "from": missing source node`, `field "to": missing target node`}},
		{"unreachable node", `name: t
nodes: [{id: a, type: echo}, {id: b, type: echo}]
edges: [{from: START, to: a}, {from: a, to: END}, {from: b, to: END}]`, nil,
			[]string{`node "b": not reachable from START`}},
		{"no path to END", `name: t
nodes: [{id: a, type: echo}, {id: b, type: echo}]
edges: [{from: START, to: a}, {from: a, to: END}, {from: a, to: b}]`, nil,
			[]string{`node "b": no path to END`}},
		{"no edges", `name: t
nodes: [{id: a, type: echo}]
edges: []`, nil,
			[]string{`field "edges": no edge leaves START`, `field "edges": no edge enters END`}},
		{"missing type", `name: t
nodes: [{id: a}]
edges: [{from: START, to: a}, {from: a, to: END}]`, nil,
			[]string{`node "a": field "type": missing type`}},
		{"unknown type", strings.Replace(base, "echo", "frobnicate", 1), nil,
			[]string{`node "a": field "type": unknown type "frobnicate" (known: `}},
		{"malformed duration", strings.Replace(base, "type: echo", "type: echo, timeout: 3 sec", 1), nil,
			[]string{`x.yaml: node "a": field "timeout": malformed duration "3 sec" (want e.g. "250ms", "30s", "1m")`}},
		{"duration not a string", strings.Replace(base, "type: echo", "type: echo, heartbeat: 5", 1), nil,
			[]string{`node "a": field "heartbeat": want a duration string such as "30s", got 5`}},
		{"malformed retry interval", strings.Replace(base, "type: echo", "type: echo, retry: {initialInterval: soon}", 1), nil,
			[]string{`node "a": field "retry.initialInterval": malformed duration "soon"`}},
		{"negative node maxIterations", strings.Replace(base, "type: echo", "type: echo, maxIterations: -1", 1), nil,
			[]string{`node "a": field "maxIterations": must not be negative, got -1`}},
		{"negative graph maxIterations", "maxIterations: -2\n" + base, nil,
			[]string{`x.yaml: field "maxIterations": must not be negative, got -2`}},
		{"negative retention", "retention: -1h\n" + base, nil,
			[]string{`x.yaml: field "retention": must not be negative, got -1h`}},
		{"bad retention", "retention: forever\n" + base, nil,
			[]string{`x.yaml: field "retention": want a duration such as 720h, got "forever"`}},
		{"bad search attribute", "searchAttributes: [customer, 'a.b', customer]\n" + base, nil,
			[]string{`x.yaml: field "searchAttributes[1]": attribute "a.b" must start with a letter`, `x.yaml: field "searchAttributes[2]": attribute "customer" given twice`}},
		{"too many search attributes", "searchAttributes: [a, b, c, d, e, f, g, h, i]\n" + base, nil,
			[]string{`x.yaml: field "searchAttributes": at most 8, got 9`}},
		{"retry sanity", strings.Replace(base, "type: echo", "type: echo, retry: {maxAttempts: -1, backoffCoefficient: 0.5, jitter: 1.5}", 1), nil,
			[]string{`field "retry.maxAttempts": must not be negative`, `field "retry.backoffCoefficient": must be at least 1, got 0.5`, `field "retry.jitter": must be between 0 and 1, got 1.5`}},
		{"retry intervals inverted", strings.Replace(base, "type: echo", "type: echo, retry: {initialInterval: 2m, maxInterval: 1m}", 1), nil,
			[]string{`field "retry.maxInterval": 1m0s is less than initialInterval 2m0s`}},
		{"unknown reducer", "state: {reducers: {items: concat}}\n" + base, nil,
			[]string{`field "state.reducers.items": unknown reducer "concat"`}},
		{"join n too large", `name: t
nodes: [{id: a, type: echo}, {id: b, type: echo, join: 2}]
edges: [{from: START, to: a}, {from: a, to: b}, {from: b, to: b}, {from: b, to: END}]`, nil,
			[]string{`node "b": field "join": join waits for 2 incoming edges but the node has only 1 (not counting back edges)`}},
		{"join bad value", strings.Replace(base, "type: echo", "type: echo, join: most", 1), nil,
			[]string{`node "a": field "join": want "all", "any" or a number, got "most"`}},
		{"join zero", strings.Replace(base, "type: echo", "type: echo, join: 0", 1), nil,
			[]string{`node "a": field "join": n-of needs n ≥ 1, got 0`}},
		{"map over empty", strings.Replace(base, "type: echo", "type: echo, map: {over: ''}", 1), nil,
			[]string{`node "a": field "map.over": missing list expression`}},
		{"map over not a list", strings.Replace(base, "type: echo", `type: echo, map: {over: "'x'"}`, 1), nil,
			[]string{`node "a": field "map.over": CEL "'x'": want a list, expression gives string`}},
		{"unknown effect", strings.Replace(base, "type: echo", "type: echo, effect: risky", 1), nil,
			[]string{`node "a": field "effect": unknown effect "risky"`}},
		{"unknown checkpoint", strings.Replace(base, "type: echo", "type: echo, checkpoint: sometimes", 1), nil,
			[]string{`node "a": field "checkpoint": unknown checkpoint "sometimes"`}},
		{"subgraph unknown graph", `name: t
nodes: [{id: a, type: subgraph, config: {graph: nope}}]
edges: [{from: START, to: a}, {from: a, to: END}]`, nil,
			[]string{`node "a": field "config.graph": unknown graph "nope"`}},
		{"subgraph with map", `name: t
nodes: [{id: a, type: subgraph, map: {over: "[1, 2]"}, config: {graph: child}}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child:
    nodes: [{id: x, type: echo}]
    edges: [{from: START, to: x}, {from: x, to: END}]`, nil,
			[]string{`x.yaml: node "a": field "map": a subgraph node cannot run once per item yet`}},
		{"subgraph without config", `name: t
nodes: [{id: a, type: subgraph}]
edges: [{from: START, to: a}, {from: a, to: END}]`, nil,
			[]string{`node "a": field "config.graph": subgraph node needs config`}},
		{"subgraph starting itself", `name: t
nodes: [{id: a, type: subgraph, config: {graph: child}}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child:
    nodes: [{id: again, type: subgraph, config: {graph: child}}]
    edges: [{from: START, to: again}, {from: again, to: END}]`, nil,
			[]string{`graph "child": node "again": field "config.graph": graph "child" contains this node`}},
		{"nested graph errors", `name: t
nodes: [{id: a, type: subgraph, config: {graph: child}}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child:
    nodes: [{id: x, type: echo, timeout: forever}]
    edges: [{from: START, to: x}, {from: x, to: y}]`, nil,
			[]string{`x.yaml: graph "child": node "x": field "timeout": malformed duration "forever"`}},
		{"nested graph validation", `name: t
nodes: [{id: a, type: subgraph, config: {graph: child}}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child:
    nodes: [{id: x, type: echo}]
    edges: [{from: START, to: x}, {from: x, to: zz}]`, nil,
			[]string{`x.yaml: graph "child": edge 2 (x -> zz): field "to": unknown node "zz"`}},
		{"YAML boolean as id", base + `  - {from: a, to: n}`, nil,
			[]string{`edge 3 (a -> ""): field "to": want a string, got bool (in YAML, quote`}},
		{"graph name mismatch", `name: t
nodes: [{id: a, type: echo}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child: {name: other, nodes: [{id: x, type: echo}], edges: [{from: START, to: x}, {from: x, to: END}]}`, nil,
			[]string{`field "graphs.child": graph's name "other" differs from its key "child"`}},
		{"timeout edge from non-human", base + `  - {from: a, to: END, timeout: true}`, nil,
			[]string{`edge 3 (a -> END): field "timeout": timeout edges must leave a human node`}},
		{"CEL syntax error", base + `  - {from: a, to: END, when: "state.x >"}`, nil,
			[]string{`edge 3 (a -> END): field "when": CEL "state.x >": 1:`}},
		{"CEL not bool", base + `  - {from: a, to: END, when: "1 + 2"}`, nil,
			[]string{`edge 3 (a -> END): field "when": CEL "1 + 2": want a bool, expression gives int`}},
		{"CEL undeclared", base + `  - {from: a, to: END, when: "foo > 1"}`, nil,
			[]string{`edge 3 (a -> END): field "when": CEL "foo > 1": 1:1: undeclared reference to 'foo'`}},
		{"node when bad", strings.Replace(base, "type: echo", `type: echo, when: "state.x ="`, 1), nil,
			[]string{`node "a": field "when": CEL`}},
		{"unresolved func", base + `  - {from: a, to: END, when: "func:vip"}`, nil,
			[]string{`edge 3 (a -> END): field "when": no Go condition registered as "vip"`}},
		{"map over func", strings.Replace(base, "type: echo", `type: echo, map: {over: "func:x"}`, 1), nil,
			[]string{`node "a": field "map.over": Go function conditions are not allowed here`}},
		{"bad queue", strings.Replace(base, "type: echo", "type: echo, queue: io.fast", 1), nil,
			[]string{`node "a": field "queue": queue name "io.fast"`}},
		{"queue over the token limit", strings.Replace(base, "type: echo", "type: echo, queue: q"+strings.Repeat("x", maxTokenLen), 1), nil,
			[]string{`x.yaml: node "a": field "queue": queue name is 129 characters, the limit is 128 (it is a subject token)`}},
		{"node id over the limit", strings.NewReplacer("id: a", "id: n"+strings.Repeat("x", MaxNodeIDLen), "to: a", "to: n"+strings.Repeat("x", MaxNodeIDLen), "from: a", "from: n"+strings.Repeat("x", MaxNodeIDLen)).Replace(base), nil,
			[]string{`x.yaml: node "n` + strings.Repeat("x", MaxNodeIDLen) + `": field "id": node id is 63 characters, the limit is 62`}},
		{"node id over the limit in a subgraph", `name: t
nodes: [{id: a, type: subgraph, config: {graph: child}}]
edges: [{from: START, to: a}, {from: a, to: END}]
graphs:
  child:
    nodes: [{id: ` + strings.Repeat("y", MaxNodeIDLen+1) + `, type: echo}]
    edges: [{from: START, to: ` + strings.Repeat("y", MaxNodeIDLen+1) + `}, {from: ` + strings.Repeat("y", MaxNodeIDLen+1) + `, to: END}]`, nil,
			[]string{`x.yaml: graph "child": node "` + strings.Repeat("y", MaxNodeIDLen+1) + `": field "id": node id is 63 characters`}},
		{"start edge with action", base + `  - {from: START, to: a, action: go}`, nil,
			[]string{`edge 3 (START -> a): field "action": edges from START take the default action only, got "go"`}},
		{"duplicate edge", base + `  - {from: a, to: END}`, nil,
			[]string{`edge 3 (a -> END): duplicate of edge 2`}},
		{"unknown node field", strings.Replace(base, "type: echo", "type: echo, timeot: 1s", 1), nil,
			[]string{`node "a": field "timeot": unknown field (did you mean "timeout"?)`}},
		{"unrelated field", strings.Replace(base, "type: echo", "type: echo, colour: red", 1), nil,
			[]string{`node "a": field "colour": unknown field`}},
		{"miscased field", strings.Replace(base, "type: echo", "type: echo, maxiterations: 1", 1), nil,
			[]string{`node "a": field "maxiterations": unknown field (did you mean "maxIterations"?)`}},
		{"unknown top field", "colour: blue\n" + base, nil,
			[]string{`x.yaml: field "colour": unknown field`}},
		{"unknown edge field", base + `  - {from: a, to: END, condition: "true"}`, nil,
			[]string{`edge 3 (a -> END): field "condition": unknown field`}},
		{"unknown retry field", strings.Replace(base, "type: echo", "type: echo, retry: {attempts: 3}", 1), nil,
			[]string{`node "a": field "retry.attempts": unknown field`}},
		{"wrong field type", strings.Replace(base, "type: echo", "type: echo, maxIterations: ten", 1), nil,
			[]string{`node "a": field "maxIterations": want an integer, got string`}},
		{"wrong list type", strings.Replace(base, "type: echo", "type: echo, inputs: x", 1), nil,
			[]string{`node "a": field "inputs": want a list of strings, got string`}},
		{"nodes not a list", `{name: t, nodes: 3, edges: []}`, nil,
			[]string{`field "nodes": want a list of nodes, got a number`}},
		{"node not an object", `{name: t, nodes: [3], edges: []}`, nil,
			[]string{`field "nodes[0]": want a node object, got a number`}},
		{"continue-as-new", `name: t
continueAsNew: {graph: v9, maxStateBytes: -1}
nodes: [{id: CONTINUE, type: echo}, {id: a, type: echo}]
edges: [{from: START, to: a}, {from: a, to: CONTINUE}, {from: CONTINUE, to: a}]`, nil,
			[]string{`field "continueAsNew.maxStateBytes": must not be negative`, `field "continueAsNew.graph": no graph "v9" in graphs`,
				`CONTINUE is reserved and cannot be a node id`, `no edge can leave CONTINUE`}},
		{"invalid YAML", "name: t\nnodes: [\n", nil, []string{`x.yaml: invalid YAML: did not find expected node content`}},
		{"top level not an object", "- a\n- b\n", nil, []string{`x.yaml: want a graph object, got a list`}},
		{"empty document", "  \n", nil, []string{`x.yaml: empty document`}},
		{"invalid JSON", "{\"name\": \"t\",\n \"nodes\": [}", nil, []string{`x.yaml: invalid JSON`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "x.yaml", tt.opts...)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidGraph) {
				t.Errorf("errors.Is(err, ErrInvalidGraph) = false for %v", err)
			}
			// Positions are TestErrorPositions's; here, the messages.
			msg := linePosition.ReplaceAllString(err.Error(), "")
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// linePosition matches the "line 3, column 7: " a located problem has.
var linePosition = regexp.MustCompile(`line \d+, column \d+: `)

// A graph may end only by continuing as new (an entity that lives for
// ever), and continue as a newer graph of its graphs.
func TestContinueValidates(t *testing.T) {
	g, err := Parse([]byte(`name: entity
continueAsNew: {graph: entity-v2, onHistoryBudget: true}
graphs:
  entity-v2:
    name: entity-v2
    version: "2"
    nodes: [{id: a, type: echo}]
    edges: [{from: START, to: a}, {from: a, to: CONTINUE}]
nodes: [{id: a, type: echo}]
edges: [{from: START, to: a}, {from: a, to: CONTINUE}]`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if next, ok := g.Subgraph("entity-v2"); !ok || next.Definition().Version != "2" || g.Definition().ContinueAsNew.MaxStateBytesOf() != DefaultMaxContinueStateBytes {
		t.Fatalf("continuation graph %v %v", next, ok)
	}
}

// TestValidationReportsEverything: values that do not decode do not hide
// the problems validation finds, and validation does not echo them.
func TestValidationReportsEverything(t *testing.T) {
	src := `name: t
nodes:
  - {id: a, type: echo, timeout: 3 sec}
  - {id: b, type: nope, join: lots}
  - {id: c, type: echo, retry: {jitter: two}}
  - {id: d, type: sleep, config: {duration: banana}}
edges: []`
	_, err := Parse([]byte(src), "x.yaml")
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("want joined errors, got %v", err)
	}
	want := []string{
		`node "a": field "timeout": malformed duration "3 sec"`,
		`node "b": field "join": want "all", "any" or a number, got "lots"`,
		`node "c": field "retry.jitter": want a number, got string`,
		`node "d": field "config.duration": "banana" is not a duration`,
		`node "b": field "type": unknown type "nope"`,
		`field "edges": no edge leaves START`,
		`node "a": not reachable from START`,
	}
	for _, w := range want {
		if n := strings.Count(err.Error(), w); n != 1 {
			t.Errorf("%q reported %d times, want once:\n%v", w, n, err)
		}
	}
	// Every problem has its place in the file, the decode ones their node
	// and field; they come in the order of the file.
	line := 0
	for _, e := range joined.Unwrap() {
		var ge *Error
		if !errors.As(e, &ge) || ge.Line == 0 || ge.Line < line {
			t.Errorf("error not located, or out of order: %#v", e)
			continue
		}
		line = ge.Line
		if slices.ContainsFunc(want[:4], func(w string) bool { return strings.Contains(ge.Error(), w) }) && (ge.Node == "" || ge.Field == "" || ge.Edge != -1) {
			t.Errorf("decode error not located: %#v", e)
		}
	}
	for _, echo := range []string{`field "join": unknown join`, `field "timeout": must not`} {
		if strings.Contains(err.Error(), echo) {
			t.Errorf("a value that did not decode is blamed again (%q):\n%v", echo, err)
		}
	}

	// When the graph's shape does not decode, validation does not guess.
	_, err = Parse([]byte("name: t\nnodes: [{id: a, type: echo}]\nedges: [{from: START, to: yes}, {from: a, to: END}]"), "x.yaml")
	if err == nil || strings.Contains(err.Error(), "not reachable") || !strings.Contains(err.Error(), `field "to": want a string, got bool`) {
		t.Errorf("shape error: %v", err)
	}
}

func TestErrorFields(t *testing.T) {
	_, err := Parse([]byte(base+`  - {from: a, to: b}`), "x.yaml")
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("want *Error, got %T", err)
	}
	want := Error{Source: "x.yaml", Edge: 2, From: "a", To: "b", Field: "to", Line: 7, Column: 19, Msg: `unknown node "b"`}
	if *ge != want {
		t.Errorf("got %#v\nwant %#v", *ge, want)
	}
}

func TestTypeOptions(t *testing.T) {
	src := []byte(strings.Replace(base, "echo", "scrape", 1))
	if _, err := Parse(src, "x.yaml"); err == nil {
		t.Error("unknown type accepted")
	}
	if _, err := Parse(src, "x.yaml", WithTypes("scrape")); err != nil {
		t.Errorf("WithTypes: %v", err)
	}
	if _, err := Parse(src, "x.yaml", AllowAnyType()); err != nil {
		t.Errorf("AllowAnyType: %v", err)
	}
	// The least config each built-in type needs.
	least := map[string]string{
		"http":      "type: http, config: {url: 'https://example.com/'}",
		"transform": "type: transform, config: {output: 'state'}",
		"llm":       "type: llm, config: {model: m, prompt: hi}",
		TypeWait:    "type: wait, config: {duration: 1h}",
		"agent":     "type: agent, config: {model: m, prompt: hi}",
	}
	for _, typ := range builtinTypes {
		src := strings.Replace(base, "type: echo", "type: "+typ, 1)
		if cfg, ok := least[typ]; ok {
			src = strings.Replace(base, "type: echo", cfg, 1)
		}
		if typ == TypeSubgraph {
			continue
		}
		if _, err := Parse([]byte(src), "x.yaml"); err != nil {
			t.Errorf("built-in type %s: %v", typ, err)
		}
	}
}

func TestCompileDoesNotModify(t *testing.T) {
	def := &Definition{Name: "t", Nodes: []Node{{ID: "a", Type: "echo"}}, Edges: []Edge{{From: Start, To: "a"}, {From: "a", To: End}}}
	g, err := Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	if def.Nodes[0].Queue != "" || def.Edges[0].Action != "" || def.Nodes[0].Retry != nil {
		t.Errorf("Compile modified its argument: %+v", def)
	}
	if n, _ := g.Node("a"); n.Queue != DefaultQueue || n.Join.Kind != JoinAll || n.Effect != EffectPure || n.Retry.MaxAttempts != 3 {
		t.Errorf("defaults not filled: %+v", n)
	}
	if _, err := Compile(nil); !errors.Is(err, ErrInvalidGraph) {
		t.Errorf("Compile(nil) = %v", err)
	}
}
