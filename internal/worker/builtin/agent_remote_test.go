package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// remoteGraph is an agent with a tool run by the workers of queue
// "tools" and a subgraph tool whose one node runs there too.
const remoteGraph = `
name: remote-tools
graphs:
  summarize:
    name: summarize
    nodes: [{id: sum, type: lookup, queue: tools}]
    edges: [{from: START, to: sum}, {from: sum, to: END}]
nodes:
  - id: research
    type: agent
    config:
      endpoint: m
      model: fake
      prompt: "Research {{.state.topic}}."
      tools:
        - name: lookup
          type: lookup
          queue: tools
          timeout: 5s
          maxAttempts: 2
          parameters: {type: object, properties: {q: {type: string}}, required: [q]}
        - name: summarize
          graph: summarize
          parameters: {type: object, properties: {q: {type: string}}, required: [q]}
edges:
  - {from: START, to: research}
  - {from: research, to: END}
`

// TestAgentRemoteTools runs an agent whose model calls, in one answer, a
// tool of another queue and a subgraph tool, on a real coordinator with
// the agent's worker (queue default) and a second worker serving queue
// "tools". Each call ends the agent's attempt awaiting it; the
// coordinator runs it as a child run (the tool's node alone, on its
// queue, with its own key and retry policy; or the subgraph), and its end
// resumes the agent. The agent's worker is stopped while the first tool
// waits on the other queue (no worker serves it yet) and another takes
// the agent's next attempt: the model is called twice in all, the first
// call never again, and each tool runs once, on the tools worker.
func TestAgentRemoteTools(t *testing.T) {
	e := newEngine(t)
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"one"}`}, {"c2", "summarize", `{"q":"two"}`}}},
		fakeTurn{text: "Done."},
	)
	fake.byTurn = true
	local, remote := &countingTool{}, &countingTool{}
	stop1 := e.worker("w1", newAgent(url, false, local, nil), local)
	g, err := graph.Parse([]byte(remoteGraph), "remote.yaml", graph.WithTypes("lookup"))
	if err != nil {
		t.Fatal(err)
	}
	run := e.start(g, `{"topic":"weft"}`)
	st := e.until(run, "the lookup tool's child run", func(s *projection.State) bool {
		n := s.Nodes["research"]
		return n != nil && n.Status == projection.NodeWaiting && n.WaitingFor == "child" && n.Child != ""
	})
	n := st.Nodes["research"]
	if n.Await == nil || n.Await.For != events.AwaitTool || n.Await.Tool != "lookup" || n.Await.Call != "c1" {
		t.Fatalf("await %+v", n.Await)
	}
	if want := decider.ToolChildRunID(run, st.Nonce, events.NodeRef{Node: "research", Iteration: 1}, n.Attempt); n.Child != want {
		t.Errorf("child %s, want %s", n.Child, want)
	}
	if fake.requests() != 1 {
		t.Fatalf("%d model calls before the tool ran; want 1", fake.requests())
	}
	firstChild := n.Child
	stop1() // the agent's worker goes while its tool waits on another queue
	e.worker("w2", nil, remote, "tools")
	e.worker("w3", newAgent(url, false, local, nil), local)

	st = e.until(run, "the run's end", ended)
	if st.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", st.Status, st.Error)
	}
	if fake.requests() != 2 || remote.total() != 2 || local.total() != 0 {
		t.Errorf("%d model calls, %d runs on the tools queue, %d on the agent's worker; want 2, 2, 0", fake.requests(), remote.total(), local.total())
	}
	res := toolMessages(fake.request(1))
	if len(res) != 2 || !strings.Contains(res[0], `"got":{"q":"one"}`) || !strings.Contains(res[1], `"q":"two"`) {
		t.Errorf("the model read %q, want the lookup's output and the subgraph's state", res)
	}
	if n := st.Nodes["research"]; n.Awaits != 2 || n.Attempt != 3 {
		t.Errorf("awaits %d, attempt %d; want 2 and 3", n.Awaits, n.Attempt)
	}
	// Each call is a run of its own: the lookup's, with the tool's
	// retry policy and timeout, under its own idempotency key.
	child, err := e.cl.Get(context.Background(), firstChild)
	if err != nil {
		t.Fatal(err)
	}
	if child.Status != projection.RunCompleted || child.Parent == nil || child.Parent.Attempt != 1 || child.Parent.RunID != run {
		t.Errorf("child %s: %s, parent %+v", firstChild, child.Status, child.Parent)
	}
	var def graph.Definition
	_ = json.Unmarshal(child.Graph, &def)
	if len(def.Nodes) != 1 || def.Nodes[0].Queue != "tools" || def.Nodes[0].Retry == nil || def.Nodes[0].Retry.MaxAttempts != 2 || def.Nodes[0].Timeout.D().Seconds() != 5 {
		t.Errorf("the tool's graph %s", child.Graph)
	}
	for key := range remote.runs {
		if strings.HasPrefix(key, run) {
			t.Errorf("a tool ran under the agent's key %s", key)
		}
	}
}

// TestAgentRemoteToolsBadInput: where a tool runs is checked when the
// graph is loaded, at the tool.
func TestAgentRemoteToolsBadInput(t *testing.T) {
	for _, c := range []struct{ tool, want string }{
		{`{name: s, graph: nope}`, `field "config.tools[0].graph": unknown graph "nope"`},
		{`{name: s, type: lookup, queue: "no queue"}`, `field "config.tools[0].queue": queue name "no queue"`},
		{`{name: s, type: lookup, queue: q, graph: g}`, `field "config.tools[0].graph": a tool runs on a queue (queue) or as a subgraph (graph), not both`},
		{`{name: s, type: lookup, graph: g}`, `field "config.tools[0].type": a subgraph tool has no type`},
		{`{name: s}`, `field "config.tools[0].type": missing type`},
	} {
		src := `
