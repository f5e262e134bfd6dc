package graph

import (
	"bytes"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/graphrt"
)

// The same graph three ways.
const equivYAML = `
name: equiv
version: "2"
metadata: {team: data}
state:
  reducers: {items: append, total: sum}
maxIterations: 7
nodes:
  - id: fetch
    type: http
    queue: io
    timeout: 30s
    config: {url: "https://example.com/a?b=1&c=2", method: GET, headers: {}, timeout: 1000.0}
    retry: {maxAttempts: 5, initialInterval: 500ms, jitter: 0.1}
    outputAs: page
  - id: each
    type: transform
    map: {over: state.items, concurrency: 4}
    config: {set: {x: "local"}}
  - id: other
    type: noop
    when: invocation.n == 2
  - id: merge
    type: echo
    join: 2
    maxIterations: 3
  - id: child
    type: subgraph
    config: {graph: sub}
edges:
  - {from: START, to: fetch}
  - {from: fetch, to: each, action: ok}
  - {from: fetch, to: other, when: "state.x > 1"}
  - {from: each, to: merge}
  - {from: other, to: merge}
  - {from: merge, to: child}
  - {from: child, to: END}
graphs:
  sub:
    nodes: [{id: s, type: echo}]
    edges: [{from: START, to: s}, {from: s, to: END}]
`

const equivJSON = `{
  "name": "equiv", "version": "2", "metadata": {"team": "data"},
  "state": {"reducers": {"total": "sum", "items": "append"}},
  "maxIterations": 7,
  "nodes": [
    {"id": "fetch", "type": "http", "queue": "io", "timeout": "30s",
     "config": {"method": "GET", "url": "https://example.com/a?b=1&c=2", "headers": {}, "timeout": 1000.0},
     "retry": {"maxAttempts": 5, "initialInterval": "500ms", "jitter": 0.1},
     "outputAs": "page"},
    {"id": "each", "type": "transform", "map": {"over": "state.items", "concurrency": 4}, "config": {"set": {"x": "local"}}},
    {"id": "other", "type": "noop", "when": "invocation.n == 2"},
    {"id": "merge", "type": "echo", "join": 2, "maxIterations": 3},
    {"id": "child", "type": "subgraph", "config": {"graph": "sub"}}
  ],
  "edges": [
    {"from": "START", "to": "fetch"},
    {"from": "fetch", "to": "each", "action": "ok"},
    {"from": "fetch", "to": "other", "when": "state.x > 1"},
    {"from": "each", "to": "merge"},
    {"from": "other", "to": "merge"},
    {"from": "merge", "to": "child"},
    {"from": "child", "to": "END"}
  ],
  "graphs": {"sub": {"name": "sub", "nodes": [{"id": "s", "type": "echo"}],
    "edges": [{"from": "START", "to": "s"}, {"from": "s", "to": "END"}]}}
}`

func equivBuilder() *Builder {
	b := New("equiv").Version("2").MaxIterations(7)
	b.Metadata("team", "data")
	b.Reducer("items", Append).Reducer("total", Sum)
	b.Node("fetch", "http",
		Queue("io"), Timeout(30*time.Second),
		Config(map[string]any{"url": "https://example.com/a?b=1&c=2", "method": "GET", "headers": map[string]any{}, "timeout": 1000}),
		Retry(RetryPolicy{MaxAttempts: 5, InitialInterval: Duration(500 * time.Millisecond), Jitter: JitterOf(0.1)}),
		OutputAs("page"))
	b.Node("each", "transform", Map("state.items", 4), Config(map[string]any{"set": map[string]string{"x": "local"}}))
	b.Node("other", "noop", When("invocation.n == 2"))
	b.Node("merge", "echo", WaitN(2), MaxIterations(3))
	b.Node("child", TypeSubgraph, Config(map[string]string{"graph": "sub"}))
	b.Edge(Start, "fetch")
	b.Edge("fetch", "each", OnAction("ok"))
	b.Edge("fetch", "other", If("state.x > 1"))
	b.Edge("each", "merge")
	b.Edge("other", "merge")
	b.Edge("merge", "child")
	b.Edge("child", End)
	b.Subgraph("sub", New("sub").Node("s", "echo").Edge(Start, "s").Edge("s", End))
	return b
}

