package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/weft-dev/weft/internal/fakemodel"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// agentBenchGraph is one agent node with one tool (echo) against the fake
// model, which calls the tool, then answers: two model turns, three steps
// (model, tool, model), each appended to the run's log before the loop
// goes on.
const agentBenchGraph = `
name: agentbench
nodes:
  - id: agent
    type: agent
    config:
      endpoint: fake
      model: any
      prompt: "Research {{.state.topic}}."
      tools:
        - name: note
          type: echo
          parameters: {type: object, properties: {text: {type: string}}}
edges:
  - {from: START, to: agent}
  - {from: agent, to: END}
`

// runAgent measures the "agent" figure: the time of an agent node's loop
// turn against the fake model on 127.0.0.1 (package fakemodel), and what
// Weft adds to the model's own latency. Sizes.AgentRuns runs of a
// one-tool agent (two model turns, three steps) are made one after the
// other on an in-process coordinator and worker; a turn is the node's
// time, from the stored node-invoking to the stored node-invoked, over
// its two turns: the model call through the provider's SDK, the tool run
// through the worker's executor, each step appended to JetStream (the
// run's log) before the loop goes on, the prompt template, the token
// accounting.
//
// The floor is the model's own latency as any client sees it: a plain
// HTTP POST of a chat completion to the same fake server, answered at
// once. The overhead per turn is the turn's p50 less the floor's.
func runAgent(ctx context.Context, e *env) ([]Result, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, err := fakemodel.Start(fctx, &fakemodel.Server{})
	if err != nil {
		return nil, err
	}
	g, err := graph.Parse([]byte(agentBenchGraph), "agentbench.yaml")
	if err != nil {
		return nil, err
	}
	stream := e.name("WEFT_AGENT")
	defer e.dropStream(stream)
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		return nil, err
	}
	defer coord.stop()
	work, err := e.startWorker(ctx, stream, 4, builtin.WithLLMEndpoint("fake", builtin.LLMEndpoint{URL: url}))
	if err != nil {
		return nil, err
	}
	defer work.stop()

	var turns []time.Duration
	err = e.profile("", func() error {
		turns, err = agentTurns(ctx, e, st, stream, g, e.sizes.AgentRuns)
		return err
	})
	if err != nil {
		return nil, err
	}
	floor, err := modelFloor(ctx, url, e.sizes.AgentRuns*2)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	t50, f50 := pct(turns, 50), pct(floor, 50)
	notes := fmt.Sprintf("%d runs of a one-tool agent, one after the other (2 model turns, 3 steps appended each); turn = (stored invoked − stored invoking) / 2; floor: a plain HTTP POST to the same fake model", len(turns)/2)
	return []Result{
		row("agent loop turn p50", ms(t50), "ms", ms(f50), nil, notes),
		row("agent loop turn p99", ms(pct(turns, 99)), "ms", ms(pct(floor, 99)), nil, ""),
		row("agent overhead per turn p50", ms(t50-f50), "ms", 0, nil, "what Weft adds to the model's own latency per turn: the turn's p50 less the floor's"),
	}, nil
}

// agentTurns makes n runs of g one after the other and returns each run's
// time per turn, twice (its two turns).
func agentTurns(ctx context.Context, e *env, st events.Store, stream string, g *graph.Graph, n int) ([]time.Duration, error) {
	var turns []time.Duration
	for i := range n {
		run := events.NewRunID()
		ev, err := startedEvent(run, g, []byte(`{"topic":"weft"}`))
		if err != nil {
			return nil, err
		}
		if _, err := st.Append(ctx, run, 0, ev); err != nil {
			return nil, err
		}
		if _, err := waitRuns(ctx, e.js, stream, i+1, time.Minute); err != nil {
			return nil, err
		}
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			return nil, err
		}
		var from, to time.Time
		steps := 0
		for _, ev := range evs {
			switch ev.Type {
			case events.NodeInvoking:
				from = ev.Stored
			case events.NodeInvoked:
				to = ev.Stored
			case events.NodeStep:
				steps++
			}
		}
		if from.IsZero() || to.IsZero() || steps != 3 {
			return nil, fmt.Errorf("run %s: the agent node did not complete with 3 steps (%d)", run, steps)
		}
		turn := to.Sub(from) / 2
		turns = append(turns, turn, turn)
	}
	return turns, nil
}

// modelFloor times n plain chat completion calls to the fake model.
func modelFloor(ctx context.Context, url string, n int) ([]time.Duration, error) {
	body := []byte(`{"model":"any","messages":[{"role":"user","content":"Research weft."}]}`)
	var out []time.Duration
	for range n {
		began := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("the fake model answered %s", resp.Status)
		}
		out = append(out, time.Since(began))
	}
	return out, nil
}