name: bad
graphs:
  g: {name: g, nodes: [{id: a, type: lookup}], edges: [{from: START, to: a}, {from: a, to: END}]}
nodes:
  - {id: research, type: agent, config: {endpoint: m, model: fake, prompt: hi, tools: [` + c.tool + `]}}
edges: [{from: START, to: research}, {from: research, to: END}]
`
		_, err := graph.Parse([]byte(src), "bad.yaml", graph.WithTypes("lookup"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.tool, err, c.want)
		} else if !strings.Contains(err.Error(), "line 6") {
			t.Errorf("%s: %v, want it located at line 6", c.tool, err)
		}
	}
}

// TestAgentAwaitDeliveredAgain: an attempt whose step awaits a tool's
// child run, delivered again (its worker died after the step, before the
// ack), records the same await again and ends the same way, calling
// neither the model nor the tool; the next attempt, with the child's end,
// gives the model the tool's output, or its failure as an error result.
func TestAgentAwaitDeliveredAgain(t *testing.T) {
	for _, c := range []struct{ name, resume, want string }{
		{"completed", `{"childRunId":"k1","status":"completed","output":{"hits":3}}`, `{"hits":3}`},
		{"failed", `{"childRunId":"k1","status":"failed","error":{"type":"Boom","message":"down"}}`, `error: tool "lookup" failed (run k1): Boom: down`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake, url := newFakeModel(t, false,
				fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"one"}`}}},
				fakeTurn{text: "Done."},
			)
			fake.byTurn = true
			tool, j := &countingTool{}, &memJournal{}
			a := newAgent(url, false, tool, j)
			remote := map[string]any{"name": "lookup", "type": "lookup", "queue": "tools", "parameters": lookupTool["parameters"]}
			cfg := agentConfig(map[string]any{"tools": []any{remote}})
			for delivery := 1; delivery <= 2; delivery++ {
				in := agentInput(cfg)
				in.Delivery = delivery
				if _, err := a.Execute(context.Background(), in); !errors.Is(err, worker.ErrAwait) {
					t.Fatalf("delivery %d: %v, want ErrAwait", delivery, err)
				}
			}
			var last builtin.AgentStep
			_ = json.Unmarshal(j.steps[len(j.steps)-1], &last)
			if len(j.steps) != 3 || last.Step != 2 || last.Kind != "await" || last.AwaitFor != events.AwaitTool || string(last.AwaitArgs) != `{"q":"one"}` {
				t.Fatalf("%d steps, the last %+v; want model, await, the same await again", len(j.steps), last)
			}
			if fake.requests() != 1 || tool.total() != 0 {
				t.Fatalf("%d model calls, %d local tool runs; want 1 and 0", fake.requests(), tool.total())
			}
			in := agentInput(cfg)
			in.Attempt, in.Resume = 2, json.RawMessage(c.resume)
			res, err := a.Execute(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if out := res.Output.(map[string]any); out["content"] != "Done." || fake.requests() != 2 {
				t.Errorf("output %v after %d model calls", out, fake.requests())
			}
			if got := toolMessages(fake.request(1)); len(got) != 1 || got[0] != c.want {
				t.Errorf("the model read %q, want %q", got, c.want)
			}
		})
	}
}

