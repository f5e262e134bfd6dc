package graph

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/graphrt"
)

func exprGraph(t *testing.T) *Graph {
	t.Helper()
	g, err := New("expr").
		Node("a", "echo").
		Node("b", "echo", When("state.count > 2")).
		Node("m", "echo", Map("state.items", 0)).
		Node("n", "echo", Map("state.items.map(i, double(i) * 2.0)", 2)).
		Edge(Start, "a").                                                            // 0
		Edge("a", "b").                                                              // 1 default action, unconditional
		Edge("a", "m", OnAction("approve")).                                         // 2
		Edge("a", "n", If(`invocation.n == 2`)).                                     // 3
		Edge("b", End, If(`state.count > 2 && output.ok`)).                          // 4
		Edge("m", End, If(`local.x == "y"`)).                                        // 5
		Edge("n", End, If(`state.name`)).                                            // 6 dyn: checked at run time
		Edge("b", End, OnAction("approve"), If(`state.tier in ["gold", "silver"]`)). // 7
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestEdgeTaken(t *testing.T) {
	g := exprGraph(t)
	state := map[string]any{"count": 3.0, "items": []any{1.0, "two", map[string]any{"k": true}}, "tier": "gold", "name": "x"}
	tests := []struct {
		name    string
		edge    int
		action  string
		env     graphrt.Env
		want    bool
		wantErr error
	}{
		{"empty action is default", 1, "", graphrt.Env{}, true, nil},
		{"default action named", 1, DefaultAction, graphrt.Env{}, true, nil},
		{"other action does not match unlabelled edge", 1, "approve", graphrt.Env{}, false, nil},
		{"labelled edge matches its action", 2, "approve", graphrt.Env{}, true, nil},
		{"labelled edge ignores default", 2, "", graphrt.Env{}, false, nil},
		{"invocation double equals int literal", 3, "", graphrt.Env{Invocation: map[string]any{"n": 2.0}}, true, nil},
		{"invocation differs", 3, "", graphrt.Env{Invocation: map[string]any{"n": 3.0}}, false, nil},
		{"cross-type comparison and output", 4, "", graphrt.Env{State: state, Output: map[string]any{"ok": true}}, true, nil},
		{"output false", 4, "", graphrt.Env{State: state, Output: map[string]any{"ok": false}}, false, nil},
		{"local", 5, "", graphrt.Env{Local: map[string]any{"x": "y"}}, true, nil},
		{"in list", 7, "approve", graphrt.Env{State: state}, true, nil},
		{"condition not evaluated on action mismatch", 4, "other", graphrt.Env{}, false, nil},
		{"missing key", 4, "", graphrt.Env{State: map[string]any{}}, false, ErrEvaluation},
		{"non-bool at run time", 6, "", graphrt.Env{State: state}, false, ErrEvaluation},
		{"unknown edge", 42, "", graphrt.Env{}, false, ErrUnknownNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := graphrt.Of(g).EdgeTaken(tt.edge, tt.action, tt.env)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("EdgeTaken = %v, want %v", got, tt.want)
			}
		})
	}
	_, err := graphrt.Of(g).EdgeTaken(4, "", graphrt.Env{State: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "edge 5 (b -> END)") {
		t.Errorf("evaluation error not located: %v", err)
	}
}

func TestShouldExecuteAndMapItems(t *testing.T) {
	g := exprGraph(t)
	state := map[string]any{"count": 3.0, "items": []any{1.0, "two", map[string]any{"k": true}}}
	if ok, err := graphrt.Of(g).ShouldExecute("a", graphrt.Env{}); !ok || err != nil {
		t.Errorf("no when: %v, %v", ok, err)
	}
	if ok, err := graphrt.Of(g).ShouldExecute("b", graphrt.Env{State: state}); !ok || err != nil {
		t.Errorf("when true: %v, %v", ok, err)
	}
	if ok, err := graphrt.Of(g).ShouldExecute("b", graphrt.Env{State: map[string]any{"count": 1}}); ok || err != nil {
		t.Errorf("when false (Go int): %v, %v", ok, err)
	}
	if _, err := graphrt.Of(g).ShouldExecute("zz", graphrt.Env{}); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}

	items, err := graphrt.Of(g).MapItems("m", graphrt.Env{State: state})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{1.0, "two", map[string]any{"k": true}}; !reflect.DeepEqual(items, want) {
		t.Errorf("MapItems = %#v, want %#v", items, want)
	}
	items, err = graphrt.Of(g).MapItems("n", graphrt.Env{State: map[string]any{"items": []any{1.0, 2.5}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{2.0, 5.0}; !reflect.DeepEqual(items, want) {
		t.Errorf("computed MapItems = %#v, want %#v", items, want)
	}
	if _, err := graphrt.Of(g).MapItems("m", graphrt.Env{State: map[string]any{"items": "nope"}}); !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), "want a list") {
		t.Errorf("non-list: %v", err)
	}
	if _, err := graphrt.Of(g).MapItems("a", graphrt.Env{}); !errors.Is(err, ErrEvaluation) {
		t.Errorf("node without map: %v", err)
	}
}

