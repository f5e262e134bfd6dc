package sim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/graph"
)

// nodeType is the executor type of every simulated worker node. Its config
// says how often an attempt fails: {"fail": p} retryably, {"fatal": p} for
// good.
const nodeType = "sim"

// behaviour is a simulated node's config.
type behaviour struct {
	Fail  float64 `json:"fail"`
	Fatal float64 `json:"fatal"`
}

// simGraph is a graph the generator starts runs of.
type simGraph struct {
	name  string
	g     *graph.Graph
	input string
	// human lists the human nodes a client sends signals to.
	human []string
	// reactive: the client answers each wait of a human node (a signal
	// per activation), rather than sending one signal at a random time.
	reactive bool
}

func work(b behaviour, opts ...graph.NodeOption) []graph.NodeOption {
	return append([]graph.NodeOption{graph.Config(b), graph.Outputs("log", "total", "count")}, opts...)
}

// quickRetry keeps back-offs short against the de-duplication window, so
// a lost timer is retried inside it, as it is in production.
var quickRetry = graph.RetryPolicy{MaxAttempts: 4, InitialInterval: graph.Duration(time.Second), BackoffCoefficient: 2, MaxInterval: graph.Duration(10 * time.Second), Jitter: graph.JitterOf(0.2)}

// graphs builds the graphs the simulator runs: a chain, a fan-out into an
// all-join, retries with a fallback, a loop with an iteration cap, a map,
// a human node fed by signals with a deadline, a human node in a loop
// whose person answers each wait, durable waits, a loop that continues
// as new every two steps (three links a chain), two branches sharing a
// node limit's slot, a graph whose runs share a run limit, and a
// subgraph node with a quick child run.
//
// Size: a table of the simulator's graphs.
func graphs() ([]*simGraph, error) {
	type spec struct {
		name     string
		b        *graph.Builder
		input    string
		human    []string
		reactive bool
	}
	reducers := func(b *graph.Builder) *graph.Builder {
		return b.Reducer("log", graph.Append).Reducer("total", graph.Sum)
	}
	specs := []spec{
		{name: "chain", b: reducers(graph.New("chain")).
			Node("a", nodeType, work(behaviour{Fail: 0.2})...).
			Node("b", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry))...).
			Node("c", nodeType, work(behaviour{})...).
			Edge(graph.Start, "a").Edge("a", "b").Edge("b", "c").Edge("c", graph.End)},
		{name: "fanout", b: reducers(graph.New("fanout")).
			Node("split", nodeType, work(behaviour{})...).
			Node("x", nodeType, work(behaviour{Fail: 0.3}, graph.Retry(quickRetry))...).
			Node("y", nodeType, work(behaviour{Fail: 0.3}, graph.Retry(quickRetry))...).
			Node("z", nodeType, work(behaviour{Fail: 0.1, Fatal: 0.02}, graph.Retry(quickRetry), graph.Queue("slow"))...).
			Node("join", nodeType, append(work(behaviour{}), graph.WaitAll())...).
			Edge(graph.Start, "split").Edge("split", "x").Edge("split", "y").Edge("split", "z").
			Edge("x", "join").Edge("y", "join").Edge("z", "join").Edge("join", graph.End)},
		{name: "retry", b: reducers(graph.New("retry")).
			Node("flaky", nodeType, work(behaviour{Fail: 0.6}, graph.Retry(quickRetry))...).
			Node("fb", nodeType, work(behaviour{Fail: 0.7}, graph.Retry(graph.RetryPolicy{MaxAttempts: 2, InitialInterval: graph.Duration(500 * time.Millisecond)}), graph.Fallback("fallback"))...).
			Edge(graph.Start, "flaky").Edge("flaky", "fb").Edge("fb", graph.End)},
		{name: "loop", b: reducers(graph.New("loop")).
			Node("init", nodeType, work(behaviour{})...).
			Node("step", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry), graph.MaxIterations(6))...).
			Edge(graph.Start, "init").Edge("init", "step").
			Edge("step", "step", graph.If("state.total < 4")).
			Edge("step", graph.End, graph.If("state.total >= 4"))},
		// Continue-as-new: every two steps the run continues as a new
		// run carrying its state, until the total reaches 6 (three
		// links); each continuation must start exactly once.
		{name: "continue", b: reducers(graph.New("continue")).
			Node("step", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry))...).
			Edge(graph.Start, "step").
			Edge("step", "step", graph.If("int(state.total) % 2 != 0")).
			Edge("step", graph.Continue, graph.If("int(state.total) % 2 == 0 && state.total < 6")).
			Edge("step", graph.End, graph.If("state.total >= 6"))},
		{name: "map", input: `{"items":[1,2,3,4]}`, b: reducers(graph.New("map")).
			Node("each", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry), graph.Map("state.items", 2), graph.Concurrency(3, "", "sim-items"))...).
			Node("after", nodeType, work(behaviour{})...).
			Edge(graph.Start, "each").Edge("each", "after").Edge("after", graph.End)},
		// Two branches that share one slot (a limit named "sim-shared",
		// max 1, one key): each run's branches take turns, and so do
		// the runs; retries and timeouts give the slot back.
		{name: "limited", b: reducers(graph.New("limited")).
			Node("split", nodeType, work(behaviour{})...).
			Node("x", nodeType, work(behaviour{Fail: 0.3}, graph.Retry(quickRetry), graph.Concurrency(1, "", "sim-shared"))...).
			Node("y", nodeType, work(behaviour{Fail: 0.3}, graph.Retry(quickRetry), graph.Concurrency(1, "", "sim-shared"))...).
			Node("join", nodeType, append(work(behaviour{}), graph.WaitAll())...).
			Edge(graph.Start, "split").Edge("split", "x").Edge("split", "y").
			Edge("x", "join").Edge("y", "join").Edge("join", graph.End)},
		// A run limit (max 2 runs in progress, one key, a limit named
		// "sim-runs"): the runs beyond it wait before their first node
		// and are let in as runs end.
		{name: "runlimited", b: reducers(graph.New("runlimited")).RunConcurrency(2, "", "sim-runs", graph.RunQueue).
			Node("first", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry))...).
			Node("second", nodeType, work(behaviour{Fatal: 0.1})...).
			Edge(graph.Start, "first").Edge("first", "second").Edge("second", graph.End)},
		{name: "human", human: []string{"approve"}, b: reducers(graph.New("human")).
			Node("draft", nodeType, work(behaviour{})...).
			Node("approve", graph.TypeHuman, graph.Config(map[string]string{"timeout": "40s"})).
			Node("publish", nodeType, work(behaviour{})...).
			Node("escalate", nodeType, work(behaviour{})...).
			Edge(graph.Start, "draft").Edge("draft", "approve").
			Edge("approve", "publish").Edge("approve", "escalate", graph.OnTimeout()).
			Edge("publish", graph.End).Edge("escalate", graph.End)},
		// Durable waits: one for a duration, one until a time in the
		// input (after every run's start), one until a time long past
		// (it ends at once): the coordinator's timers alone end them.
		{name: "wait", input: `{"deadline":"2026-01-01T00:01:00Z"}`, b: reducers(graph.New("wait")).
			Node("draft", nodeType, work(behaviour{})...).
			Node("nap", graph.TypeWait, graph.Config(map[string]string{"duration": "20s"})).
			Node("until", graph.TypeWait, graph.Config(map[string]string{"until": "state.deadline"})).
			Node("past", graph.TypeWait, graph.Config(map[string]string{"until": "'2000-01-01T00:00:00Z'"})).
			Node("after", nodeType, work(behaviour{Fail: 0.2}, graph.Retry(quickRetry))...).
			Edge(graph.Start, "draft").Edge("draft", "nap").Edge("nap", "until").Edge("until", "past").
			Edge("past", "after").Edge("after", graph.End)},
		// A subgraph node whose child run is one quick node: the child
		// may end, and its end reach the parent's log, before the
		// parent's decision to wait for it (the child's start is
		// appended first, and the parent's appends are slowed, fail
		// part-way, or its coordinator crashes between them).
		{name: "subgraph", b: reducers(graph.New("subgraph")).
			Node("before", nodeType, work(behaviour{})...).
			Node("child", graph.TypeSubgraph, graph.Config(map[string]string{"graph": "quick"})).
			Node("after", nodeType, work(behaviour{})...).
			Edge(graph.Start, "before").Edge("before", "child").Edge("child", "after").Edge("after", graph.End).
			Subgraph("quick", &graph.Definition{Name: "quick",
				Nodes: []graph.Node{{ID: "one", Type: nodeType, Config: json.RawMessage(`{"fail":0.2}`), Retry: &quickRetry}},
				Edges: []graph.Edge{{From: graph.Start, To: "one"}, {From: "one", To: graph.End}}})},
		{name: "review", human: []string{"approve"}, reactive: true, b: reducers(graph.New("review")).
			Node("draft", nodeType, work(behaviour{})...).
			Node("approve", graph.TypeHuman, graph.Config(map[string]string{"timeout": "60s"}), graph.MaxIterations(4)).
			Node("revise", nodeType, work(behaviour{})...).
			Edge(graph.Start, "draft").Edge("draft", "approve").
			Edge("approve", "revise").Edge("approve", graph.End, graph.OnTimeout()).
			Edge("revise", "approve", graph.If("state.total < 3")).
			Edge("revise", graph.End, graph.If("state.total >= 3"))},
	}
	var out []*simGraph
	for _, sp := range specs {
		g, err := sp.b.Build(graph.AllowAnyType())
		if err != nil {
			return nil, fmt.Errorf("graph %s: %w", sp.name, err)
		}
		out = append(out, &simGraph{name: sp.name, g: g, input: sp.input, human: sp.human, reactive: sp.reactive})
	}
	return out, nil
}

// behaviourOf reads a node's behaviour from its work item's config.
func behaviourOf(cfg json.RawMessage) behaviour {
	var b behaviour
	_ = json.Unmarshal(cfg, &b)
	return b
}
