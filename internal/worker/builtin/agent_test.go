package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

// memJournal keeps an agent's steps in memory, as the run's log would.
type memJournal struct {
	mu    sync.Mutex
	steps []json.RawMessage
	// crashAt, when > 0, makes the crashAt-th Record fail as a worker
	// that died before the append would: the step is not recorded.
	crashAt int
	records int
	// failWith, when set, is every Record's error.
	failWith error
}

var errKilled = errors.New("worker killed")

func (j *memJournal) Last(context.Context, *worker.Input) (*builtin.AgentStep, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.steps) == 0 {
		return nil, nil
	}
	var s builtin.AgentStep
	err := json.Unmarshal(j.steps[len(j.steps)-1], &s)
	return &s, err
}

func (j *memJournal) Record(_ context.Context, _ *worker.Input, s *builtin.AgentStep) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.records++
	if j.records == j.crashAt {
		return errKilled
	}
	if j.failWith != nil {
		return j.failWith
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	j.steps = append(j.steps, b)
	return nil
}

// countingTool is a tool node that outputs its arguments and counts its
// runs by idempotency key.
type countingTool struct {
	mu   sync.Mutex
	runs map[string]int
	fail error
	// hangAt, when set, makes run n (0-based, over all keys) wait for
	// its context to end: a tool under way when its worker dies.
	hangAt func(n int) bool
	count  int
}

func (c *countingTool) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	c.mu.Lock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[in.IdempotencyKey]++
	n := c.count
	c.count++
	hang := c.hangAt != nil && c.hangAt(n)
	fail := c.fail
	c.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail != nil {
		return nil, fail
	}
	return &worker.Result{Output: map[string]any{"got": in.State}}, nil
}

func (c *countingTool) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.runs {
		n += v
	}
	return n
}

func newAgent(url string, anthropic bool, tool worker.Node, j builtin.Journal) *builtin.Agent {
	ep := builtin.LLMEndpoint{URL: url, Key: "sk-agent-secret"}
	if anthropic {
		ep.Provider = builtin.ProviderAnthropic
	}
	return &builtin.Agent{
		Endpoints: map[string]builtin.LLMEndpoint{"m": ep},
		Tools: func(typ string) (worker.Node, bool) {
			if typ == "lookup" {
				return tool, true
			}
			return nil, false
		},
		Journal: j,
	}
}

var lookupTool = map[string]any{
	"name": "lookup", "description": "looks a word up", "type": "lookup",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}, "additionalProperties": false},
}

