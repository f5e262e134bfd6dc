package semantics_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

const (
	succeeded = projection.NodeSucceeded
	skipped   = projection.NodeSkipped
	idle      = projection.NodeIdle
)

// 1. Conditional edges over state, output and invocation.
func TestConditionsOverStateOutputInvocation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := example(t, "conditions.yaml")
	web := h.start(g, `{"amount": 250}`, `{"channel": "web"}`)
	big := h.start(g, `{"amount": 5000}`, `{"channel": "phone"}`)
	l := h.ended(web, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"score": succeeded, "review": skipped, "fast": succeeded, "small": skipped, "notify": succeeded})
	if got := l.stateOf("notified"); got != "web" {
		t.Errorf("notified = %v", got)
	}
	l = h.ended(big, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"review": succeeded, "fast": skipped, "small": skipped, "notify": skipped})
}

func TestBadConditionIsALoadErrorNamingTheEdge(t *testing.T) {
	t.Parallel()
	_, err := graph.Parse([]byte(`
name: bad
nodes: [{id: a, type: echo}]
edges:
  - {from: START, to: a}
  - {from: a, to: END, when: "state.x +"}
`), "bad.yaml")
	if !errors.Is(err, graph.ErrInvalidGraph) || !strings.Contains(err.Error(), "edge 2 (a -> END)") {
		t.Fatalf("err = %v", err)
	}
}

// Go conditions, in both forms, registered with the coordinator.
var (
	isBig  = graph.StateCondition(func(s map[string]any) bool { n, _ := s["n"].(float64); return n > 10 })
	isGold = graph.InvocationCondition(func(_, inv map[string]any) bool { return inv["tier"] == "gold" })
	isNot  = func(s map[string]any) bool { n, _ := s["n"].(float64); return n <= 10 }
)

func TestGoConditionsThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	h := newHarness(t, coordinator.WithConditions(map[string]any{"isBig": isBig, "isGold": isGold, "isSmall": isNot}))
	g, err := graph.New("funcs").
		Node("a", "echo").Node("big", "echo").Node("small", "echo").Node("gold", "echo").
		Edge(graph.Start, "a").
		Edge("a", "big", graph.IfFunc("isBig", isBig)).
		Edge("a", "small", graph.IfFunc("isSmall", isNot)).
		Edge("a", "gold", graph.IfFunc("isGold", isGold)).
		Edge("big", graph.End).Edge("small", graph.End).Edge("gold", graph.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(g.Canonical()), `"when":"func:isGold"`) {
		t.Fatalf("canonical form does not name the function: %s", g.Canonical())
	}
	r1 := h.start(g, `{"n": 42}`, `{"tier": "gold"}`)
	r2 := h.start(g, `{"n": 3}`, `{"tier": "basic"}`)
	h.ended(r1, projection.RunCompleted).wantStatus(t, map[string]projection.NodeStatus{"big": succeeded, "small": skipped, "gold": succeeded})
	h.ended(r2, projection.RunCompleted).wantStatus(t, map[string]projection.NodeStatus{"big": skipped, "small": succeeded, "gold": skipped})

	// A graph naming a function the coordinator does not know fails its
	// run with an InvalidGraph error that names it.
	g2, err := graph.New("unknownfn").Node("a", "echo").
		Edge(graph.Start, "a").
		Edge("a", graph.End, graph.IfFunc("notRegistered", isNot)).Build()
	if err != nil {
		t.Fatal(err)
	}
	l := h.ended(h.start(g2, `{"n": 1}`, ""), projection.RunFailed)
	if l.s.Error.Type != events.FailureInvalidGraph || !strings.Contains(l.s.Error.Message, "notRegistered") {
		t.Fatalf("error %+v", l.s.Error)
	}
}

