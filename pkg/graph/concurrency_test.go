package graph

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
)

func TestConcurrencyValidation(t *testing.T) {
	tests := []struct {
		name, node string
		want       string // "" when valid
	}{
		{"valid, keyed", `{id: a, type: echo, concurrency: {max: 2, key: "invocation.tenant"}}`, ""},
		{"valid, global", `{id: a, type: echo, concurrency: {max: 1}}`, ""},
		{"max zero", `{id: a, type: echo, concurrency: {max: 0}}`, `node "a": field "concurrency.max": must be at least 1, got 0`},
		{"max negative", `{id: a, type: echo, concurrency: {max: -3}}`, `field "concurrency.max": must be at least 1, got -3`},
		{"max too large", `{id: a, type: echo, concurrency: {max: 5000}}`, `field "concurrency.max": must be at most 1000`},
		{"key does not compile", `{id: a, type: echo, concurrency: {max: 1, key: "invocation.("}}`, `node "a": field "concurrency.key": CEL "invocation.("`},
		{"key not a string", `{id: a, type: echo, concurrency: {max: 1, key: "1 + 2"}}`, `node "a": field "concurrency.key": CEL "1 + 2": want a string, expression gives int`},
		{"on a human node", `{id: a, type: human, concurrency: {max: 1}}`, `node "a": field "concurrency": a human node runs in the coordinator`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nnodes:\n  - " + tt.node + "\nedges: [{from: START, to: a}, {from: a, to: END}]\n"
			_, err := Parse([]byte(src), "x.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestConcurrencyKey(t *testing.T) {
	g, err := Parse([]byte(`name: t
nodes:
  - {id: a, type: echo, concurrency: {max: 1, key: "invocation.tenant"}}
  - {id: b, type: echo, concurrency: {max: 1, name: shared}}
edges: [{from: START, to: a}, {from: a, to: b}, {from: b, to: END}]
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ev := graphrt.Of(g)
	k, err := ev.ConcurrencyKey("a", graphrt.Env{Invocation: map[string]any{"tenant": "acme"}})
	if err != nil || k != "acme" {
		t.Fatalf("key %q %v, want acme", k, err)
	}
	if _, err := ev.ConcurrencyKey("a", graphrt.Env{Invocation: map[string]any{"tenant": 7}}); err == nil {
		t.Fatal("a number was taken as a key")
	}
	if k, err := ev.ConcurrencyKey("b", graphrt.Env{}); err != nil || k != "" {
		t.Fatalf("no key: %q %v", k, err)
	}
	a, _ := g.Node("a")
	b, _ := g.Node("b")
	if LimitName(g.Definition(), a) != "t/a" || LimitName(g.Definition(), b) != "shared" {
		t.Fatalf("limit names %q %q", LimitName(g.Definition(), a), LimitName(g.Definition(), b))
	}
}
