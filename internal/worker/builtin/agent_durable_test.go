package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// TestAgentWorkerKilledMidLoop runs an agent node on a real worker over
// JetStream and stops the worker while the node's third model call is
// under way (its drain timing out: the node is cut off and its work item
// handed back, as when a worker dies). A second worker takes the item
// again, reads the node's last step from the run's log, and goes on from
// there: the two model calls and the two tool runs recorded before the
// kill are not made again; only the call that was cut off is. Every step
// is a node-step event of the run, and the streamed text of the final
// answer reaches a core NATS subscriber of the run's token subjects.
func TestAgentWorkerKilledMidLoop(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	if _, err := workqueue.EnsureQueue(ctx, eventlog.JetStream(st), st.StreamName(), worker.DefaultQueue, workqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"a", "lookup", `{"q":"one"}`}}},
		fakeTurn{calls: []fakeCall{{"b", "lookup", `{"q":"two"}`}}},
		fakeTurn{text: "Both found."},
	)
	fake.byTurn = true
	fake.block = make(chan struct{}) // never closed: the third call hangs until the worker gives it up
	fake.blockAt = func(n int) bool { return n == 2 }
	tool := &countingTool{}

	run := events.NewRunID()
	cfg, _ := json.Marshal(agentConfig(map[string]any{"stream": true}))
	nc := eventlog.JetStream(st).Conn()
	tokens, err := nc.SubscribeSync(eventlog.TokenFilter(run))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(map[string]any{"name": "t", "nodes": []any{map[string]any{"id": "n1", "type": "agent"}}})
	start, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "t", Graph: g, Invocation: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, start); err != nil {
		t.Fatal(err)
	}
	ref := events.NodeRef{Node: "n1", Iteration: 1}
	ready, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), time.Time{}, &events.NodeReadyData{
		NodeRef: ref, Attempt: 1, Type: "agent", Queue: worker.DefaultQueue, Config: cfg,
		Input: json.RawMessage(`{"topic":"weft"}`), IdempotencyKey: eventlog.IdempotencyKey(run, ref, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, events.AnySeq, ready); err != nil {
		t.Fatal(err)
	}

	startWorker := func(name string) (stop func() error) {
		w, err := worker.New(st, worker.WithName(name), worker.WithDrainTimeout(200*time.Millisecond),
			worker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		a := newAgent(url, false, tool, nil) // the default journal: the run's log
		a.Tokens = builtin.PublishTokens
		w.Handle("agent", a)
		w.Handle("lookup", tool)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		stopped := false
		stop = func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(20 * time.Second):
				t.Error("worker did not stop")
				return nil
			}
		}
		t.Cleanup(func() { _ = stop() })
		return stop
	}

	stop1 := startWorker("w1")
	waitFor(t, "the third model call", func() bool { return fake.requests() == 3 })
	if err := stop1(); !errors.Is(err, worker.ErrDrainTimeout) {
		t.Fatalf("first worker: %v, want its drain to time out (the node cut off)", err)
	}
	steps := func() []*events.NodeStepData {
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []*events.NodeStepData
		for _, e := range evs {
			if e.Type == events.NodeStep {
				p, err := e.Payload()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, p.(*events.NodeStepData))
			}
			if e.Type == events.NodeInvoked || e.Type == events.NodeFailed {
				if e.Attempt == 1 && len(out) < 5 && e.Type == events.NodeFailed {
					t.Fatalf("the first worker recorded a failure: %s", e.Data)
				}
			}
		}
		return out
	}
	if n := len(steps()); n != 4 {
		t.Fatalf("%d steps recorded before the kill, want 4 (model, tool, model, tool)", n)
	}

	startWorker("w2")
	evs := waitRun(t, st, run, events.NodeInvoked)
	var out struct {
		Content string `json:"content"`
		Turns   int    `json:"turns"`
		Steps   int    `json:"steps"`
	}
	for _, e := range evs {
		if e.Type == events.NodeInvoked {
			p, _ := e.Payload()
			_ = json.Unmarshal(p.(*events.NodeInvokedData).Output, &out)
		}
	}
	if out.Content != "Both found." || out.Turns != 3 || out.Steps != 5 {
		t.Errorf("output = %+v", out)
	}
	// Model calls by turn: each completed one once; the one cut off twice.
	perTurn := map[int]int{}
	for i := range fake.requests() {
		msgs, _ := fake.request(i)["messages"].([]any)
		n := 0
		for _, m := range msgs {
			if m.(map[string]any)["role"] == "assistant" {
				n++
			}
		}
		perTurn[n]++
	}
	if perTurn[0] != 1 || perTurn[1] != 1 || perTurn[2] != 2 || len(perTurn) != 3 {
		t.Errorf("model calls by turn = %v, want turns 0 and 1 once, turn 2 twice (cut off, then made again)", perTurn)
	}
	if tool.total() != 2 {
		t.Errorf("tool runs = %v, want 2", tool.runs)
	}
	all := steps()
	kinds := ""
	for i, s := range all {
		kinds += s.Kind + " "
		if s.Step != i+1 {
			t.Errorf("step %d is numbered %d", i+1, s.Step)
		}
	}
	if kinds != "model tool model tool model " {
		t.Errorf("steps = %s", kinds)
	}
	// The final answer's tokens, streamed as step 5, on the node's subject.
	var streamed string
	for {
		m, err := tokens.NextMsg(2 * time.Second)
		if err != nil {
			break
		}
		if m.Subject != eventlog.TokenSubject(run, worker.DefaultQueue, ref.Key()) || m.Header.Get(worker.HeaderStep) != "5" {
			t.Errorf("token on %s, step %s", m.Subject, m.Header.Get(worker.HeaderStep))
		}
		streamed += string(m.Data)
		if streamed == "Both found." {
			break
		}
	}
	if streamed != "Both found." {
		t.Errorf("streamed %q", streamed)
	}
	// The step's subject is the activation's own.
	if e := evs[len(evs)-2]; e.Type == events.NodeStep && e.Subject() != eventlog.StepSubject(run, worker.DefaultQueue, ref.Key()) {
		t.Errorf("step on %s", e.Subject())
	}
}