// 2. Invocation state: recorded in run-started, seen by conditions and nodes.
func TestInvocationState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := example(t, "premium.yaml")
	prem := h.start(g, "", `{"user_tier": "premium"}`)
	std := h.start(g, "", `{"user_tier": "free"}`)
	l := h.ended(prem, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"premium": succeeded, "standard": skipped})
	if got := l.stateOf("answer"); got != "premium answer for premium" {
		t.Errorf("answer %v", got)
	}
	started, _ := payloads[*events.RunStartedData](l)
	if string(started[0].Invocation) != `{"user_tier":"premium"}` {
		t.Errorf("run-started invocation %s", started[0].Invocation)
	}
	h.ended(std, projection.RunCompleted).wantStatus(t, map[string]projection.NodeStatus{"premium": skipped, "standard": succeeded})

	// Nodes see it (read-only: it is not in the state they get).
	g2 := parse(t, `
name: inv
nodes: [{id: look, type: capture}]
edges: [{from: START, to: look}, {from: look, to: END}]
`)
	run := h.start(g2, `{"x": 1}`, `{"user_tier": "premium", "locale": "fr"}`)
	h.ended(run, projection.RunCompleted)
	in := h.input(run, "look", nil)
	if in.Invocation["user_tier"] != "premium" || in.Invocation["locale"] != "fr" {
		t.Errorf("node saw invocation %v", in.Invocation)
	}
	if _, leaked := in.State["user_tier"]; leaked {
		t.Errorf("invocation leaked into the state: %v", in.State)
	}
}

// 3. Action routing with forking data.
func TestActionRouting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: fork
nodes:
  - id: fork
    type: fork
    config:
      actions:
        - {name: approve, data: {who: ann}}
        - {name: notify, data: {channel: ops}}
  - {id: ap, type: capture}
  - {id: ap2, type: capture}
  - {id: nt, type: capture}
  - {id: rj, type: capture}
  - {id: df, type: capture}
  - {id: quiet, type: echo}
  - {id: qdef, type: capture}
  - {id: qother, type: capture}
edges:
  - {from: START, to: fork}
  - {from: START, to: quiet}
  - {from: fork, to: ap, action: approve}
  - {from: fork, to: nt, action: notify}
  - {from: fork, to: rj, action: reject}
  - {from: fork, to: df}
  - {from: ap, to: ap2}
  - {from: quiet, to: qdef}
  - {from: quiet, to: qother, action: other}
  - {from: ap2, to: END}
  - {from: nt, to: END}
  - {from: rj, to: END}
  - {from: df, to: END}
  - {from: qdef, to: END}
  - {from: qother, to: END}
`)
	run := h.start(g, `{"shared": 1}`, "")
	l := h.ended(run, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{
		"ap": succeeded, "ap2": succeeded, "nt": succeeded, "rj": skipped, "df": skipped,
		"qdef": succeeded, "qother": skipped, // no action named: the default action
	})
	if got := mustJSON(t, h.input(run, "ap", nil).Local); got != `{"who":"ann"}` {
		t.Errorf("ap local %s", got)
	}
	if got := mustJSON(t, h.input(run, "nt", nil).Local); got != `{"channel":"ops"}` {
		t.Errorf("nt local %s", got)
	}
	if got := h.input(run, "ap2", nil).Local; got != nil {
		t.Errorf("ap2 (past the branch's first node) saw local %v", got)
	}
	if got := h.input(run, "qdef", nil).Local; got != nil {
		t.Errorf("qdef saw local %v", got)
	}
	if keys := slices.Sorted(maps.Keys(l.s.Vars)); !slices.Equal(keys, []string{"shared"}) {
		t.Errorf("forking data leaked into the shared state: %v", keys)
	}

	// The example: echo's configured actions, transform reading local.
	l = h.ended(h.start(example(t, "actions.yaml"), "", ""), projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"publish": succeeded, "announce": succeeded, "reject": skipped, "archive": skipped})
	if l.stateOf("published_by") != "ann" || l.stateOf("announced_on") != "ops" || l.stateOf("reviewer") != nil {
		t.Errorf("state %v", l.s.VarsMap())
	}
}

// 4. Routers run in the coordinator: no worker, no side effects.
func TestRouter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := example(t, "router.yaml")
	for _, tc := range []struct{ input, inv, want string }{
		{`{"amount": 5000}`, `{"region": "eu"}`, "manual"},
		{`{"amount": 10}`, `{"region": "eu"}`, "eu"},
		{`{"amount": 10}`, "", "auto"},
	} {
		l := h.ended(h.start(g, tc.input, tc.inv), projection.RunCompleted)
		for _, n := range []string{"manual", "eu", "auto"} {
			want := skipped
			if n == tc.want {
				want = succeeded
			}
			l.wantStatus(t, map[string]projection.NodeStatus{n: want})
		}
		if l.readies("triage") != 0 {
			t.Errorf("the router was sent to a worker")
		}
		inv, _ := payloads[*events.NodeInvokedData](l)
		for _, p := range inv {
			if p.Node == "triage" && (p.Worker != "coordinator" || len(p.Actions) != 1 || p.Actions[0].Name != tc.want) {
				t.Errorf("router outcome %+v", p)
			}
		}
	}

	// Without routes, a router lets its edges' conditions choose; they see
	// the predecessor's output, passed through.
	g2 := parse(t, `