func agentConfig(extra map[string]any) map[string]any {
	cfg := map[string]any{"model": "fake", "prompt": "Research {{.state.topic}}.", "system": "You research.", "tools": []any{lookupTool}}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

func agentInput(cfg map[string]any) *worker.Input {
	in := input("agent", cfg)
	in.State["topic"] = "weft"
	return in
}

// TestAgentLoop: model call, two tool calls at once, their results, model
// call, final answer, for both providers, as JSON and as streams: a tool's result
// goes back to the model under its call's id, each model call and each
// tool run has its step's idempotency key, and the streamed text reaches
// the token sink.
func TestAgentLoop(t *testing.T) {
	for _, tc := range []struct {
		name              string
		anthropic, stream bool
	}{{"openai", false, false}, {"openai stream", false, true}, {"anthropic", true, false}, {"anthropic stream", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			fake, url := newFakeModel(t, tc.anthropic,
				fakeTurn{text: "Let me look.", calls: []fakeCall{{"call_1", "lookup", `{"q":"weft"}`}, {"call_2", "lookup", `{"q":"nats"}`}}},
				fakeTurn{text: "Weft is a workflow engine."},
			)
			tool := &countingTool{}
			j := &memJournal{}
			a := newAgent(url, tc.anthropic, tool, j)
			var streamed strings.Builder
			a.Tokens = func(_ context.Context, _ *worker.Input, _ int, s string) { streamed.WriteString(s) }
			res, err := a.Execute(context.Background(), agentInput(agentConfig(map[string]any{"stream": tc.stream})))
			if err != nil {
				t.Fatal(err)
			}
			out := res.Output.(map[string]any)
			if out["content"] != "Weft is a workflow engine." || out["turns"] != 2 || out["steps"] != 4 {
				t.Errorf("output = %v", out)
			}
			if u := out["usage"].(builtin.Usage); u.TotalTokens != 30 {
				t.Errorf("usage = %+v, want 30 tokens", u)
			}
			if n := fake.requests(); n != 2 {
				t.Fatalf("%d model calls, want 2", n)
			}
			second, _ := json.Marshal(fake.request(1)["messages"])
			if !strings.Contains(string(second), "call_2") || !strings.Contains(string(second), `{\"got\":{\"q\":\"weft\"}}`) || !strings.Contains(string(second), `{\"got\":{\"q\":\"nats\"}}`) {
				t.Errorf("the second call does not give the tool's result back: %s", second)
			}
			if msgs, _ := fake.request(1)["messages"].([]any); tc.anthropic && len(msgs) != 3 {
				t.Errorf("anthropic: %d messages, want 3 (the two tool results in one user message)", len(msgs))
			}
			if k := fake.headers[0].Get("Idempotency-Key"); k != "key-123/step/1" {
				t.Errorf("first call's key = %q", k)
			}
			if tool.runs["key-123/step/2"] != 1 || tool.runs["key-123/step/3"] != 1 || tool.total() != 2 {
				t.Errorf("tool runs = %v, want one under key-123/step/2 and one under /step/3", tool.runs)
			}
			if len(j.steps) != 4 {
				t.Errorf("%d steps recorded, want 4 (model, tool, tool, model)", len(j.steps))
			}
			if tc.stream && streamed.String() != "Let me look.Weft is a workflow engine." {
				t.Errorf("streamed %q", streamed.String())
			}
			if !tc.stream && streamed.Len() != 0 {
				t.Errorf("streamed %q without stream", streamed.String())
			}
		})
	}
}

// TestAgentBadToolCalls: a tool the model invents, arguments that are not
// JSON, arguments that fail the tool's schema and a tool that fails are
// each given back to the model as an error result that says what is
// wrong, and the loop goes on.
func TestAgentBadToolCalls(t *testing.T) {
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{
			{"c1", "search_web", `{"q":"x"}`},
			{"c2", "lookup", `{"q":`},
			{"c3", "lookup", `{"q":5}`},
			{"c4", "lookup", `{"q":"ok"}`},
		}},
		fakeTurn{text: "Sorry."},
	)
	tool := &countingTool{}
	res, err := newAgent(url, false, tool, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(nil)))
	if err != nil {
		t.Fatal(err)
	}
	msgs := res.Output.(map[string]any)["messages"].([]builtin.Message)
	results := map[string]builtin.Message{}
	for _, m := range msgs {
		if m.Role == "tool" {
			results[m.ToolCallID] = m
		}
	}
	for id, want := range map[string]string{
		"c1": `there is no tool "search_web"; the tools are: lookup`,
		"c2": `the arguments of tool "lookup" are not valid JSON`,
		"c3": `the arguments of tool "lookup" do not match its parameters`,
	} {
		if r := results[id]; !r.IsError || !strings.Contains(r.Content, want) {
			t.Errorf("%s: result %+v, want an error saying %q", id, r, want)
		}
	}
	if r := results["c4"]; r.IsError || tool.total() != 1 {
		t.Errorf("c4: %+v, %d tool runs", r, tool.total())
	}
	second, _ := json.Marshal(fake.request(1)["messages"])
	if !strings.Contains(string(second), "search_web") || strings.Count(string(second), `"role":"tool"`) != 4 {
		t.Errorf("the errors are not given back to the model: %s", second)
	}

	// A tool that fails: its failure is the call's result.
	fake2, url2 := newFakeModel(t, false, fakeTurn{calls: []fakeCall{{"c1", "lookup", `{"q":"x"}`}}}, fakeTurn{text: "ok"})
	failing := &countingTool{fail: worker.NonRetryable("Boom", "the index is down")}
	if _, err := newAgent(url2, false, failing, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(nil))); err != nil {
		t.Fatal(err)
	}
	second, _ = json.Marshal(fake2.request(1)["messages"])
	if !strings.Contains(string(second), `tool \"lookup\" failed: Boom: the index is down`) {
		t.Errorf("the tool's failure is not given back: %s", second)
	}
}