// waitFor polls a condition no event announces (the fake server's count).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// waitRun reads a run's events as they are stored until one of type typ.
func waitRun(t *testing.T, st events.Store, run string, typ events.Type) []*events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := eventlog.JetStream(st).OrderedConsumer(ctx, st.StreamName(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventlog.RunFilter(run)}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*events.Event
	for {
		wait, _ := ctx.Deadline()
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Until(wait)))
		if err != nil {
			t.Fatalf("run %s: no %s event (%v); so far %d events", run, typ, err, len(evs))
		}
		meta, _ := msg.Metadata()
		e := events.DecodeStored(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
		evs = append(evs, e)
		if e.Type == typ {
			return evs
		}
		if e.Type == events.NodeFailed {
			t.Fatalf("node failed: %s", e.Data)
		}
	}
}

// TestAgentWorkerKilledAtEveryStep stops a real worker (its drain timing
// out, its work item handed back: what a dead worker's item gets) while
// each step of a scripted conversation is under way — each of the three
// model calls and each of the two tool runs — and lets a second worker
// finish the node. Whatever the step, the model calls and tool runs
// recorded before the kill are not made again; only the one cut off is.
func TestAgentWorkerKilledAtEveryStep(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	if _, err := workqueue.EnsureQueue(ctx, eventlog.JetStream(st), st.StreamName(), worker.DefaultQueue, workqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, kill := range []struct {
		kind string
		n    int // which model call or tool run, 0-based
	}{{"model", 0}, {"tool", 0}, {"model", 1}, {"tool", 1}, {"model", 2}} {
		t.Run(kill.kind+" "+strconv.Itoa(kill.n), func(t *testing.T) {
			fake, url := newFakeModel(t, false,
				fakeTurn{calls: []fakeCall{{"a", "lookup", `{"q":"one"}`}}},
				fakeTurn{calls: []fakeCall{{"b", "lookup", `{"q":"two"}`}}},
				fakeTurn{text: "Both found."},
			)
			fake.byTurn = true
			fake.block = make(chan struct{}) // never closed: the call hangs until its worker gives it up
			tool := &countingTool{}
			underWay := func() bool { return fake.requests() == kill.n+1 }
			if kill.kind == "model" {
				fake.blockAt = func(n int) bool { return n == kill.n }
			} else {
				tool.hangAt = func(n int) bool { return n == kill.n }
				underWay = func() bool {
					tool.mu.Lock()
					defer tool.mu.Unlock()
					return tool.count == kill.n+1
				}
			}
			run := startAgentRun(t, st, agentConfig(nil))
			stop1 := startAgentWorker(t, st, newAgent(url, false, tool, nil), tool, "w1")
			waitFor(t, "the step to be under way", underWay)
			if err := stop1(); !errors.Is(err, worker.ErrDrainTimeout) {
				t.Fatalf("first worker: %v, want its drain to time out", err)
			}
			startAgentWorker(t, st, newAgent(url, false, tool, nil), tool, "w2")
			evs := waitRun(t, st, run, events.NodeInvoked)
			perTurn := map[int]int{}
			for i := range fake.requests() {
				msgs, _ := fake.request(i)["messages"].([]any)
				n := 0
				for _, m := range msgs {
					if m.(map[string]any)["role"] == "assistant" {
						n++
					}
				}
				perTurn[n]++
			}
			for turn := range 3 {
				want := 1
				if kill.kind == "model" && kill.n == turn {
					want = 2
				}
				if perTurn[turn] != want {
					t.Errorf("model calls by turn = %v, want turn %d called %d times", perTurn, turn, want)
				}
			}
			wantTools := 2
			if kill.kind == "tool" {
				wantTools = 3
			}
			if tool.total() != wantTools {
				t.Errorf("tool runs = %v, want %d in all", tool.runs, wantTools)
			}
			steps := 0
			for _, e := range evs {
				if e.Type == events.NodeStep {
					steps++
				}
			}
			if steps != 5 {
				t.Errorf("%d step events, want 5", steps)
			}
		})
	}
}

// startAgentRun appends a run's start and the work item of its agent node
// n1, and returns the run id.
func startAgentRun(t *testing.T, st events.Store, config map[string]any) string {
	t.Helper()
	ctx := context.Background()
	run := events.NewRunID()
	cfg, _ := json.Marshal(config)
	g, _ := json.Marshal(map[string]any{"name": "t", "nodes": []any{map[string]any{"id": "n1", "type": "agent"}}})
	start, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "t", Graph: g, Invocation: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, start); err != nil {
		t.Fatal(err)
	}
	ref := events.NodeRef{Node: "n1", Iteration: 1}
	ready, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), time.Time{}, &events.NodeReadyData{
		NodeRef: ref, Attempt: 1, Type: "agent", Queue: worker.DefaultQueue, Config: cfg,
		Input: json.RawMessage(`{"topic":"weft"}`), IdempotencyKey: eventlog.IdempotencyKey(run, ref, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, events.AnySeq, ready); err != nil {
		t.Fatal(err)
	}
	return run
}

// startAgentWorker runs a worker with the agent and its tool until the
// test ends or stop is called; stop returns Run's error.
func startAgentWorker(t *testing.T, st events.Store, a *builtin.Agent, tool worker.Node, name string) (stop func() error) {
	t.Helper()
	w, err := worker.New(st, worker.WithName(name), worker.WithDrainTimeout(200*time.Millisecond),
		worker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("agent", a)
	w.Handle("lookup", tool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				t.Error("worker did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
