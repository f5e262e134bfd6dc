package decider_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// sim runs a graph in memory: the engine decides, a fake worker answers
// every ready event with exec's result, timers fire at once.
type sim struct {
	t     *testing.T
	g     *graph.Graph
	s     *projection.State
	log   []*events.Event
	seq   uint64
	clock time.Time
	exec  func(r *events.NodeReadyData) events.Payload
}

func newSim(t *testing.T, src string, input, invocation string, exec func(r *events.NodeReadyData) events.Payload) *sim {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("graph: %v", err)
	}
	sm := &sim{t: t, g: g, s: &projection.State{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), exec: exec}
	p := &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical()}
	if input != "" {
		p.Input = json.RawMessage(input)
	}
	if invocation != "" {
		p.Invocation = json.RawMessage(invocation)
	}
	sm.append(sm.event("run1", p))
	return sm
}

func (sm *sim) event(id string, p events.Payload) *events.Event {
	e, err := events.New("run1", id, sm.clock, p)
	if err != nil {
		sm.t.Fatal(err)
	}
	return e
}

func (sm *sim) append(e *events.Event) {
	sm.seq++
	sm.clock = sm.clock.Add(time.Millisecond)
	c := *e
	c.Seq = sm.seq
	// Round-trip the data, as the store would.
	ce, _ := events.New(c.RunID, c.ID, c.Time, mustPayload(sm.t, &c))
	c.Data = ce.Data
	sm.log = append(sm.log, &c)
	if err := sm.s.Apply(&c); err != nil {
		sm.t.Fatalf("apply %s: %v", c.Type, err)
	}
}

func mustPayload(t *testing.T, e *events.Event) events.Payload {
	p, err := e.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run drives the run to its end (or the step limit) and returns the state.
func (sm *sim) run() *projection.State {
	for step := 0; step < 10000 && !sm.s.Status.Ended(); step++ {
		// Decide on a copy, as the coordinator does, then append.
		work := sm.s.Clone()
		d := decider.Decide(sm.g, work, sm.clock)
		for _, e := range d.Events {
			sm.append(e)
		}
		for _, tm := range d.Timers {
			sm.append(tm.Event)
		}
		progressed := len(d.Events) > 0 || len(d.Timers) > 0
		for _, e := range d.Events {
			if e.Type != events.NodeReady {
				continue
			}
			r := mustPayload(sm.t, e).(*events.NodeReadyData)
			sm.append(sm.event("inv-"+e.ID, &events.NodeInvokingData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Worker: "w"}))
			sm.append(sm.event("out-"+e.ID, sm.exec(r)))
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return sm.s
}

func (sm *sim) types() string {
	var out []string
	for _, e := range sm.log {
		k := strings.TrimSuffix(strings.TrimPrefix(string(e.Type), "dev.weft."), ".v1")
		if e.NodeID != "" {
			k += ":" + e.NodeID
		}
		out = append(out, k)
	}
	return strings.Join(out, " ")
}

func echo(r *events.NodeReadyData) events.Payload {
	return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: json.RawMessage(`{"node":"` + r.Node + `"}`),
		Updates: map[string]json.RawMessage{r.Node: json.RawMessage(`true`)}}
}

func TestChainCompletes(t *testing.T) {
	sm := newSim(t, `
name: chain
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: END}
`, `{"x":1}`, "", echo)
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s; log: %s", s.Status, sm.types())
	}
	// A routing that leads straight to an activation is written with it:
	// one event per step.
	want := "run.started node.ready:a node.invoking:a node.invoked:a node.ready:b node.invoking:b node.invoked:b node.routed:b run.completed"
	if got := sm.types(); got != want {
		t.Fatalf("log\n got %s\nwant %s", got, want)
	}
	for _, e := range sm.log {
		if e.Type == events.NodeReady && e.NodeID == "b" {
			r := mustPayload(t, e).(*events.NodeReadyData).Routed
			if len(r) != 1 || r[0].Node != "a" || len(r[0].Signals) != 1 || !r[0].Signals[0].Taken || r[0].Signals[0].To != "b" {
				t.Fatalf("ready b carries routing %+v", r)
			}
		}
	}
	var out map[string]any
	_ = json.Unmarshal(s.Output, &out)
	if out["a"] != true || out["b"] != true || out["x"] != 1.0 {
		t.Fatalf("output %s", s.Output)
	}
}

