package graphrt_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestOf: a compiled graph, and each of its subgraphs, gives its evaluator;
// a graph that package graph did not compile is refused loudly.
func TestOf(t *testing.T) {
	g, err := graph.New("of").
		Node("a", "echo").
		Node("b", "echo").
		Edge(graph.Start, "a").
		Edge("a", "b", graph.If("state.go")).
		Edge("b", graph.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ev := graphrt.Of(g)
	if got := ev.Outgoing("a"); !slices.Equal(got, []int{1}) {
		t.Errorf("Outgoing(a) = %v, want [1]", got)
	}
	for _, tc := range []struct {
		state map[string]any
		want  bool
	}{{map[string]any{"go": true}, true}, {map[string]any{"go": false}, false}} {
		taken, err := ev.EdgeTaken(1, "", graphrt.Env{State: tc.state})
		if err != nil || taken != tc.want {
			t.Errorf("EdgeTaken(1) with state %v = %v, %v; want %v", tc.state, taken, err, tc.want)
		}
	}

	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "not compiled by package graph") {
			t.Errorf("Of(zero graph) recovered %v, want a panic naming the cause", r)
		}
	}()
	graphrt.Of(&graph.Graph{})
}
