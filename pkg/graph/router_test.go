package graph_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/graph"
)

func TestRouterActions(t *testing.T) {
	g, err := graph.Parse([]byte(`
name: r
nodes:
  - id: r
    type: router
    config:
      routes:
        - {when: "state.n > 10", action: big}
        - {when: 'invocation.tier == "gold"', action: gold}
      default: small
  - {id: x, type: echo}
edges:
  - {from: START, to: r}
  - {from: r, to: x, action: big}
  - {from: r, to: x, action: gold}
  - {from: r, to: x, action: small}
  - {from: x, to: END}
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		env   graphrt.Env
		want  []string
		wantE error
	}{
		{"first match", graphrt.Env{State: map[string]any{"n": 11.0}, Invocation: map[string]any{"tier": "gold"}}, []string{"big"}, nil},
		{"second", graphrt.Env{State: map[string]any{"n": 1.0}, Invocation: map[string]any{"tier": "gold"}}, []string{"gold"}, nil},
		{"default", graphrt.Env{State: map[string]any{"n": 1.0}, Invocation: map[string]any{"tier": "x"}}, []string{"small"}, nil},
		{"missing key", graphrt.Env{}, nil, graph.ErrEvaluation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := graphrt.Of(g).RouterActions("r", tc.env)
			if !errors.Is(err, tc.wantE) || (tc.wantE == nil && err != nil) || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.wantE)
			}
		})
	}
}

func TestRouterConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"unknown field", `{rutes: []}`, `field "config": router config`},
		{"bad CEL", `{routes: [{when: "state.", action: a}]}`, `field "config.routes[0].when"`},
		{"no action", `{routes: [{when: "true"}]}`, `field "config.routes[0].action": missing action`},
		{"unknown action", `{routes: [{when: "true", action: b}]}`, `action "b" labels no edge`},
		{"unknown default", `{default: c}`, `field "config.default": action "c" labels no edge`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graph.Parse([]byte(`
name: r
nodes: [{id: r, type: router, config: `+tc.config+`}, {id: x, type: echo}]
edges: [{from: START, to: r}, {from: r, to: x, action: a}, {from: x, to: END}]
`), "r.yaml")
			if !errors.Is(err, graph.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