func TestPlainValues(t *testing.T) {
	g, err := New("plain").Node("a", "echo",
		Map(`[1, 2u, 1.5, "s", b"hi", null, true, {"k": [1]}, {1: "int key"}, duration("1s"), timestamp("2024-01-02T03:04:05Z"), optional.of(3), optional.none()]`, 0)).
		Edge(Start, "a").Edge("a", End).Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := graphrt.Of(g).MapItems("a", graphrt.Env{})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{1.0, 2.0, 1.5, "s", "aGk=", nil, true, map[string]any{"k": []any{1.0}}, map[string]any{"1": "int key"},
		"1s", "2024-01-02T03:04:05Z", 3.0, nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestHostileExpressionIsBounded(t *testing.T) {
	list := make([]any, 1000)
	for i := range list {
		list[i] = float64(i)
	}
	for _, src := range []string{
		`state.l.all(a, state.l.all(b, state.l.all(c, a + b + c >= 0.0)))`,
		`state.l.map(a, state.l.map(b, state.l.map(c, c))).size() > 0`,
	} {
		g, err := New("hostile").Node("a", "echo").Edge(Start, "a").Edge("a", End, If(src)).Build()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := graphrt.Of(g).EdgeTaken(1, "", graphrt.Env{State: map[string]any{"l": list}})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), "cost") {
				t.Errorf("%s: err = %v, want a cost-limit error", src, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still evaluating after 20s", src)
		}
	}
}

func TestCostLimitOption(t *testing.T) {
	list := make([]any, 1000)
	for i := range list {
		list[i] = float64(i)
	}
	b := New("cost").Node("a", "echo").Edge(Start, "a").Edge("a", End, If(`state.l.all(x, x >= 0.0)`))
	env := graphrt.Env{State: map[string]any{"l": list}}
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := graphrt.Of(g).EdgeTaken(1, "", env); !ok || err != nil {
		t.Errorf("default limit: %v, %v", ok, err)
	}
	g, err = b.Build(WithCostLimit(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graphrt.Of(g).EdgeTaken(1, "", env); !errors.Is(err, ErrEvaluation) {
		t.Errorf("low limit: %v", err)
	}
}

func TestGoConditions(t *testing.T) {
	vip := func(state map[string]any) bool { return state["vip"] == true }
	tier := InvocationCondition(func(state, inv map[string]any) bool { return inv["tier"] == "gold" })
	b := New("funcs").Node("a", "echo").Node("b", "echo").Node("c", "echo", When("func:gold")).
		Edge(Start, "a").
		Edge("a", "b", IfFunc("vip", vip)).
		Edge("a", "c", IfFunc("gold", tier)).
		Edge("b", End).Edge("c", End)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Edge(1).Condition; c != "func:vip" {
		t.Errorf("condition recorded as %q", c)
	}
	check := func(g *Graph) {
		t.Helper()
		if ok, err := graphrt.Of(g).EdgeTaken(1, "", graphrt.Env{State: map[string]any{"vip": true}}); !ok || err != nil {
			t.Errorf("state condition: %v, %v", ok, err)
		}
		if ok, err := graphrt.Of(g).EdgeTaken(1, "", graphrt.Env{}); ok || err != nil {
			t.Errorf("state condition, nil state: %v, %v", ok, err)
		}
		if ok, err := graphrt.Of(g).EdgeTaken(2, "", graphrt.Env{Invocation: map[string]any{"tier": "gold"}}); !ok || err != nil {
			t.Errorf("invocation condition: %v, %v", ok, err)
		}
		if ok, err := graphrt.Of(g).ShouldExecute("c", graphrt.Env{Invocation: map[string]any{"tier": "tin"}}); ok || err != nil {
			t.Errorf("func when: %v, %v", ok, err)
		}
	}
	check(g)

	// A coordinator reading the definition back from the log.
	_, err = Compile(g.Definition())
	if !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), `edge 2 (a -> b): field "when": no Go condition registered as "vip"`) {
		t.Errorf("unresolved func: %v", err)
	}
	g2, err := Parse(g.Canonical(), "log", WithConditions(map[string]any{"vip": StateCondition(vip), "gold": (func(s, i map[string]any) bool)(tier)}))
	if err != nil {
		t.Fatal(err)
	}
	check(g2)
	if g2.Digest() != g.Digest() {
		t.Error("digest changed")
	}

	_, err = Compile(g.Definition(), WithConditions(map[string]any{"vip": "not a func", "gold": tier}))
	if !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), `condition "vip": want a StateCondition or InvocationCondition`) {
		t.Errorf("bad func value: %v", err)
	}

	panicky, err := New("p").Node("a", "echo").Edge(Start, "a").
		Edge("a", End, IfFunc("boom", func(map[string]any) bool { panic("boom") })).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graphrt.Of(panicky).EdgeTaken(1, "", graphrt.Env{}); !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), "panicked: boom") {
		t.Errorf("panicking condition: %v", err)
	}
}

func TestConcurrentEvaluation(t *testing.T) {
	g := exprGraph(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				env := graphrt.Env{State: map[string]any{"count": float64(i % 5)}, Output: map[string]any{"ok": w%2 == 0}}
				got, err := graphrt.Of(g).EdgeTaken(4, "", env)
				if err != nil {
					t.Error(err)
					return
				}
				if want := i%5 > 2 && w%2 == 0; got != want {
					t.Errorf("worker %d, i %d: got %v", w, i, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
