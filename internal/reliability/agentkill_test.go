package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/fakemodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// agentGraph is an agent with two http tools that write to the effect
// ledger (%s: its URL), against the fake model (package fakemodel: it
// calls search, then note, then answers: five steps).
const agentGraph = `
name: agentkill
nodes:
  - id: research
    type: agent
    retry: {maxAttempts: 3}
    config:
      endpoint: fake
      model: any
      prompt: "Research {{.state.topic}}."
      stream: true
      tools:
        - name: search
          type: http
          parameters: {type: object, properties: {query: {type: string}}}
          config: {url: "%[1]s/effect/search", method: POST}
        - name: note
          type: http
          parameters: {type: object, properties: {text: {type: string}}}
          config: {url: "%[1]s/effect/note", method: POST}
edges:
  - {from: START, to: research}
  - {from: research, to: END}
`

// killPoint is where a scenario SIGKILLs a process: while a model call
// (turn 0, 1 or 2) or a tool run (0: search, 1: note) is under way, or
// just after step n (1 to 4) is in the log, with the call that follows
// it held at the fake server until the worker is dead. With coordinator
// set, the coordinator is killed instead, while model call 1 is under
// way, and the worker goes on.
type killPoint struct {
	name        string
	model, tool int // -1: not this kind
	afterStep   int // 0: not this kind
	coordinator bool
}

// agentKillPoints are every step of the scripted conversation; the short
// list, for make test, is one of each kind.
func agentKillPoints(all bool) []killPoint {
	during := func(name string, model, tool int) killPoint {
		return killPoint{name: name, model: model, tool: tool}
	}
	after := func(n int) killPoint {
		return killPoint{name: fmt.Sprintf("worker after step %d", n), model: -1, tool: -1, afterStep: n}
	}
	coord := killPoint{name: "coordinator during model call 1", model: 1, tool: -1, coordinator: true}
	if !all {
		return []killPoint{during("worker during model call 1", 1, -1), during("worker during tool note", -1, 1), after(3), coord}
	}
	return []killPoint{
		during("worker during model call 0", 0, -1), during("worker during tool search", -1, 0),
		during("worker during model call 1", 1, -1), during("worker during tool note", -1, 1),
		during("worker during model call 2", 2, -1),
		after(1), after(2), after(3), after(4), coord,
	}
}

// TestAgentKilledAtEveryStep runs an agent node (three model calls
// against the fake model, two http tools with effects in a ledger) on a
// coordinator and worker processes, and SIGKILLs a process at each step
// of the conversation, one run per kill point: the worker while each
// model call and each tool run is under way (the tool's effect applied,
// its answer not yet sent: the worst case), the worker just after each of
// the steps 1 to 4 is in the log (the next call held at the fake server
// until the worker is dead), and the coordinator while a model call is
// under way. A new worker (or coordinator) resumes by redelivery. Every
// run completes with the fake model's answer, and:
//
//   - no completed model call is made again: each turn is answered once
//     (a call cut off by the kill is made again, and answered then);
//   - no tool effect is doubled: the ledger, keyed by the tool call's
//     idempotency key, holds one effect per tool; a tool run cut off
//     after its effect runs again under the same key;
//   - the log holds five steps, numbered 1 to 5, each once, and no
//     decision twice.
//
// make test runs one kill point of each kind (about 15 s); with
// WEFT_AGENTKILL_ALL=1 every one (make agentkill).
func TestAgentKilledAtEveryStep(t *testing.T) {
	srv := testkit.Server(t)
	nc, js := testkit.Connect(t, srv)
	ctx := context.Background()
	st, err := events.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	// A short ack wait: a dead worker's item is delivered again after 1 s.
	if _, err := workqueue.EnsureQueue(ctx, js, st.StreamName(), worker.DefaultQueue, workqueue.QueueOptions{AckWait: time.Second}); err != nil {
		t.Fatal(err)
	}
	coordArgs := []string{"-nats", srv.ClientURL(), "-lease-ttl", "1s"}
	coord := start(t, "coordinator", "coordinator", nil, coordArgs...)
	for _, k := range agentKillPoints(os.Getenv("WEFT_AGENTKILL_ALL") != "") {
		t.Run(k.name, func(t *testing.T) {
			coord = runAgentKill(t, st, nc.ConnectedUrl(), k, coord, coordArgs)
		})
	}
}