name: passthrough
nodes:
  - {id: a, type: echo, config: {output: {kind: b}}}
  - {id: r, type: router}
  - {id: b, type: echo}
  - {id: c, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: r}
  - {from: r, to: b, when: 'output.kind == "b"'}
  - {from: r, to: c, when: 'output.kind == "c"'}
  - {from: b, to: END}
  - {from: c, to: END}
`)
	h.ended(h.start(g2, "", ""), projection.RunCompleted).wantStatus(t, map[string]projection.NodeStatus{"b": succeeded, "c": skipped})

	// A route naming an action no edge carries is a load error.
	_, err := graph.Parse([]byte(`
name: typo
nodes: [{id: r, type: router, config: {routes: [{when: "true", action: mnaual}]}}, {id: m, type: echo}]
edges: [{from: START, to: r}, {from: r, to: m, action: manual}, {from: m, to: END}]
`), "typo.yaml")
	if err == nil || !strings.Contains(err.Error(), `node "r": field "config.routes[0].action"`) {
		t.Fatalf("err = %v", err)
	}
}

// 5. Fan-out: static branches run at once; a map runs one branch per
// item within its concurrency cap and gathers the outputs in item order.
func TestFanOutStaticAndMap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.start(example(t, "fanout.yaml"), `{"docs": ["a", "b", "c", "d"]}`, "")
	l := h.ended(run, projection.RunCompleted)
	// Static: both branches were invoking before either finished.
	lastStart := max(l.seqOf(events.NodeInvoking, "left"), l.seqOf(events.NodeInvoking, "right"))
	firstEnd := min(l.seqOf(events.NodeInvoked, "left"), l.seqOf(events.NodeInvoked, "right"))
	if lastStart == 0 || lastStart > firstEnd {
		t.Errorf("static branches did not overlap\n%s", l.summary())
	}
	if got := string(l.s.Nodes["pages"].Output); got != `["0:A","1:B","2:C","3:D"]` {
		t.Errorf("map output %s", got)
	}
	if got := string(l.s.Artifacts["pages"]); got != `["0:A","1:B","2:C","3:D"]` {
		t.Errorf("artifact %s", got)
	}
	l.wantStatus(t, map[string]projection.NodeStatus{"gather": succeeded})
	checkCap(t, l, "pages", 2)
}

func TestMapConcurrencyCapAndItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: capped
nodes:
  - {id: list, type: echo, config: {output: [p, q, r, s, t, u, v]}}
  - {id: each, type: item, map: {over: output, concurrency: 3}}
  - {id: fanin, type: echo}
edges:
  - {from: START, to: list}
  - {from: list, to: each}
  - {from: each, to: fanin, when: "output.size() == 7"}
  - {from: fanin, to: END}
`)
	run := h.start(g, "", "")
	l := h.ended(run, projection.RunCompleted)
	if got := string(l.s.Nodes["each"].Output); got != `["p!","q!","r!","s!","t!","u!","v!"]` {
		t.Errorf("map output %s", got)
	}
	if peak := checkCap(t, l, "each", 3); peak != 3 {
		t.Errorf("peak concurrency %d, want the cap 3", peak)
	}
	for i, item := range []string{"p", "q", "r", "s", "t", "u", "v"} {
		idx := i
		in := h.input(run, "each", &idx)
		if got := mustJSON(t, in.Local); got != `{"index":`+string(rune('0'+i))+`,"item":"`+item+`"}` {
			t.Errorf("item %d local %s", i, got)
		}
	}
}

func TestMapItemRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: flakymap
nodes:
  - {id: each, type: flaky, map: {over: state.xs, concurrency: 2}, retry: {maxAttempts: 2, initialInterval: 100ms, jitter: 0}}
edges:
  - {from: START, to: each}
  - {from: each, to: END}
`)
	l := h.ended(h.start(g, `{"xs": [10, 11, 12]}`, ""), projection.RunCompleted)
	if got := string(l.s.Nodes["each"].Output); got != `[10,11,12]` {
		t.Errorf("map output %s", got)
	}
	if l.s.Stats.Retries != 1 || l.s.Nodes["each"].Items[1].Attempt != 2 {
		t.Errorf("retries %d, item 1 attempt %d", l.s.Stats.Retries, l.s.Nodes["each"].Items[1].Attempt)
	}
	checkCap(t, l, "each", 2)
}

// checkCap walks the log and checks that at no point more than limit items
// of node are between their ready event and their outcome (retry backoffs
// count as in flight); it returns the peak.
func checkCap(t *testing.T, l runLog, node string, limit int) int {
	t.Helper()
	inflight := map[int]bool{}
	peak := 0
	for _, e := range l.evs {
		p, _ := e.Payload()
		switch d := p.(type) {
		case *events.NodeReadyData:
			if d.Node == node && d.Item != nil {
				inflight[*d.Item] = true
			}
		case *events.NodeInvokedData:
			if d.Node == node && d.Item != nil {
				delete(inflight, *d.Item)
			}
		case *events.NodeFailedData:
			// A failed item stays in flight until its retry's outcome.
		}
		peak = max(peak, len(inflight))
		if len(inflight) > limit {
			t.Fatalf("%d items of %s in flight at seq %d, cap %d\n%s", len(inflight), node, e.Seq, limit, l.summary())
		}
	}
	return peak
}

// 6. Joins: any, n-of and all, with a skipped branch.
func TestJoins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	l := h.ended(h.start(example(t, "joins.yaml"), "", ""), projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"maybe": skipped, "first": succeeded, "two": succeeded, "all": succeeded})
	slowDone := l.seqOf(events.NodeInvoked, "slow")
	fastDone := l.seqOf(events.NodeInvoked, "fast")
	if r := l.seqOf(events.NodeReady, "first"); r < fastDone || r > slowDone {
		t.Errorf("any-join: ready at %d, want after fast (%d) and before slow (%d)", r, fastDone, slowDone)
	}
	for _, n := range []string{"two", "all"} {
		if r := l.seqOf(events.NodeReady, n); r < slowDone {
			t.Errorf("%s ready at %d, before slow finished at %d", n, r, slowDone)
		}
	}
	for _, n := range []string{"first", "two", "all"} {
		if c := l.readies(n); c != 1 {
			t.Errorf("%s readied %d times", n, c)
		}
	}
	if len(l.s.Pending) != 0 {
		t.Errorf("signals left pending: %v", l.s.Pending)
	}
}

// 7. Reducers: parallel writes resolve by log order, on every fold.
func TestReducersResolveInLogOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: writers
state: {reducers: {tags: append, total: sum, meta: merge}}
nodes:
  - {id: fan, type: echo}
  - {id: w1, type: writer, config: {delayMs: 30}}
  - {id: w2, type: writer, config: {delayMs: 0}}
  - {id: w3, type: writer, config: {delayMs: 20}}
  - {id: w4, type: writer, config: {delayMs: 5}}
edges:
  - {from: START, to: fan}
  - {from: fan, to: w1}
  - {from: fan, to: w2}
  - {from: fan, to: w3}
  - {from: fan, to: w4}
  - {from: w1, to: END}
  - {from: w2, to: END}
  - {from: w3, to: END}
  - {from: w4, to: END}
`)
	for range 3 {
		l := h.ended(h.start(g, `{"total": 10}`, ""), projection.RunCompleted)
		var order []any
		inv, _ := payloads[*events.NodeInvokedData](l)
		for _, p := range inv {
			if strings.HasPrefix(p.Node, "w") {
				order = append(order, p.Node)
			}
		}
		if got, want := mustJSON(t, l.stateOf("tags")), mustJSON(t, order); got != want {
			t.Errorf("tags %s, want log order %s", got, want)
		}
		if l.stateOf("last") != order[len(order)-1] {
			t.Errorf("last %v, want %v", l.stateOf("last"), order[len(order)-1])
		}
		if l.stateOf("total") != 14.0 {
			t.Errorf("total %v", l.stateOf("total"))
		}
		if got := mustJSON(t, l.stateOf("meta")); got != `{"w1":true,"w2":true,"w3":true,"w4":true}` {
			t.Errorf("meta %s", got)
		}
	}
	l := h.ended(h.start(example(t, "reducers.yaml"), "", ""), projection.RunCompleted)
	if l.stateOf("total") != 10.0 || len(l.stateOf("tags").([]any)) != 4 || len(l.stateOf("seen").(map[string]any)) != 4 {
		t.Errorf("state %v", l.s.VarsMap())
	}
}

