package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// approvalGraph is an agent whose one tool needs a person's approval;
// with a deadline, a timeout edge leads to late.
func approvalGraph(t *testing.T, deadline string) *graph.Graph {
	t.Helper()
	src := `
name: approve-tools
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
          approval: required
          approvalTimeout: ` + deadline + `
          parameters: {type: object, properties: {q: {type: string}}, required: [q]}
  - {id: late, type: lookup}
edges:
  - {from: START, to: research}
  - {from: research, to: END}
  - {from: research, to: late, timeout: true}
  - {from: late, to: END}
`
	g, err := graph.Parse([]byte(src), "approve.yaml", graph.WithTypes("lookup"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// engine is a coordinator and the workers of a test, on one store.
type engine struct {
	t  testing.TB
	st events.Store
	cl *client.Client
}

func newEngine(t testing.TB) *engine {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := coordinator.New(st, coordinator.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &engine{t: t, st: st, cl: client.New(st)}
}

// worker runs a worker of queues with the agent and the lookup tool
// until stop or the test's end.
func (e *engine) worker(name string, a *builtin.Agent, tool worker.Node, queues ...string) (stop func()) {
	if len(queues) == 0 {
		queues = []string{worker.DefaultQueue}
	}
	w, err := worker.New(e.st, worker.WithName(name), worker.WithQueues(queues...), worker.WithDrainTimeout(200*time.Millisecond),
		worker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		e.t.Fatal(err)
	}
	if a != nil {
		w.Handle("agent", a)
	}
	w.Handle("lookup", tool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				e.t.Error("worker did not stop")
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *engine) start(g *graph.Graph, input string) string {
	e.t.Helper()
	run := events.NewRunID()
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), Input: json.RawMessage(input),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Append(context.Background(), run, 0, ev); err != nil {
		e.t.Fatal(err)
	}
	return run
}

// until folds run from the log until cond holds of its state.
func (e *engine) until(run, what string, cond func(*projection.State) bool) *projection.State {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := e.cl.Get(context.Background(), run)
		if err == nil && cond(st) {
			return st
		}
		if err == nil && st.Status.Ended() {
			e.t.Fatalf("run %s ended (%s, %v) before %s", run, st.Status, st.Error, what)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s: timed out waiting for %s (last: %v)", run, what, err)
		}
		// Polling the fold: no single event says "the state is now so".
		time.Sleep(20 * time.Millisecond)
	}
}

func awaitsApproval(node string) func(*projection.State) bool {
	return func(s *projection.State) bool {
		n := s.Nodes[node]
		return n != nil && n.Status == projection.NodeWaiting && n.WaitingFor == "signal" && n.Await != nil
	}
}

func ended(s *projection.State) bool { return s.Status.Ended() }

// toolMessages are the tool results of model request req.
func toolMessages(req map[string]any) []string {
	var out []string
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "tool" {
			c, _ := mm["content"].(string)
			out = append(out, c)
		}
	}
	return out
}

// TestAgentToolApproval runs an agent whose tool needs approval on a real
// coordinator and worker: the model's call of the tool ends the agent's
// attempt awaiting it, and the node waits for a signal, shown by the read
// model with the command that answers it. Approved (with the worker that
// ran the agent stopped meanwhile, and another taking the next attempt),
// the tool runs once and the model is called once more: the call that
// asked for the tool is not made again. Rejected, the tool never runs and
// the model reads the person's reason as the tool's result. With no
// answer before the approval's deadline, the node times out and its
// timeout edge is taken.
func TestAgentToolApproval(t *testing.T) {
	e := newEngine(t)
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"one"}`}}},
		fakeTurn{text: "Done."},
	)
	fake.byTurn = true
	tool := &countingTool{}
	stop1 := e.worker("w1", newAgent(url, false, tool, nil), tool)
	g := approvalGraph(t, "1h")

	t.Run("approved", func(t *testing.T) {
		run := e.start(g, `{"topic":"weft"}`)
		st := e.until(run, "the approval's wait", awaitsApproval("research"))
		if n := st.Nodes["research"]; n.Await.Tool != "lookup" || n.Await.Call != "c1" || n.Deadline == nil {
			t.Fatalf("await %+v deadline %v", n.Await, n.Deadline)
		}
		if tool.total() != 0 || fake.requests() != 1 {
			t.Fatalf("before the approval: %d tool runs, %d model calls; want 0 and 1", tool.total(), fake.requests())
		}
		waits := readmodel.WaitsOf(st)
		if len(waits) != 1 || waits[0].Await == nil {
			t.Fatalf("waits %+v", waits)
		}
		cmd := readmodel.SignalCommand(run, waits[0])
		if want := "weft signal " + run + ` research -data '{"approved": true, "call": "c1"}'`; cmd != want {
			t.Errorf("command %q, want %q", cmd, want)
		}
		if readmodel.StatusOf(st) != projection.RunWaiting {
			t.Errorf("status %s, want waiting", readmodel.StatusOf(st))
		}
		// The worker that ran the agent goes; another takes the next
		// attempt, from the recorded steps.
		stop1()
		e.worker("w2", newAgent(url, false, tool, nil), tool)
		bad := json.RawMessage(`{"yes": 1}`)
		if err := e.cl.Signal(context.Background(), run, "research", bad); err == nil || !strings.Contains(err.Error(), `"approved": true`) {
			t.Errorf("signal %s: %v, want refused, saying what to send", bad, err)
		}
		if err := e.cl.Signal(context.Background(), run, "research", map[string]any{"approved": true, "call": "c1"}); err != nil {
			t.Fatal(err)
		}
		st = e.until(run, "the run's end", ended)
		if st.Status != projection.RunCompleted {
			t.Fatalf("run %s: %v", st.Status, st.Error)
		}
		if tool.total() != 1 || fake.requests() != 2 {
			t.Errorf("%d tool runs, %d model calls; want 1 and 2 (the first call not made again)", tool.total(), fake.requests())
		}
		var out map[string]any
		_ = json.Unmarshal(st.Nodes["research"].Output, &out)
		if out["content"] != "Done." {
			t.Errorf("output %v", out)
		}
		if got := toolMessages(fake.request(1)); len(got) != 1 || !strings.Contains(got[0], `"q":"one"`) {
			t.Errorf("the model read %q, want the tool's result", got)
		}
		if n := st.Nodes["research"]; n.Attempt != 2 || n.Awaits != 1 {
			t.Errorf("attempt %d, awaits %d; want 2 and 1", n.Attempt, n.Awaits)
		}
	})

	t.Run("rejected", func(t *testing.T) {
		runs, calls := tool.total(), fake.requests()
		run := e.start(g, `{"topic":"weft"}`)
		e.until(run, "the approval's wait", awaitsApproval("research"))
		if err := e.cl.Signal(context.Background(), run, "research", map[string]any{"approved": false, "reason": "not on a Friday"}); err != nil {
			t.Fatal(err)
		}
		st := e.until(run, "the run's end", ended)
		if st.Status != projection.RunCompleted {
			t.Fatalf("run %s: %v", st.Status, st.Error)
		}
		if tool.total() != runs || fake.requests() != calls+2 {
			t.Errorf("%d tool runs, %d model calls; want none and 2", tool.total()-runs, fake.requests()-calls)
		}
		got := toolMessages(fake.request(calls + 1))
		if len(got) != 1 || !strings.Contains(got[0], "a person rejected this call") || !strings.Contains(got[0], "not on a Friday") {
			t.Errorf("the model read %q, want the rejection and its reason", got)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		runs := tool.total()
		run := e.start(approvalGraph(t, "1s"), `{"topic":"weft"}`)
		st := e.until(run, "the run's end", ended)
		if st.Status != projection.RunCompleted {
			t.Fatalf("run %s: %v", st.Status, st.Error)
		}
		n := st.Nodes["research"]
		if n.Status != projection.NodeFailed || n.Error == nil || n.Error.Type != events.FailureTimeout || !strings.Contains(n.Error.Message, `no approval of tool "lookup"`) {
			t.Errorf("research %s: %v; want failed with a timeout naming the tool", n.Status, n.Error)
		}
		if l := st.Nodes["late"]; l == nil || l.Status != projection.NodeSucceeded {
			t.Errorf("the timeout edge to late was not taken: %+v", l)
		}
		if tool.total() != runs+1 { // late's own run, not the agent's tool
			t.Errorf("%d tool runs; want 1 (late)", tool.total()-runs)
		}
	})
}