// runAgentKill runs one kill point, and returns the coordinator that
// runs now.
func runAgentKill(t *testing.T, st events.Store, natsURL string, k killPoint, coord *process, coordArgs []string) *process {
	h := newAgentHarness(t, k)
	g, err := graph.Parse(fmt.Appendf(nil, agentGraph, h.ledger.URL), "agentkill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	workerArgs := func(name string) []string {
		return []string{"-nats", natsURL, "-name", name, "-llm-endpoint", "name=fake,url=" + h.modelURL, "-http-allow", "127.0.0.1"}
	}
	w1 := start(t, "worker-1", "nodeworker", nil, workerArgs("w1")...)
	steps, err := eventlog.JetStream(st).Conn().SubscribeSync("weft.r.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = steps.Unsubscribe() }()
	run, err := client.New(st).Start(context.Background(), g, client.WithInput(map[string]any{"topic": "weft"}))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case k.afterStep > 0:
		waitStep(t, steps, run, k.afterStep)
	default:
		select {
		case <-h.arrived:
		case <-time.After(60 * time.Second):
			t.Fatal("the held call never came")
		}
	}
	h.killed()
	if k.coordinator {
		coord.kill(t)
		coord = start(t, "coordinator-again", "coordinator", nil, coordArgs...)
		close(h.release) // the worker goes on, its outcome waiting for the new coordinator
	} else {
		w1.kill(t)
		start(t, "worker-2", "nodeworker", nil, workerArgs("w2")...)
	}
	s := testkit.WaitEnded(t, st, []string{run}, 90*time.Second)[run]
	h.check(t, st, run, s)
	return coord
}

// agentHarness is one scenario's fake model and effect ledger, and its
// hold: the call at the kill point waits there until its client is gone
// (or release is closed).
type agentHarness struct {
	k        killPoint
	model    *fakemodel.Server
	modelURL string
	ledger   *httptest.Server
	arrived  chan struct{} // closed when the held call arrives
	release  chan struct{} // closed to let the held call go on

	mu       sync.Mutex
	held     bool
	answered map[int]int // model answers by turn
	modelIn  map[int]int // model calls by turn
	toolIn   map[string]int
	effects  map[string]string // idempotency key → tool
}

func newAgentHarness(t *testing.T, k killPoint) *agentHarness {
	h := &agentHarness{k: k, arrived: make(chan struct{}), release: make(chan struct{}),
		answered: map[int]int{}, modelIn: map[int]int{}, toolIn: map[string]int{}, effects: map[string]string{}}
	// After step n the next call is held: a tool run after a model step
	// (odd n), a model call after a tool step.
	holdModel, holdTool := k.model, k.tool
	if k.afterStep > 0 {
		holdModel, holdTool = -1, -1
		if k.afterStep%2 == 1 {
			holdTool = k.afterStep / 2
		} else {
			holdModel = k.afterStep / 2
		}
	}
	h.model = &fakemodel.Server{Before: func(ctx context.Context, _, turn int) error {
		h.mu.Lock()
		h.modelIn[turn]++
		hold := turn == holdModel && !h.held
		h.held = h.held || hold
		if !hold {
			h.answered[turn]++
		}
		h.mu.Unlock()
		if !hold {
			return nil
		}
		if err := h.hold(ctx); err != nil {
			return err
		}
		h.mu.Lock()
		h.answered[turn]++ // released: answered now
		h.mu.Unlock()
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var err error
	if h.modelURL, err = fakemodel.Start(ctx, h.model); err != nil {
		t.Fatal(err)
	}
	tools := []string{"search", "note"}
	h.ledger = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tool := strings.TrimPrefix(r.URL.Path, "/effect/")
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		h.toolIn[tool]++
		result := "applied"
		if prior, ok := h.effects[key]; ok || key == "" {
			result = "already applied by " + prior
		} else {
			h.effects[key] = tool
		}
		hold := holdTool >= 0 && tool == tools[holdTool] && !h.held
		h.held = h.held || hold
		h.mu.Unlock()
		if hold && h.hold(r.Context()) != nil {
			return // the effect is applied; its answer is never sent
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"effect": result})
	}))
	t.Cleanup(h.ledger.Close)
	return h
}