// 8. Cycles with iteration caps per node and per graph.
func TestLoopsAndCaps(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	l := h.ended(h.start(example(t, "loop.yaml"), "", ""), projection.RunCompleted)
	if l.stateOf("count") != 3.0 || l.s.Nodes["step"].Iteration != 3 {
		t.Errorf("count %v after %d iterations", l.stateOf("count"), l.s.Nodes["step"].Iteration)
	}
	for _, tc := range []struct{ name, caps, want string }{
		{"node", "maxIterations: 50\nnodes:\n  - {id: spin, type: transform, maxIterations: 4, config: {set: {count: 'state.count + 1'}}}", `node "spin" reached its iteration cap of 4`},
		{"graph", "maxIterations: 3\nnodes:\n  - {id: spin, type: transform, config: {set: {count: 'state.count + 1'}}}", `node "spin" reached its iteration cap of 3`},
	} {
		g := parse(t, "name: spin\n"+tc.caps+`
edges:
  - {from: START, to: spin}
  - {from: spin, to: spin, when: "true"}
  - {from: spin, to: END, when: "false"}
`)
		l := h.ended(h.start(g, `{"count": 0}`, ""), projection.RunFailed)
		if l.s.Error.Type != events.FailureIterationCap || !strings.Contains(l.s.Error.Message, tc.want) {
			t.Errorf("%s cap: error %+v", tc.name, l.s.Error)
		}
	}
}

// 9. No lockstep: the fast chain ends while the slow branch sleeps.
func TestNoLockstep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	l := h.ended(h.start(example(t, "nolockstep.yaml"), "", ""), projection.RunCompleted)
	chainDone := l.seqOf(events.NodeInvoked, "c")
	slowDone := l.seqOf(events.NodeInvoked, "slow")
	if chainDone == 0 || chainDone > slowDone {
		t.Fatalf("chain ended at %d, slow at %d\n%s", chainDone, slowDone, l.summary())
	}
	c, slow := l.s.Nodes["c"], l.s.Nodes["slow"]
	if !c.EndedAt.Before(*slow.EndedAt) || slow.EndedAt.Sub(*c.EndedAt) < 500*time.Millisecond {
		t.Errorf("chain ended %s, slow %s", c.EndedAt, slow.EndedAt)
	}
}

// 10. Subgraphs: a child run of its own, linked both ways.
func TestSubgraph(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	parent := h.start(example(t, "subgraph.yaml"), "", `{"tenant": "acme"}`)
	l := h.ended(parent, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"child": succeeded, "report": succeeded})
	started, _ := payloads[*events.ChildRunStartedData](l)
	if len(started) != 1 || started[0].Graph != "double" {
		t.Fatalf("child-run-started %+v", started)
	}
	childID := started[0].ChildRunID
	if childID != h.childID(parent, events.NodeRef{Node: "child", Iteration: 1}) || childID == decider.ChildRunID(parent, "", events.NodeRef{Node: "child", Iteration: 1}) {
		t.Errorf("child id %s", childID)
	}
	finished, _ := payloads[*events.ChildRunFinishedData](l)
	if len(finished) != 1 || finished[0].Status != "completed" || finished[0].ChildRunID != childID {
		t.Fatalf("child-run-finished %+v", finished)
	}
	var out map[string]any
	_ = json.Unmarshal(l.s.Nodes["child"].Output, &out)
	if out["doubled"] != 42.0 {
		t.Errorf("child node output %s", l.s.Nodes["child"].Output)
	}
	cl := h.ended(childID, projection.RunCompleted)
	if p := cl.s.Parent; p == nil || p.RunID != parent || p.Ref.Node != "child" {
		t.Errorf("child's parent %+v", cl.s.Parent)
	}
	if string(cl.s.Invocation) != `{"tenant":"acme"}` {
		t.Errorf("child invocation %s", cl.s.Invocation)
	}
}

func TestCancellingTheParentCancelsTheChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: parent
graphs:
  slow:
    name: slow
    nodes: [{id: nap, type: sleep, config: {duration: 1h}}]
    edges: [{from: START, to: nap}, {from: nap, to: END}]
nodes: [{id: sub, type: subgraph, config: {graph: slow}}]
edges: [{from: START, to: sub}, {from: sub, to: END}]
`)
	parent := h.start(g, "", "")
	childID := h.childID(parent, events.NodeRef{Node: "sub", Iteration: 1})
	h.waitFor(childID, "child's nap running", 20*time.Second, func(l runLog) bool { return l.status("nap") == projection.NodeRunning })
	h.cancel(parent, "alice", "not needed")
	l := h.ended(parent, projection.RunCancelled)
	if l.s.Cancel.By != "alice" {
		t.Errorf("cancel %+v", l.s.Cancel)
	}
	cl := h.ended(childID, projection.RunCancelled)
	if cl.s.Cancel.By != "run "+parent {
		t.Errorf("child cancel %+v", cl.s.Cancel)
	}
	// The child's running node saw its context cancelled.
	h.waitFor(childID, "nap cancelled by the worker", 10*time.Second, func(l runLog) bool { return l.seqOf(events.NodeCanceled, "nap") > 0 })
}

// 11. Human nodes: a durable wait that survives coordinator restarts.
func TestHumanSignalAcrossRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.start(example(t, "approval.yaml"), "", "")
	h.waitFor(run, "approve waiting", 20*time.Second, func(l runLog) bool { return l.status("approve") == projection.NodeWaiting })
	h.stopCoordinator()
	h.startCoordinator()
	h.signal(run, "approve", `{"approved": true}`)
	l := h.ended(run, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"publish": succeeded, "discard": skipped, "escalate": skipped})
	if l.readies("approve") != 0 {
		t.Errorf("the human node took a worker")
	}
	if got := string(l.s.Nodes["approve"].Output); got != `{"approved":true}` {
		t.Errorf("approve output %s", got)
	}
}

func TestHumanDeadlineWhileCoordinatorDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: deadline
nodes:
  - {id: ask, type: human, config: {timeout: 2s}}
  - {id: ok, type: echo}
  - {id: late, type: echo}
edges:
  - {from: START, to: ask}
  - {from: ask, to: ok}
  - {from: ask, to: late, timeout: true}
  - {from: ok, to: END}
  - {from: late, to: END}
`)
	run := h.start(g, "", "")
	h.waitFor(run, "ask waiting", 20*time.Second, func(l runLog) bool { return l.status("ask") == projection.NodeWaiting })
	// No coordinator while the deadline passes: the timer is JetStream's,
	// and fires in the timers stream; the coordinator that comes back
	// appends it to the run.
	h.stopCoordinator()
	ts, err := eventlog.JetStream(h.st).Stream(h.ctx, eventlog.Must(h.st).TimerStream())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := ts.GetLastMsgForSubject(h.ctx, eventlog.FiredSubject(run)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deadline timer did not fire while no coordinator ran")
		}
		// Polls: the timer fires on the server, which tells nobody while no coordinator runs.
		time.Sleep(50 * time.Millisecond)
	}
	h.startCoordinator()
	l := h.ended(run, projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"ask": projection.NodeFailed, "ok": skipped, "late": succeeded})
}