func TestYAMLJSONBuilderEquivalence(t *testing.T) {
	fromYAML, err := Parse([]byte(equivYAML), "equiv.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := Parse([]byte(equivJSON), "equiv.json")
	if err != nil {
		t.Fatal(err)
	}
	fromBuilder, err := equivBuilder().Build()
	if err != nil {
		t.Fatal(err)
	}
	fromCanonical, err := Parse(fromYAML.Canonical(), "canonical.json")
	if err != nil {
		t.Fatal(err)
	}
	fromDef, err := Compile(fromJSON.Definition())
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*Graph{"json": fromJSON, "builder": fromBuilder, "canonical": fromCanonical, "compile": fromDef} {
		if !reflect.DeepEqual(fromYAML.Definition(), g.Definition()) {
			t.Errorf("%s: Definition differs from YAML's:\n%s\n%s", name, fromYAML.Canonical(), g.Canonical())
		}
		if !bytes.Equal(fromYAML.Canonical(), g.Canonical()) || fromYAML.Digest() != g.Digest() {
			t.Errorf("%s: canonical form differs:\n%s\n%s", name, fromYAML.Canonical(), g.Canonical())
		}
	}
	if !strings.HasPrefix(fromYAML.Digest(), "sha256:") || len(fromYAML.Digest()) != 7+64 {
		t.Errorf("Digest = %q", fromYAML.Digest())
	}
	// Canonical JSON is compact with sorted config keys and filled defaults.
	c := string(fromYAML.Canonical())
	for _, want := range []string{`"config":{"headers":{},"method":"GET","timeout":1000,`, `"queue":"default"`, `"join":"all"`, `"join":2`, `"action":"default"`, `"effect":"external"`} {
		if !strings.Contains(c, want) {
			t.Errorf("canonical form lacks %s:\n%s", want, c)
		}
	}
}

func TestIndexesAndBackEdges(t *testing.T) {
	g, err := New("cycles").
		Node("a", "echo").Node("b", "echo").Node("c", "echo").Node("d", "echo", WaitAny()).
		Edge(Start, "a"). // 0
		Edge("a", "b").   // 1
		Edge("b", "b").   // 2 self loop: back
		Edge("b", "c").   // 3
		Edge("c", "a").   // 4 closes a -> b -> c: back
		Edge("a", "d").   // 5
		Edge("c", "d").   // 6 second way into d: forward, not a cycle
		Edge("d", End).   // 7
		Edge("c", End).   // 8
		Build()
	if err != nil {
		t.Fatal(err)
	}
	var back []int
	for i := range 9 {
		if graphrt.Of(g).IsBackEdge(i) {
			back = append(back, i)
		}
	}
	if !slices.Equal(back, []int{2, 4}) {
		t.Errorf("back edges = %v, want [2 4]", back)
	}
	if graphrt.Of(g).IsBackEdge(-1) || graphrt.Of(g).IsBackEdge(99) {
		t.Error("IsBackEdge out of range reported true")
	}
	checks := []struct {
		name      string
		got, want []int
	}{
		{"Outgoing(START)", graphrt.Of(g).Outgoing(Start), []int{0}},
		{"Outgoing(c)", graphrt.Of(g).Outgoing("c"), []int{4, 6, 8}},
		{"Incoming(a)", graphrt.Of(g).Incoming("a"), []int{0, 4}},
		{"ForwardIncoming(a)", graphrt.Of(g).ForwardIncoming("a"), []int{0}},
		{"ForwardIncoming(b)", graphrt.Of(g).ForwardIncoming("b"), []int{1}},
		{"ForwardIncoming(d)", graphrt.Of(g).ForwardIncoming("d"), []int{5, 6}},
		{"Incoming(END)", graphrt.Of(g).Incoming(End), []int{7, 8}},
		{"Outgoing(unknown)", graphrt.Of(g).Outgoing("zz"), nil},
	}
	for _, c := range checks {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var ids []string
	for _, n := range g.Nodes() {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c", "d"}) {
		t.Errorf("Nodes() = %v", ids)
	}
	if e := g.Edge(4); e == nil || e.From != "c" || e.To != "a" {
		t.Errorf("Edge(4) = %+v", e)
	}
	if g.Edge(9) != nil || g.Edge(-1) != nil {
		t.Error("Edge out of range not nil")
	}
	if _, ok := g.Node("zz"); ok {
		t.Error("Node(zz) found")
	}
}

func TestMaxIterations(t *testing.T) {
	b := New("caps").Node("a", "echo", MaxIterations(3)).Node("b", "echo").
		Edge(Start, "a").Edge("a", "b").Edge("b", End)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := graphrt.Of(g).MaxIterations("a"); got != 3 {
		t.Errorf("node cap = %d", got)
	}
	if got := graphrt.Of(g).MaxIterations("b"); got != DefaultMaxIterations {
		t.Errorf("default cap = %d", got)
	}
	g, err = b.MaxIterations(9).Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := graphrt.Of(g).MaxIterations("b"); got != 9 {
		t.Errorf("graph cap = %d", got)
	}
}

func TestSubgraphLookup(t *testing.T) {
	g, err := Parse([]byte(equivYAML), "equiv.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sub, ok := g.Subgraph("sub")
	if !ok || sub.Definition().Name != "sub" {
		t.Fatalf("Subgraph(sub) = %v, %v", sub, ok)
	}
	if again, ok := sub.Subgraph("sub"); !ok || again != sub {
		t.Error("lookup from the child does not reach the parent's graphs")
	}
	if _, ok := g.Subgraph("nope"); ok {
		t.Error("Subgraph(nope) found")
	}
	if sub.Digest() == g.Digest() || len(sub.Canonical()) == 0 {
		t.Error("subgraph has no canonical form of its own")
	}
}

func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d example files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g, err := LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(g.Canonical(), f+" (canonical)")
			if err != nil {
				t.Fatal(err)
			}
			if again.Digest() != g.Digest() {
				t.Error("canonical form does not round-trip")
			}
		})
	}
}

func TestExampleSemantics(t *testing.T) {
	loop, err := LoadFile("../../examples/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(loop.Definition().Edges) {
		e := loop.Edge(i)
		if want := e.From == "step" && e.To == "step"; graphrt.Of(loop).IsBackEdge(i) != want {
			t.Errorf("IsBackEdge(%d: %s -> %s) = %v", i, e.From, e.To, !want)
		}
	}
	premium, err := LoadFile("../../examples/premium.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"premium", "basic"} {
		env := graphrt.Env{Invocation: map[string]any{"user_tier": tier}}
		var taken []string
		for _, i := range graphrt.Of(premium).Outgoing("intake") {
			ok, err := graphrt.Of(premium).EdgeTaken(i, "", env)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				taken = append(taken, premium.Edge(i).To)
			}
		}
		want := map[string]string{"premium": "premium", "basic": "standard"}[tier]
		if !slices.Equal(taken, []string{want}) {
			t.Errorf("tier %s: took %v, want [%s]", tier, taken, want)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	}
	if _, err := LoadFile(filepath.Join(dir, "graph.toml")); err == nil || !strings.Contains(err.Error(), "unknown graph file extension") {
		t.Errorf("unknown extension: %v", err)
	}
}