// TestAgentBudgets: a model that never stops ends at maxTurns, a token
// budget at maxTokens, each a located, non-retryable failure; an answer
// over maxMessageBytes fails the node.
func TestAgentBudgets(t *testing.T) {
	forever := fakeTurn{calls: []fakeCall{{"c", "lookup", `{"q":"again"}`}}}
	tests := []struct {
		name     string
		turn     fakeTurn
		cfg      map[string]any
		wantType string
		wantMsg  string
		wantReqs int
	}{
		{name: "turns", turn: forever, cfg: map[string]any{"maxTurns": 3}, wantType: builtin.FailureAgentTurns, wantMsg: `agent node "n1": config: maxTurns: 3 model calls made`, wantReqs: 3},
		{name: "default turns", turn: forever, wantType: builtin.FailureAgentTurns, wantMsg: "maxTurns: 8", wantReqs: 8},
		{name: "tokens", turn: forever, cfg: map[string]any{"maxTokens": 40}, wantType: builtin.FailureAgentTokens, wantMsg: `agent node "n1": config: maxTokens: 45 tokens spent of 40 before turn 4`, wantReqs: 3},
		{name: "final answer over the token budget", turn: fakeTurn{text: "done", in: 30, out: 30}, cfg: map[string]any{"maxTokens": 40}, wantType: builtin.FailureAgentTokens, wantMsg: "60 tokens spent of 40 by turn 1", wantReqs: 1},
		{name: "oversized", turn: fakeTurn{text: strings.Repeat("x", 100)}, cfg: map[string]any{"maxMessageBytes": 50}, wantType: builtin.FailureAgentOversized, wantMsg: "turn 1: the model's answer is 100 bytes, more than maxMessageBytes 50", wantReqs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, url := newFakeModel(t, false, tt.turn)
			_, err := newAgent(url, false, &countingTool{}, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(tt.cfg)))
			we := failure(t, err, tt.wantType, false)
			if !strings.Contains(we.Message, tt.wantMsg) {
				t.Errorf("failure %q does not say %q", we.Message, tt.wantMsg)
			}
			if n := fake.requests(); n != tt.wantReqs {
				t.Errorf("%d model calls, want %d", n, tt.wantReqs)
			}
		})
	}
}

// TestAgentConfigErrors: what is wrong with an agent's configuration is
// reported before any model call, each problem named by its field.
func TestAgentConfigErrors(t *testing.T) {
	fake, url := newFakeModel(t, false, fakeTurn{text: "x"})
	tests := []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{name: "unknown endpoint", cfg: agentConfig(map[string]any{"endpoint": "gpt-elsewhere"}), want: []string{`endpoint: "gpt-elsewhere" is not configured on this worker (it has: m)`}},
		{name: "no model", cfg: agentConfig(map[string]any{"model": ""}), want: []string{"model: required"}},
		{name: "tools", cfg: agentConfig(map[string]any{"tools": []any{
			map[string]any{"name": "a", "type": "nosuch"},
			map[string]any{"name": "b", "type": "lookup", "parameters": map[string]any{"type": 7}},
			map[string]any{"name": "c", "type": "agent"},
			map[string]any{"type": "lookup"},
		}}), want: []string{`tools[0] (a).type: "nosuch" is not a node type this worker runs`, "tools[1] (b).parameters:", "tools[2] (c).type: an agent cannot be a tool", "tools[3].name: required"}},
		{name: "budgets", cfg: agentConfig(map[string]any{"maxTurns": -1, "maxTokens": -5}), want: []string{"maxTurns: want at least 1", "maxTokens: want 0"}},
		{name: "unknown field", cfg: agentConfig(map[string]any{"maxTurn": 3}), want: []string{`unknown field "maxTurn"`}},
		{name: "graph gives a key", cfg: agentConfig(map[string]any{"apiKey": "sk"}), want: []string{"apiKey: a graph does not hold the API key"}},
		{name: "guardrails", cfg: agentConfig(map[string]any{"guardrails": map[string]any{"input": []any{
			map[string]any{"cel": "output.size() >"},
			map[string]any{"deny": []any{"("}},
			map[string]any{"cel": "true", "maxLength": 3},
			map[string]any{"maxLength": 3, "action": "shout"},
		}}}), want: []string{"guardrails.input[0].cel: CEL", "guardrails.input[1].deny[0]:", "guardrails.input[2]: want exactly one of cel, deny, maxLength", `guardrails.input[3].action: "shout" is not one of`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newAgent(url, false, &countingTool{}, &memJournal{}).Execute(context.Background(), agentInput(tt.cfg))
			we := failure(t, err, events.FailureValidation, false)
			for _, w := range tt.want {
				if !strings.Contains(we.Message, w) {
					t.Errorf("failure %q does not say %q", we.Message, w)
				}
			}
		})
	}
	if n := fake.requests(); n != 0 {
		t.Errorf("%d model calls for bad configurations", n)
	}
}