func TestHumanDeadlineFailsWithoutTimeoutEdge(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: deadline2
nodes: [{id: ask, type: human, config: {timeout: 1s}}]
edges: [{from: START, to: ask}, {from: ask, to: END}]
`)
	l := h.ended(h.start(g, "", ""), projection.RunFailed)
	if l.s.Error.Type != events.FailureTimeout || !strings.Contains(l.s.Error.Message, `node "ask"`) {
		t.Fatalf("error %+v", l.s.Error)
	}
}

// 12. Cancellation: running nodes stop, nothing new starts, the log says
// who and when.
func TestCancellation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.start(example(t, "longjob.yaml"), "", "")
	h.waitFor(run, "work running", 20*time.Second, func(l runLog) bool { return l.status("work") == projection.NodeRunning })
	asked := time.Now()
	h.cancel(run, "bob", "wrong input")
	l := h.ended(run, projection.RunCancelled)
	if c := l.s.Cancel; c == nil || c.By != "bob" || c.Reason != "wrong input" || c.At.Before(asked.Add(-time.Second)) {
		t.Errorf("cancel %+v", l.s.Cancel)
	}
	cancelled, evs := payloads[*events.RunCancelledData](l)
	if len(cancelled) != 1 || cancelled[0].By != "bob" || evs[0].Time.IsZero() {
		t.Errorf("run-cancelled %+v", cancelled)
	}
	l = h.waitFor(run, "work cancelled by the worker", 10*time.Second, func(l runLog) bool { return l.seqOf(events.NodeCanceled, "work") > 0 })
	nc, ncEvs := payloads[*events.NodeCancelledData](l)
	if nc[0].By != "bob" || ncEvs[0].Time.Sub(asked) > 5*time.Second {
		t.Errorf("node-cancelled %+v at %s", nc[0], ncEvs[0].Time)
	}
	if l.readies("report") != 0 {
		t.Errorf("a node started after the cancel request")
	}
	req := l.seqOf(events.RunCancelRequested, "")
	for _, e := range l.evs {
		if e.Type == events.NodeReady && e.Seq > req {
			t.Errorf("node-ready after the cancel request: %s", e.NodeID)
		}
	}
}

// 13. Skip: a false when skips the node; successors follow the join rules.
func TestSkip(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := example(t, "skip.yaml")
	l := h.ended(h.start(g, "", ""), projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"enrich": skipped, "audit": skipped, "save": succeeded})
	sk, _ := payloads[*events.NodeSkippedData](l)
	reasons := map[string]string{}
	for _, p := range sk {
		reasons[p.Node] = p.Reason
	}
	if reasons["enrich"] != "its when condition is false" || reasons["audit"] != "no incoming edge was taken" {
		t.Errorf("skip reasons %v", reasons)
	}
	if l.stateOf("enriched") != nil || l.stateOf("saved") != true {
		t.Errorf("state %v", l.s.VarsMap())
	}
	l = h.ended(h.start(g, `{"enrich": true}`, ""), projection.RunCompleted)
	l.wantStatus(t, map[string]projection.NodeStatus{"enrich": succeeded, "audit": succeeded, "save": succeeded})
	_ = idle
}

// An any-join inside a loop: each round fires on the fast input and
// absorbs the slow one's late signal, so the join runs once per round.
func TestAnyJoinInLoopAbsorbsLateSignals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	g := parse(t, `
name: anyloop
nodes:
  - {id: s, type: transform, config: {set: {count: "state.count + 1"}}}
  - {id: fast, type: sleep, config: {duration: 5ms}}
  - {id: slow, type: sleep, config: {duration: 250ms}}
  - {id: j, type: echo, join: any}
edges:
  - {from: START, to: s}
  - {from: s, to: fast}
  - {from: s, to: slow}
  - {from: fast, to: j}
  - {from: slow, to: j}
  - {from: j, to: s, when: "state.count < 3"}
  - {from: j, to: END, when: "state.count >= 3"}
`)
	l := h.ended(h.start(g, `{"count": 0}`, ""), projection.RunCompleted)
	for _, n := range []string{"s", "fast", "slow", "j"} {
		if c := l.readies(n); c != 3 {
			t.Errorf("%s readied %d times, want 3\n%s", n, c, l.summary())
		}
	}
	if len(l.s.Pending) != 0 || len(l.s.Nodes["j"].Owed) != 0 {
		t.Errorf("pending %v, owed %v", l.s.Pending, l.s.Nodes["j"].Owed)
	}
}