// BenchmarkAgentToolCall measures one run of an agent whose model calls
// one tool, then answers (two model calls against the fake server), on a
// real coordinator and workers over JetStream: the tool run in the
// agent's own worker, or on another queue's worker as a child run (the
// await step, the child run's decisions and node, the agent's next
// attempt). The difference is what a tool of another queue costs.
//
//	go test -run '^$' -bench BenchmarkAgentToolCall -benchtime 30x ./internal/worker/builtin/
func BenchmarkAgentToolCall(b *testing.B) {
	for _, bc := range []struct{ name, queue string }{{"own worker", ""}, {"other queue", "tools"}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEngine(b)
			fake, url := newFakeModel(b, false,
				fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"one"}`}}},
				fakeTurn{text: "Done."},
			)
			fake.byTurn = true
			tool := &countingTool{}
			e.worker("w1", newAgent(url, false, tool, nil), tool)
			e.worker("w2", nil, tool, "tools")
			queue := ""
			if bc.queue != "" {
				queue = "\n          queue: " + bc.queue
			}
			src := `
name: bench
nodes:
  - id: research
    type: agent
    config:
      endpoint: m
      model: fake
      prompt: "Research {{.state.topic}}."
      tools:
        - name: lookup
          type: lookup` + queue + `
edges: [{from: START, to: research}, {from: research, to: END}]
`
			g, err := graph.Parse([]byte(src), "bench.yaml", graph.WithTypes("lookup"))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				run := e.start(g, `{"topic":"weft"}`)
				waitCompleted(b, e.st, run)
			}
			b.StopTimer()
			if tool.total() != b.N {
				b.Fatalf("%d tool runs for %d runs", tool.total(), b.N)
			}
		})
	}
}

// waitCompleted reads a run's events as they are stored until its end,
// which must be a completion.
func waitCompleted(tb testing.TB, st events.Store, run string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := eventlog.JetStream(st).OrderedConsumer(ctx, st.StreamName(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventlog.RunFilter(run)}})
	if err != nil {
		tb.Fatal(err)
	}
	for {
		wait, _ := ctx.Deadline()
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Until(wait)))
		if err != nil {
			cl := client.New(st)
			s, _ := cl.Get(context.Background(), run)
			var kid any
			var types []string
			if n := s.Nodes["research"]; n != nil && n.Child != "" {
				kid, _ = cl.Get(context.Background(), n.Child)
				evs, _ := st.Read(context.Background(), n.Child, 0, 0)
				for _, e := range evs {
					types = append(types, string(e.Type))
				}
			}
			evs, _ := st.Read(context.Background(), run, 0, 0)
			for _, e := range evs {
				types = append(types, "parent:"+string(e.Type)+":"+e.ID)
			}
			tb.Fatalf("run %s: no end (%v); state %s; child %s; events %v", run, err, mustJSONText(s), mustJSONText(kid), types)
		}
		switch events.Type(msg.Headers().Get("ce-type")) {
		case events.RunCompleted:
			return
		case events.RunFailed, events.RunCancelled:
			tb.Fatalf("run %s did not complete", run)
		}
	}
}

// TestAgentMapItemCannotAwait: a map item's agent whose model calls a
// tool that would await fails, saying why, rather than end an attempt
// that nothing would resume.
func TestAgentMapItemCannotAwait(t *testing.T) {
	_, url := newFakeModel(t, false, fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"one"}`}}})
	a := newAgent(url, false, &countingTool{}, &memJournal{})
	remote := map[string]any{"name": "lookup", "type": "lookup", "queue": "tools", "parameters": lookupTool["parameters"]}
	in := agentInput(agentConfig(map[string]any{"tools": []any{remote}}))
	item := 3
	in.Item = &item
	_, err := a.Execute(context.Background(), in)
	if f := failure(t, err, events.FailureValidation, false); !strings.Contains(f.Message, "a map item's agent cannot await") {
		t.Errorf("message %q", f.Message)
	}
}

func mustJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
