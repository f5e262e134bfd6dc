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

const typeLimited = `name: t
limits:
  types:
    http: {concurrency: {max: 3, key: "invocation.tenant"}}
  queues:
    gpu: {rate: {limit: 10, per: 1s}}
nodes:
  - {id: a, type: http, config: {url: "http://example.com"}}
  - {id: b, type: http, config: {url: "http://example.com"}, concurrency: {max: 1}}
  - {id: c, type: echo, queue: gpu}
  - {id: d, type: echo}
edges: [{from: START, to: a}, {from: a, to: b}, {from: b, to: c}, {from: c, to: d}, {from: d, to: END}]
`

// A graph's limits by type and queue are given to the nodes they apply
// to, named type/<t> and queue/<q>; a node's own limit replaces them.
func TestLimitsByTypeAndQueue(t *testing.T) {
	g, err := Parse([]byte(typeLimited), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := g.Node("a")
	b, _ := g.Node("b")
	c, _ := g.Node("c")
	d, _ := g.Node("d")
	if a.Concurrency == nil || a.Concurrency.Max != 3 || LimitName(g.Definition(), a) != "type/http" {
		t.Fatalf("a: %+v, want the http type's limit", a.Concurrency)
	}
	if k, err := graphrt.Of(g).ConcurrencyKey("a", graphrt.Env{Invocation: map[string]any{"tenant": "acme"}}); err != nil || k != "acme" {
		t.Fatalf("a's key %q %v", k, err)
	}
	if LimitName(g.Definition(), b) != "t/b" || b.Concurrency.Max != 1 {
		t.Fatalf("b: %+v, want its own limit", b.Concurrency)
	}
	if c.Rate == nil || c.Rate.Limit != 10 || RateName(g.Definition(), c) != "queue/gpu" || c.Concurrency != nil {
		t.Fatalf("c: %+v %+v, want the gpu queue's rate", c.Rate, c.Concurrency)
	}
	if d.Concurrency != nil || d.Rate != nil {
		t.Fatalf("d has a limit: %+v %+v", d.Concurrency, d.Rate)
	}
	// The canonical form records them on the nodes: compiling it again
	// gives the same graph.
	g2, err := Parse(g.Canonical(), "x.json")
	if err != nil || g2.Digest() != g.Digest() {
		t.Fatalf("recompiled: %v, digest %s want %s", err, g2.Digest(), g.Digest())
	}
}

func TestLimitsByTypeAndQueueValidation(t *testing.T) {
	tests := []struct {
		name, limits, want string
	}{
		{"unknown type", `{types: {htpp: {concurrency: {max: 1}}}}`, `field "limits.types.htpp": no node of this graph has type "htpp" (they have: echo, http); did you mean "http"?`},
		{"unknown queue", `{queues: {gpu: {concurrency: {max: 1}}}}`, `field "limits.queues.gpu": no node of this graph has queue "gpu" (they have: default)`},
		{"max zero", `{types: {http: {concurrency: {max: 0}}}}`, `field "limits.types.http.concurrency.max": must be at least 1, got 0`},
		{"key not a string", `{queues: {default: {concurrency: {max: 1, key: "1"}}}}`, `field "limits.queues.default.concurrency.key": CEL "1": want a string, expression gives int`},
		{"rate per", `{types: {echo: {rate: {limit: 1, per: 0s}}}}`, `field "limits.types.echo.rate.per": must be at least 1ms`},
		{"empty", `{types: {echo: {}}}`, `field "limits.types.echo": give a concurrency or a rate limit`},
		{"both on a node", `{types: {echo: {concurrency: {max: 1}}}, queues: {default: {concurrency: {max: 2}}}}`, `node "e": field "type": node is under both limits.types.echo and limits.queues.default`},
		// An entry's keys are read exactly, as every field's, not as
		// encoding/json reads them (case-insensitive, unknown dropped).
		{"unknown key in an entry", `{types: {echo: {concurrency: {max: 1, kee: state.k}}}}`, `field "limits.types.echo.concurrency.kee": unknown field (did you mean "key"?)`},
		{"key in another case", `{queues: {default: {Rate: {limit: 1, per: 1s}}}}`, `field "limits.queues.default.Rate": unknown field (did you mean "rate"?)`},
		{"an entry not an object", `{types: {echo: 3}}`, `field "limits.types.echo": want an object, got a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nlimits: " + tt.limits + "\nnodes:\n  - {id: h, type: http, config: {url: \"http://example.com\"}, concurrency: {max: 1}}\n  - {id: e, type: echo}\nedges: [{from: START, to: h}, {from: h, to: e}, {from: e, to: END}]\n"
			_, err := Parse([]byte(src), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "x.yaml: line ") {
				t.Fatalf("error %q is not located", err)
			}
		})
	}
	// A map node's items take a type's concurrency limit, each, and its
	// rate limit, each.
	src := "name: t\nlimits: {types: {echo: {concurrency: {max: 1}}}}\nnodes:\n  - {id: m, type: echo, map: {over: \"state.items\"}}\nedges: [{from: START, to: m}, {from: m, to: END}]\n"
	if g, err := Parse([]byte(src), "x.yaml"); err != nil {
		t.Fatalf("map node under a type's concurrency limit: %v", err)
	} else if m, _ := g.Node("m"); m.Concurrency == nil || LimitName(g.Definition(), m) != "type/echo" {
		t.Fatalf("map node's limit: %+v", m.Concurrency)
	}
	src = strings.Replace(src, "concurrency: {max: 1}", "rate: {limit: 1, per: 1s}", 1)
	if g, err := Parse([]byte(src), "x.yaml"); err != nil {
		t.Fatalf("map node under a type's rate limit: %v", err)
	} else if m, _ := g.Node("m"); m.Rate == nil || RateName(g.Definition(), m) != "type/echo" {
		t.Fatalf("map node's rate limit: %+v", m.Rate)
	}
}