func TestConditionalAndJoinWithSkip(t *testing.T) {
	sm := newSim(t, `
name: branch
nodes:
  - {id: a, type: echo}
  - {id: premium, type: echo}
  - {id: standard, type: echo}
  - {id: join, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: premium, when: 'invocation.user_tier == "premium"'}
  - {from: a, to: standard, when: 'invocation.user_tier != "premium"'}
  - {from: premium, to: join}
  - {from: standard, to: join}
  - {from: join, to: END}
`, "", `{"user_tier":"premium"}`, echo)
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s: %v; log: %s", s.Status, s.Error, sm.types())
	}
	if s.Nodes["standard"].Status != projection.NodeSkipped || s.Nodes["premium"].Status != projection.NodeSucceeded || s.Nodes["join"].Status != projection.NodeSucceeded {
		t.Fatalf("nodes: standard %s premium %s join %s", s.Nodes["standard"].Status, s.Nodes["premium"].Status, s.Nodes["join"].Status)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	sm := newSim(t, `
name: retry
nodes:
  - {id: flaky, type: fail, retry: {maxAttempts: 3, initialInterval: 1s}}
edges:
  - {from: START, to: flaky}
  - {from: flaky, to: END}
`, "", "", func(r *events.NodeReadyData) events.Payload {
		if r.Attempt < 3 {
			return &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Error: events.Failure{Type: "Boom", Message: "flaky", Retryable: true}}
		}
		return echo(r)
	})
	s := sm.run()
	if s.Status != projection.RunCompleted || s.Nodes["flaky"].Attempt != 3 || s.Stats.Retries != 2 {
		t.Fatalf("status %s attempt %d retries %d; log %s", s.Status, s.Nodes["flaky"].Attempt, s.Stats.Retries, sm.types())
	}
}

func TestNonRetryableFailsRun(t *testing.T) {
	sm := newSim(t, `
name: fails
nodes:
  - {id: bad, type: fail}
edges:
  - {from: START, to: bad}
  - {from: bad, to: END}
`, "", "", func(r *events.NodeReadyData) events.Payload {
		return &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Error: events.Failure{Type: "Bad", Message: "no", Retryable: false}}
	})
	s := sm.run()
	if s.Status != projection.RunFailed || !strings.Contains(s.Error.Message, `node "bad"`) {
		t.Fatalf("status %s error %v", s.Status, s.Error)
	}
}

func TestLoopHitsCap(t *testing.T) {
	sm := newSim(t, `
name: loop
nodes:
  - {id: inc, type: echo, maxIterations: 5}
edges:
  - {from: START, to: inc}
  - {from: inc, to: inc, when: "true"}
  - {from: inc, to: END, when: "false"}
`, "", "", echo)
	s := sm.run()
	if s.Status != projection.RunFailed || s.Error.Type != events.FailureIterationCap || !strings.Contains(s.Error.Message, `"inc"`) || !strings.Contains(s.Error.Message, "5") {
		t.Fatalf("status %s error %+v", s.Status, s.Error)
	}
}

