package ui_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/fakemodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// agentYAML is an agent with two tools against the fake model (package
// fakemodel: it calls search, then note, then answers, streamed).
const agentYAML = `
name: agent
nodes:
  - id: research
    type: agent
    config:
      endpoint: fake
      model: any
      system: You research.
      prompt: "Research {{.state.topic}}."
      stream: true
      tools:
        - name: search
          type: transform
          parameters: {type: object, properties: {query: {type: string}}}
          config: {output: "{'found': 'a workflow engine'}"}
        - name: note
          type: echo
          parameters: {type: object, properties: {text: {type: string}}}
edges:
  - {from: START, to: research}
  - {from: research, to: END}
`

// newAgentEnv is newEnv with the fake model as the worker's llm endpoint
// "fake".
func newAgentEnv(t *testing.T, model *fakemodel.Server) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	url, err := fakemodel.Start(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.Server(t)
	nc, _ := testkit.Connect(t, srv)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	eng, err := weft.Start(sctx, weft.WithNATS(nc), weft.WithLogger(log), weft.WithName("ui-test-worker"),
		weft.WithBuiltins(builtin.WithLLMEndpoint("fake", builtin.LLMEndpoint{URL: url})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	h, err := ui.New(ui.Config{Store: eng.Store(), Client: eng.Client(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &env{t: t, eng: eng, cl: eng.Client(), url: hs.URL}
}

// conversation is GET /api/runs/{id}/conversation's answer.
type conversation struct {
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	Key       string `json:"key"`
	Live      bool   `json:"live"`
	Turns     int    `json:"turns"`
	Steps     []struct {
		Step     int    `json:"step"`
		Kind     string `json:"kind"`
		Tool     string `json:"tool"`
		Attempt  int    `json:"attempt"`
		Position int    `json:"position"`
	} `json:"steps"`
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"toolCallId"`
		Name       string `json:"name"`
		Step       int    `json:"step"`
		ToolCalls  []struct {
			ID, Name, Arguments string
		} `json:"toolCalls"`
	} `json:"messages"`
}

// summary is a conversation in one line per message: role, step, and the
// tool called or answered.
func (c conversation) summary() string {
	var out []string
	for _, m := range c.Messages {
		s := m.Role + "@" + string(rune('0'+m.Step))
		for _, tc := range m.ToolCalls {
			s += " call " + tc.Name
		}
		if m.Name != "" {
			s += " result " + m.Name
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// TestUIAgentConversation: an agent node's conversation, read from its
// step events while the node runs (its last model call held at the fake
// model) and once it has finished: the messages in order, each with the
// step that added it, the tool calls and their results; and the live
// tokens of the model call that streams, on /api/live/runs/{id}/tokens,
// making up the final answer the last step records.
func TestUIAgentConversation(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	model := &fakemodel.Server{Before: func(ctx context.Context, _, turn int) error {
		if turn != 2 {
			return nil
		}
		once.Do(func() { close(held) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	e := newAgentEnv(t, model)
	id := e.start(agentYAML, map[string]any{"topic": "weft"})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's last model call never came")
	}

	var c conversation
	r := e.get("/api/runs/" + id + "/conversation?node=research")
	if r.status != http.StatusOK {
		t.Fatalf("conversation: %d %s", r.status, r.body)
	}
	r.decode(t, &c)
	const four = "system@0, user@0, assistant@1 call search, tool@2 result search, assistant@3 call note, tool@4 result note"
	if !c.Live || c.Key != "research/1" || c.Iteration != 1 || len(c.Steps) != 4 || c.summary() != four {
		t.Errorf("while running: live %v, key %s, %d steps, messages %s; want live, research/1, 4 steps, %s", c.Live, c.Key, len(c.Steps), c.summary(), four)
	}
	if len(c.Messages) == 6 && (c.Messages[3].Content != `{"found":"a workflow engine"}` || c.Messages[3].ToolCallID != c.Messages[2].ToolCalls[0].ID) {
		t.Errorf("the search result: %+v, answering %+v", c.Messages[3], c.Messages[2].ToolCalls)
	}

	// The last model call streams once released.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tokens := e.open(ctx, "/api/live/runs/"+id+"/tokens")
	if ev, ok := tokens.next(); !ok || ev.name != "ready" {
		t.Fatalf("first event %+v, want ready", ev)
	}
	close(release)
	e.wait(id)
	r = e.get("/api/runs/" + id + "/conversation?node=research")
	c = conversation{}
	r.decode(t, &c)
	if c.Live || len(c.Steps) != 5 || c.Steps[4].Kind != "model" || c.Turns != 3 || len(c.Messages) != 7 {
		t.Fatalf("after the end: live %v, steps %+v, turns %d, messages %s", c.Live, c.Steps, c.Turns, c.summary())
	}
	final := c.Messages[6]
	if final.Role != "assistant" || final.Step != 5 || !strings.HasPrefix(final.Content, fakemodel.Prefix) {
		t.Errorf("final message %+v", final)
	}
	var streamed string
	for streamed != final.Content {
		ev, ok := tokens.next()
		if !ok {
			t.Fatalf("the token stream ended with %q streamed, want %q", streamed, final.Content)
		}
		if ev.name != "token" {
			continue
		}
		var tk struct {
			Node, Text string
			Step       int
		}
		if err := json.Unmarshal([]byte(ev.data), &tk); err != nil || tk.Node != "research/1" || tk.Step != 5 {
			t.Fatalf("token %s", ev.data)
		}
		streamed += tk.Text
	}

	wantError(t, "no node", e.get("/api/runs/"+id+"/conversation"), http.StatusBadRequest, "node")
	wantError(t, "a node that never ran", e.get("/api/runs/"+id+"/conversation?node=nope"), http.StatusNotFound, "node")
	wantError(t, "a bad iteration", e.get("/api/runs/"+id+"/conversation?node=research&iteration=x"), http.StatusBadRequest, "iteration")
}