// TestAgentStreamCut: a stream cut before the model finished is a
// retryable failure, and nothing of it is recorded.
func TestAgentStreamCut(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		t.Run(fmt.Sprint("anthropic=", anthropic), func(t *testing.T) {
			_, url := newFakeModel(t, anthropic, fakeTurn{text: "half an ans", cut: true})
			j := &memJournal{}
			a := newAgent(url, anthropic, &countingTool{}, j)
			a.Tokens = func(context.Context, *worker.Input, int, string) {}
			_, err := a.Execute(context.Background(), agentInput(agentConfig(map[string]any{"stream": true})))
			we := failure(t, err, builtin.FailureLLMResponse, true)
			if !strings.Contains(we.Message, "the stream ended before the model finished") {
				t.Errorf("failure = %s", we.Message)
			}
			if len(j.steps) != 0 {
				t.Errorf("%d steps recorded", len(j.steps))
			}
		})
	}
}

// TestAgentResumesAtEveryStep kills the agent at every step of a scripted
// conversation (three model calls, three tool runs, two of them asked for
// at once) and runs it again on the same journal: no model call whose
// answer was recorded is made again, no tool whose result was recorded
// runs again, and the answer is the same. The step being made when the
// worker died (its work done, its record not) is made once more.
func TestAgentResumesAtEveryStep(t *testing.T) {
	script := []fakeTurn{
		{calls: []fakeCall{{"a", "lookup", `{"q":"one"}`}, {"b", "lookup", `{"q":"two"}`}}},
		{calls: []fakeCall{{"c", "lookup", `{"q":"three"}`}}},
		{text: "All found."},
	}
	kinds := []string{"model", "tool", "tool", "model", "tool", "model"}
	for crash := 1; crash <= len(kinds); crash++ {
		t.Run(fmt.Sprintf("killed at step %d (%s)", crash, kinds[crash-1]), func(t *testing.T) {
			fake, url := newFakeModel(t, false, script...)
			fake.byTurn = true
			tool := &countingTool{}
			j := &memJournal{crashAt: crash}
			in := agentInput(agentConfig(nil))
			if _, err := newAgent(url, false, tool, j).Execute(context.Background(), in); !errors.Is(err, errKilled) {
				t.Fatalf("first run: %v, want the kill", err)
			}
			before := fake.requests()
			res, err := newAgent(url, false, tool, j).Execute(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if c := res.Output.(map[string]any)["content"]; c != "All found." {
				t.Errorf("answer = %v", c)
			}
			wantModel, wantTool := 3, 3
			if kinds[crash-1] == "model" {
				wantModel++
			} else {
				wantTool++
			}
			if n := fake.requests(); n != wantModel {
				t.Errorf("%d model calls in all (%d before the kill), want %d", n, before, wantModel)
			}
			if n := tool.total(); n != wantTool {
				t.Errorf("%d tool runs in all, want %d: %v", n, wantTool, tool.runs)
			}
			for key, n := range tool.runs {
				if n > 1 && kinds[crash-1] != "tool" {
					t.Errorf("tool run %s %d times", key, n)
				}
			}
			if len(j.steps) != len(kinds) {
				t.Errorf("%d steps recorded, want %d", len(j.steps), len(kinds))
			}
		})
	}
}

// TestAgentGuardrails: checks on the prompt and the final answer block,
// redact or warn, and say which check on which side.
func TestAgentGuardrails(t *testing.T) {
	tests := []struct {
		name     string
		answer   string
		policy   map[string]any
		wantErr  string
		wantOut  string
		wantWarn string
		wantReqs int
	}{
		{name: "input blocked by CEL", answer: "x", policy: map[string]any{"input": []any{map[string]any{"name": "no-weft", "cel": `!output.contains("weft")`}}},
			wantErr: `agent node "n1": guardrails.input no-weft: the input CEL "!output.contains(\"weft\")" is false`},
		{name: "output blocked by deny-list", answer: "the password is hunter2", wantReqs: 1, policy: map[string]any{"output": []any{map[string]any{"deny": []any{`hunter\d`}}}},
			wantErr: `guardrails.output output[0]: the output matches deny pattern "hunter\\d"`},
		{name: "output redacted", answer: "the password is hunter2", wantReqs: 1, policy: map[string]any{"output": []any{map[string]any{"deny": []any{`hunter\d`}, "action": "redact"}}},
			wantOut: "the password is [redacted]", wantWarn: "redact: "},
		{name: "output too long, warned", answer: "a long answer", wantReqs: 1, policy: map[string]any{"output": []any{map[string]any{"name": "short", "maxLength": 5, "action": "warn"}}},
			wantOut: "a long answer", wantWarn: "guardrails.output short: the output 13 bytes, more than maxLength 5"},
		{name: "output passes CEL over state", answer: "about weft", wantReqs: 1, policy: map[string]any{"output": []any{map[string]any{"cel": `output.contains(state.topic) && local.stage == "output"`}}},
			wantOut: "about weft"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, url := newFakeModel(t, false, fakeTurn{text: tt.answer})
			res, err := newAgent(url, false, &countingTool{}, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(map[string]any{"guardrails": tt.policy})))
			if n := fake.requests(); n != tt.wantReqs {
				t.Errorf("%d model calls, want %d", n, tt.wantReqs)
			}
			if tt.wantErr != "" {
				we := failure(t, err, builtin.FailureGuardrail, false)
				if !strings.Contains(we.Message, tt.wantErr) {
					t.Errorf("failure %q does not say %q", we.Message, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out := res.Output.(map[string]any)
			if out["content"] != tt.wantOut {
				t.Errorf("content = %q, want %q", out["content"], tt.wantOut)
			}
			warns, _ := json.Marshal(out["guardrails"])
			if !strings.Contains(string(warns), tt.wantWarn) || (tt.wantWarn == "" && out["guardrails"] != nil) {
				t.Errorf("warnings = %s, want %q", warns, tt.wantWarn)
			}
		})
	}
}

// TestAgentKeyNeverRecorded: the endpoint's key is in no step and no
// failure, even when the provider echoes it.
func TestAgentKeyNeverRecorded(t *testing.T) {
	_, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"c", "lookup", `{"q":"x"}`}}},
		fakeTurn{status: 401, body: `{"error":{"message":"bad key Bearer sk-agent-secret"}}`},
	)
	j := &memJournal{}
	_, err := newAgent(url, false, &countingTool{}, j).Execute(context.Background(), agentInput(agentConfig(nil)))
	we := failure(t, err, builtin.FailureLLMStatus, false)
	b, _ := json.Marshal(we)
	all := we.Error() + string(b)
	for _, s := range j.steps {
		all += string(s)
	}
	if strings.Contains(all, "sk-agent-secret") || !strings.Contains(we.Message, "[redacted]") {
		t.Errorf("the key shows: %s", all)
	}
	if len(j.steps) != 2 {
		t.Errorf("%d steps, want 2 recorded before the failure", len(j.steps))
	}
}

