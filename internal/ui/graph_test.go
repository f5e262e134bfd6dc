package ui

import (
	"slices"
	"testing"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestUIGraphView: the layout view of a graph names each edge by its
// action, condition or timeout, marks the edges that close cycles, and
// the subgraph nodes.
func TestUIGraphView(t *testing.T) {
	g, err := graph.Parse([]byte(`
name: view
graphs:
  child:
    name: child
    nodes: [{id: inner, type: echo}]
    edges: [{from: START, to: inner}, {from: inner, to: END}]
nodes:
  - {id: step, type: transform, config: {set: {count: "state.count + 1"}}, maxIterations: 5}
  - {id: ask, type: human, config: {timeout: 1h}}
  - {id: sub, type: subgraph, config: {graph: child}}
  - {id: pick, type: echo, queue: cpu, name: "Pick one"}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.count < 3"}
  - {from: step, to: ask, when: "state.count >= 3"}
  - {from: ask, to: sub, timeout: true}
  - {from: ask, to: pick}
  - {from: pick, to: sub, action: left}
  - {from: pick, to: END, action: right}
  - {from: sub, to: END}
`), "view.yaml", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	v, err := viewGraph(&projection.State{RunID: "r", Graph: g.Canonical()})
	if err != nil {
		t.Fatal(err)
	}
	edges := v.Edges
	want := []graphEdge{
		{From: "START", To: "step"},
		{From: "step", To: "step", Label: "state.count < 3", Back: true},
		{From: "step", To: "ask", Label: "state.count >= 3"},
		{From: "ask", To: "sub", Label: "timeout"},
		{From: "ask", To: "pick"},
		{From: "pick", To: "sub", Label: "left"},
		{From: "pick", To: "END", Label: "right"},
		{From: "sub", To: "END"},
	}
	if !slices.Equal(edges, want) {
		t.Errorf("edges\n%+v\nwant\n%+v", edges, want)
	}
	byID := map[string]graphNode{}
	for _, n := range v.Nodes {
		byID[n.ID] = n
	}
	if n := byID["sub"]; !n.Subgraph || !n.Local {
		t.Errorf("sub: %+v, want a local subgraph node", n)
	}
	if n := byID["ask"]; !n.Local || n.Subgraph {
		t.Errorf("ask: %+v, want a local node (the coordinator waits for its signal)", n)
	}
	if n := byID["pick"]; n.Queue != "cpu" || n.Label != "Pick one" || n.Local {
		t.Errorf("pick: %+v, want queue cpu, its name as label, a worker's", n)
	}
	if v.Nodes[0].Type != typeStart || v.Nodes[len(v.Nodes)-1].Type != typeEnd || len(v.Nodes) != 6 {
		t.Errorf("nodes %+v, want START, the four nodes, END", v.Nodes)
	}
	if _, err := viewGraph(&projection.State{RunID: "r", Graph: []byte(`{"name": 1}`)}); err == nil {
		t.Error("a graph that does not parse gave a view")
	}
	if _, err := viewGraph(&projection.State{RunID: "r"}); err == nil {
		t.Error("a run without a graph gave a view")
	}
}
