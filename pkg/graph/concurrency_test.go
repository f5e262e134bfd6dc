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

func TestRunConcurrencyValidation(t *testing.T) {
	tests := []struct {
		name, limit string
		want        string // "" when valid
	}{
		{"valid, keyed", `{max: 2, key: "invocation.tenant"}`, ""},
		{"valid, global, cancel-newest", `{max: 1, strategy: cancel-newest}`, ""},
		{"valid, cancel-oldest over input", `{max: 3, key: "input.customer", strategy: cancel-oldest}`, ""},
		{"max zero", `{max: 0}`, `field "concurrency.max": must be at least 1, got 0`},
		{"max negative", `{max: -1}`, `field "concurrency.max": must be at least 1, got -1`},
		{"max too large", `{max: 1001}`, `field "concurrency.max": must be at most 1000, got 1001`},
		{"key does not compile", `{max: 1, key: "invocation.("}`, `field "concurrency.key": CEL "invocation.("`},
		{"key not a string", `{max: 1, key: "1 + 2"}`, `field "concurrency.key": CEL "1 + 2": want a string, expression gives int`},
		{"unknown strategy", `{max: 1, strategy: drop}`, `field "concurrency.strategy": unknown strategy "drop" (want "queue", "cancel-newest" or "cancel-oldest")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nconcurrency: " + tt.limit + "\nnodes:\n  - {id: a, type: echo}\nedges: [{from: START, to: a}, {from: a, to: END}]\n"
			_, err := Parse([]byte(src), "x.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), "x.yaml: line 2, column "):
				t.Fatalf("error %q does not name the line of concurrency (line 2)", err)
			}
		})
	}
}

func TestRunConcurrencyKey(t *testing.T) {
	g, err := Parse([]byte(`name: t
concurrency: {max: 1, key: "invocation.tenant + '/' + input.region"}
nodes:
  - {id: a, type: echo}
edges: [{from: START, to: a}, {from: a, to: END}]
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k, err := graphrt.Of(g).ConcurrencyKey(Start, graphrt.Env{State: map[string]any{"region": "eu"}, Invocation: map[string]any{"tenant": "acme"}})
	if err != nil || k != "acme/eu" {
		t.Fatalf("key %q %v, want acme/eu", k, err)
	}
	if RunLimitName(g.Definition()) != "t" || RunStrategy(g.Definition()) != RunQueue {
		t.Fatalf("name %q strategy %q", RunLimitName(g.Definition()), RunStrategy(g.Definition()))
	}
}
