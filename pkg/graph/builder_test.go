package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
)

func TestBuilderErrors(t *testing.T) {
	f1 := func(map[string]any) bool { return true }
	f2 := func(map[string]any) bool { return false }
	tests := []struct {
		name string
		b    *Builder
		want string
	}{
		{"config not encodable", New("t").Node("a", "echo", Config(map[string]any{"f": func() {}})).Edge(Start, "a").Edge("a", End),
			`node "a": field "config": not valid JSON: json: unsupported type: func()`},
		{"same name, different funcs", New("t").Node("a", "echo").Edge(Start, "a", IfFunc("x", f1)).Edge("a", End, IfFunc("x", f2)),
			`condition "x": registered twice with different functions`},
		{"nil func", New("t").Node("a", "echo").Edge(Start, "a").Edge("a", End, IfFunc[StateCondition]("x", nil)),
			`condition "x": want a StateCondition or InvocationCondition function`},
		{"nil subgraph", New("t").Node("a", "echo").Edge(Start, "a").Edge("a", End).Subgraph("s", (*Builder)(nil)),
			`subgraph "s": nil definition`},
		{"negative timeout", New("t").Node("a", "echo", Timeout(-1)).Edge(Start, "a").Edge("a", End),
			`node "a": field "timeout": must not be negative`},
		{"join n zero", New("t").Node("a", "echo", WaitN(0)).Edge(Start, "a").Edge("a", End),
			`node "a": field "join": n-of needs n ≥ 1, got 0`},
		{"bad effect", New("t").Node("a", "echo", WithEffect("loud")).Edge(Start, "a").Edge("a", End),
			`node "a": field "effect": unknown effect "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.b.Build()
			if !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build() = %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

func TestBuilderOptions(t *testing.T) {
	child := &Definition{Name: "c", Nodes: []Node{{ID: "x", Type: "echo"}}, Edges: []Edge{{From: Start, To: "x"}, {From: "x", To: End}}}
	g, err := New("opts").Description("d").
		Node("h", TypeHuman, Name("Approve"), Describe("asks"), Meta("k", "v"), Heartbeat(5e9), Inputs("a"), Outputs("b"),
			InputSchema(map[string]any{"type": "object"}), OutputSchema(map[string]any{"type": "object"}), Fallback("no"),
			WithCheckpoint(CheckpointBoth), WaitAll()).
		Node("s", TypeSubgraph, Config(map[string]string{"graph": "c"})).
		Edge(Start, "h").
		Edge("h", "s", OnAction("approve")).
		Edge("h", End, OnTimeout()).
		Edge("s", End).
		Subgraph("c", child).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := g.Node("h")
	if h.Name != "Approve" || h.Metadata["k"] != "v" || h.Effect != EffectHuman || h.Checkpoint != CheckpointBoth ||
		string(h.Fallback) != `"no"` || string(h.InputSchema) != `{"type":"object"}` {
		t.Errorf("node options not applied: %+v", h)
	}
	if !g.Edge(2).Timeout {
		t.Error("OnTimeout not applied")
	}
	if ok, _ := graphrt.Of(g).EdgeTaken(2, "", graphrt.Env{}); ok {
		t.Error("timeout edge taken by EdgeTaken")
	}
	if child.Nodes[0].Queue != "" {
		t.Error("Subgraph modified its argument")
	}
}