func TestMapGathersInOrder(t *testing.T) {
	sm := newSim(t, `
name: mapper
nodes:
  - {id: each, type: echo, map: {over: "state.docs", concurrency: 2}}
  - {id: after, type: echo}
edges:
  - {from: START, to: each}
  - {from: each, to: after}
  - {from: after, to: END}
`, `{"docs":["a","b","c","d","e"]}`, "", func(r *events.NodeReadyData) events.Payload {
		if r.Item == nil {
			return echo(r)
		}
		var local map[string]any
		_ = json.Unmarshal(r.Local, &local)
		out, _ := json.Marshal(strings.ToUpper(local["item"].(string)))
		return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: out}
	})
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s %v; %s", s.Status, s.Error, sm.types())
	}
	if got := string(s.Nodes["each"].Output); got != `["A","B","C","D","E"]` {
		t.Fatalf("map output %s", got)
	}
}

func TestFoldIsDeterministicAndSplittable(t *testing.T) {
	sm := newSim(t, `
name: chain
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: END}
`, `{"x":1}`, "", echo)
	final := sm.run().Marshal()
	if again := projection.Fold(sm.log).Marshal(); string(again) != string(final) {
		t.Fatalf("refold differs:\n%s\n%s", again, final)
	}
	for cut := range sm.log {
		snap, err := projection.Unmarshal(projection.Fold(sm.log[:cut]).Marshal())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range sm.log[cut:] {
			_ = snap.Apply(e)
		}
		if string(snap.Marshal()) != string(final) {
			t.Fatalf("snapshot at %d + tail differs", cut)
		}
	}
}

func TestMapItemRetry(t *testing.T) {
	sm := newSim(t, `
name: mapretry
nodes:
  - {id: each, type: echo, map: {over: "state.xs", concurrency: 2}, retry: {maxAttempts: 2, initialInterval: 1s}}
edges:
  - {from: START, to: each}
  - {from: each, to: END}
`, `{"xs":[1,2,3]}`, "", func(r *events.NodeReadyData) events.Payload {
		if r.Item != nil && *r.Item == 1 && r.Attempt == 1 {
			return &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Error: events.Failure{Type: "Flaky", Message: "once", Retryable: true}}
		}
		return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: json.RawMessage(`"ok"`)}
	})
	s := sm.run()
	if s.Status != projection.RunCompleted || s.Stats.Retries != 1 || string(s.Nodes["each"].Output) != `["ok","ok","ok"]` {
		t.Fatalf("status %s %v retries %d output %s; %s", s.Status, s.Error, s.Stats.Retries, s.Nodes["each"].Output, sm.types())
	}
}

func TestStuckJoinFailsInsteadOfHanging(t *testing.T) {
	// j joins a and b (all); the back edge j -> a runs a again, but b ran
	// once, so j's second round can never complete.
	sm := newSim(t, `
name: stuck
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
  - {id: j, type: echo}
edges:
  - {from: START, to: a}
  - {from: START, to: b}
  - {from: a, to: j}
  - {from: b, to: j}
  - {from: j, to: a, when: "true"}
  - {from: j, to: END, when: "false"}
`, "", "", echo)
	s := sm.run()
	if s.Status != projection.RunFailed || s.Error.Type != events.FailureNoPathToEnd || !strings.Contains(s.Error.Message, `"j"`) {
		t.Fatalf("status %s error %+v; %s", s.Status, s.Error, sm.types())
	}
}

func TestWhenAndMapSeePredecessorOutput(t *testing.T) {
	sm := newSim(t, `
name: predout
nodes:
  - {id: a, type: echo}
  - {id: each, type: echo, when: "output.go == true", map: {over: "output.items"}}
edges:
  - {from: START, to: a}
  - {from: a, to: each}
  - {from: each, to: END}
`, "", "", func(r *events.NodeReadyData) events.Payload {
		if r.Node == "a" {
			return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: json.RawMessage(`{"go":true,"items":["x","y"]}`)}
		}
		return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: r.Local}
	})
	s := sm.run()
	if s.Status != projection.RunCompleted || string(s.Nodes["each"].Output) != `[{"index":0,"item":"x"},{"index":1,"item":"y"}]` {
		t.Fatalf("status %s %v output %s", s.Status, s.Error, s.Nodes["each"].Output)
	}
}