// TestAgentRetryResumes: a 429 in the middle of the loop fails the
// attempt as retryable, with the provider's Retry-After in its details;
// the retry (the node run again, on the same journal) goes on from the
// recorded steps: the model call before the 429 is not made again.
func TestAgentRetryResumes(t *testing.T) {
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"a", "lookup", `{"q":"one"}`}}},
		fakeTurn{status: 429, retryAfter: "2", body: `{"error":{"message":"rate limited"}}`},
		fakeTurn{text: "done"},
	)
	tool := &countingTool{}
	j := &memJournal{}
	in := agentInput(agentConfig(nil))
	_, err := newAgent(url, false, tool, j).Execute(context.Background(), in)
	we := failure(t, err, builtin.FailureLLMStatus, true)
	if d, _ := we.Details.(map[string]any); d["retryAfter"] != "2" || d["status"] != 429 {
		t.Errorf("details = %v", we.Details)
	}
	in.Attempt = 2
	res, err := newAgent(url, false, tool, j).Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Output.(map[string]any)["content"]; c != "done" {
		t.Errorf("content = %v", c)
	}
	if n := fake.requests(); n != 3 {
		t.Errorf("%d model calls, want 3 (the first not again)", n)
	}
	if tool.total() != 1 {
		t.Errorf("tool runs = %v", tool.runs)
	}
}