// hold signals the held call's arrival and waits until its client is gone
// (an error: the call is dropped) or the scenario releases it (nil).
func (h *agentHarness) hold(ctx context.Context) error {
	close(h.arrived)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return nil
	}
}

// waitStep waits until the run's step n is stored (seen on its subject
// by a core subscription to the runs' subjects).
func waitStep(t *testing.T, sub *nats.Subscription, run string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("step %d never came: %v", n, err)
		}
		e := events.DecodeStored(m.Subject, m.Header, m.Data, 0, time.Time{})
		if e.RunID != run || e.Type != events.NodeStep {
			continue
		}
		if p, err := e.Payload(); err == nil && p.(*events.NodeStepData).Step == n {
			return
		}
	}
}

// killed ends the holds: the calls of the worker that resumes are
// answered.
func (h *agentHarness) killed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = true
}

// check asserts the scenario's outcome: the run completed with the fake
// model's answer, each turn was answered once, each tool's effect is in
// the ledger once, and the log holds steps 1 to 5 once each and no
// decision twice.
func (h *agentHarness) check(t *testing.T, st events.Store, run string, s *projection.State) {
	t.Helper()
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s (%v)", run, s.Status, s.Error)
	}
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Content string `json:"content"`
	}
	var steps []int
	for _, e := range evs {
		p, err := e.Payload()
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeStepData:
			steps = append(steps, d.Step)
		case *events.NodeInvokedData:
			_ = json.Unmarshal(d.Output, &out)
		}
	}
	if !strings.HasPrefix(out.Content, fakemodel.Prefix) {
		t.Errorf("the node's answer = %q, want the fake model's", out.Content)
	}
	if fmt.Sprint(steps) != "[1 2 3 4 5]" {
		t.Errorf("steps in the log: %v, want [1 2 3 4 5]", steps)
	}
	if dups := testkit.DuplicateDecisions(evs); len(dups) > 0 {
		t.Errorf("decisions twice: %v", dups)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for turn := range 3 {
		if h.answered[turn] != 1 {
			t.Errorf("model turn %d answered %d times, want once (calls by turn: %v)", turn, h.answered[turn], h.modelIn)
		}
	}
	if h.k.model >= 0 && !h.k.coordinator && h.modelIn[h.k.model] != 2 {
		t.Errorf("model turn %d called %d times, want twice (cut off by the kill, then made again)", h.k.model, h.modelIn[h.k.model])
	}
	byTool := map[string]int{}
	for key, tool := range h.effects {
		byTool[tool]++
		if !strings.Contains(key, "/step/") {
			t.Errorf("tool effect under key %q, want the step's key (<attempt key>/step/<n>)", key)
		}
	}
	if byTool["search"] != 1 || byTool["note"] != 1 || len(h.effects) != 2 {
		t.Errorf("effects in the ledger: %v, want one per tool (tool runs: %v)", h.effects, h.toolIn)
	}
	if h.k.tool >= 0 && h.toolIn[[]string{"search", "note"}[h.k.tool]] != 2 {
		t.Errorf("tool runs %v, want the one cut off after its effect run twice", h.toolIn)
	}
}
