package ui

import (
	"errors"
	"strings"

	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// graphView is a run's graph as the page lays it out.
type graphView struct {
	Nodes []graphNode `json:"nodes"`
	Edges []graphEdge `json:"edges"`
}

type graphNode struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Queue    string `json:"queue"`
	Label    string `json:"label"`
	Subgraph bool   `json:"subgraph"`
	// Local marks a node the coordinator runs itself (routers, human
	// nodes, subgraphs, transforms on the default queue): no worker of
	// its queue is needed.
	Local bool `json:"local"`
}

type graphEdge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Label string `json:"label"`
	Back  bool   `json:"back"`
}

// Types of the graph view's START and END nodes.
const (
	typeStart = "start"
	typeEnd   = "end"
)

// viewGraph reads the graph a run recorded in its run-started event.
func viewGraph(st *projection.State) (*graphView, error) {
	if len(st.Graph) == 0 {
		return nil, errors.New("the run's log holds no graph")
	}
	g, err := graph.Parse(st.Graph, "run "+st.RunID, graph.AllowAnyType())
	if err != nil {
		return nil, err
	}
	return graphViewOf(g), nil
}

// graphViewOf lists g's nodes, START first and END last, and its edges in
// definition order.
func graphViewOf(g *graph.Graph) *graphView {
	def := g.Definition()
	v := &graphView{
		Nodes: []graphNode{{ID: graph.Start, Type: typeStart, Label: graph.Start}},
		Edges: make([]graphEdge, 0, len(def.Edges)),
	}
	ev := graphrt.Of(g)
	for _, n := range def.Nodes {
		label := n.Name
		if label == "" {
			label = n.ID
		}
		local := ev.IsLocal(n.ID) || n.Type == graph.TypeRouter || n.Type == graph.TypeHuman || n.Type == graph.TypeSubgraph
		v.Nodes = append(v.Nodes, graphNode{ID: n.ID, Type: n.Type, Queue: n.Queue, Label: label, Subgraph: n.Type == graph.TypeSubgraph, Local: local})
	}
	v.Nodes = append(v.Nodes, graphNode{ID: graph.End, Type: typeEnd, Label: graph.End})
	continues := false
	for _, e := range def.Edges {
		continues = continues || e.To == graph.Continue
	}
	if continues {
		// Continue-as-new: the run ends there and its continuation starts.
		v.Nodes = append(v.Nodes, graphNode{ID: graph.Continue, Type: typeEnd, Label: graph.Continue})
	}
	for i, e := range def.Edges {
		v.Edges = append(v.Edges, graphEdge{From: e.From, To: e.To, Label: edgeLabel(e), Back: ev.IsBackEdge(i)})
	}
	return v
}

// edgeLabel says when an edge is taken: its action, its condition, or
// on the node's timeout.
func edgeLabel(e graph.Edge) string {
	var parts []string
	if e.Action != "" && e.Action != graph.DefaultAction {
		parts = append(parts, e.Action)
	}
	if e.Condition != "" {
		parts = append(parts, e.Condition)
	}
	if e.Timeout {
		parts = append(parts, "timeout")
	}
	return strings.Join(parts, ": ")
}