// TestAgentBadCheckpoint: a last step that holds no conversation (not one
// this executor wrote) fails the node, located, instead of guessing.
func TestAgentBadCheckpoint(t *testing.T) {
	fake, url := newFakeModel(t, false, fakeTurn{text: "x"})
	j := &memJournal{steps: []json.RawMessage{json.RawMessage(`{"step": 3, "kind": "model"}`)}}
	_, err := newAgent(url, false, &countingTool{}, j).Execute(context.Background(), agentInput(agentConfig(nil)))
	we := failure(t, err, builtin.FailureAgentCheckpoint, false)
	if !strings.Contains(we.Message, `agent node "n1": its last recorded step (3, "model") holds no conversation`) || fake.requests() != 0 {
		t.Errorf("failure %q after %d model calls", we.Message, fake.requests())
	}
}

// TestAgentConversationTooLarge: a step that does not fit in an event
// fails the node, not retryable (a retry would pay for the same calls and
// fail the same way), and says what to lower.
func TestAgentConversationTooLarge(t *testing.T) {
	_, url := newFakeModel(t, false, fakeTurn{text: "x"})
	j := &memJournal{failWith: fmt.Errorf("appending: %w", events.ErrPayloadTooLarge)}
	_, err := newAgent(url, false, &countingTool{}, j).Execute(context.Background(), agentInput(agentConfig(nil)))
	we := failure(t, err, events.FailurePayloadTooLarge, false)
	if !strings.Contains(we.Message, `agent node "n1": step 1 (model): the conversation no longer fits in one event`) {
		t.Errorf("failure %q", we.Message)
	}
}

// TestAgentToolCallIDs: calls without ids, or with one id twice, each get
// their own result.
func TestAgentToolCallIDs(t *testing.T) {
	fake, url := newFakeModel(t, false,
		fakeTurn{calls: []fakeCall{{"", "lookup", `{"q":"a"}`}, {"", "lookup", `{"q":"b"}`}, {"x", "lookup", `{"q":"c"}`}, {"x", "lookup", `{"q":"d"}`}}},
		fakeTurn{text: "ok"},
	)
	tool := &countingTool{}
	if _, err := newAgent(url, false, tool, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(nil))); err != nil {
		t.Fatal(err)
	}
	if tool.total() != 4 {
		t.Errorf("tool runs = %v, want 4", tool.runs)
	}
	second, _ := json.Marshal(fake.request(1)["messages"])
	for _, id := range []string{"weft_call_1_1", "weft_call_1_2", `"x"`, "weft_call_1_4"} {
		if !strings.Contains(string(second), id) {
			t.Errorf("no call %s in %s", id, second)
		}
	}
}

// TestAgentOversizedToolResult: a tool result over maxMessageBytes is cut,
// and the model is told so.
func TestAgentOversizedToolResult(t *testing.T) {
	fake, url := newFakeModel(t, false, fakeTurn{calls: []fakeCall{{"a", "lookup", `{"q":"x"}`}}}, fakeTurn{text: "ok"})
	big := worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		return &worker.Result{Output: strings.Repeat("z", 1000)}, nil
	})
	if _, err := newAgent(url, false, big, &memJournal{}).Execute(context.Background(), agentInput(agentConfig(map[string]any{"maxMessageBytes": 100}))); err != nil {
		t.Fatal(err)
	}
	second, _ := json.Marshal(fake.request(1)["messages"])
	if !strings.Contains(string(second), "[truncated: the result is 1002 bytes, more than maxMessageBytes 100]") || strings.Contains(string(second), strings.Repeat("z", 101)) {
		t.Errorf("the oversized result is not cut: %s", second)
	}
}
