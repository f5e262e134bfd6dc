package builtin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeModel is a model API on 127.0.0.1 that replays a scripted
// conversation: OpenAI chat completions (POST /v1/chat/completions) or
// Anthropic messages (POST /v1/messages), each as JSON or, when the
// request asks to stream, as server-sent events in the provider's format.
// Request n gets turn n of the script (the last turn again past its end),
// so that a test counts the model calls a loop made.
type fakeModel struct {
	anthropic bool
	script    []fakeTurn
	// byTurn picks the answer by the conversation, not by the request
	// count: turn n answers a request that holds n assistant messages,
	// so that a loop resumed after a crash gets the answer it would have.
	byTurn bool

	mu      sync.Mutex
	reqs    []map[string]any
	headers []http.Header
	// block, when set, is waited on before answering request n (0-based)
	// for which blockAt returns true.
	blockAt func(n int) bool
	block   chan struct{}
}

// fakeTurn is one scripted answer.
type fakeTurn struct {
	text  string
	calls []fakeCall
	// status and body make an error answer instead; retryAfter is sent
	// with it.
	status     int
	body       string
	retryAfter string
	// cut ends a streamed answer before it finishes.
	cut bool
	// tokens is the usage the answer reports (default 10 in, 5 out).
	in, out int
}

type fakeCall struct{ id, name, args string }

func newFakeModel(t testing.TB, anthropic bool, script ...fakeTurn) (*fakeModel, string) {
	t.Helper()
	f := &fakeModel{anthropic: anthropic, script: script}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if anthropic {
		return f, srv.URL
	}
	return f, srv.URL + "/v1"
}

func (f *fakeModel) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func (f *fakeModel) request(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[i]
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := "/v1/chat/completions"
	if f.anthropic {
		want = "/v1/messages"
	}
	if r.URL.Path != want || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, req)
	f.headers = append(f.headers, r.Header.Clone())
	i := n
	if f.byTurn {
		i = 0
		msgs, _ := req["messages"].([]any)
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == "assistant" {
				i++
			}
		}
	}
	turn := f.script[min(i, len(f.script)-1)]
	blockAt, block := f.blockAt, f.block
	f.mu.Unlock()
	if blockAt != nil && blockAt(n) {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	if turn.status != 0 {
		if turn.retryAfter != "" {
			w.Header().Set("Retry-After", turn.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(turn.status)
		_, _ = io.WriteString(w, turn.body)
		return
	}
	if turn.in == 0 && turn.out == 0 {
		turn.in, turn.out = 10, 5
	}
	stream, _ := req["stream"].(bool)
	switch {
	case f.anthropic && stream:
		f.anthropicStream(w, turn)
	case f.anthropic:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(anthropicMessage(turn))
	case stream:
		f.openAIStream(w, turn)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(openAICompletion(turn))
	}
}

func openAICompletion(t fakeTurn) map[string]any {
	msg := map[string]any{"role": "assistant", "content": t.text}
	finish := "stop"
	if len(t.calls) > 0 {
		var calls []any
		for _, c := range t.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	return map[string]any{
		"id": "c1", "object": "chat.completion", "model": "fake-1",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": t.in, "completion_tokens": t.out, "total_tokens": t.in + t.out},
	}
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

func (f *fakeModel) openAIStream(w http.ResponseWriter, t fakeTurn) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "c1", "object": "chat.completion.chunk", "model": "fake-1",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	for _, word := range strings.SplitAfter(t.text, " ") {
		if word != "" {
			sse(w, "", chunk(map[string]any{"content": word}, nil))
		}
	}
	if t.cut {
		return
	}
	for i, c := range t.calls {
		sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": ""}}}}, nil))
		half := len(c.args) / 2
		for _, part := range []string{c.args[:half], c.args[half:]} {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil))
		}
	}
	finish := "stop"
	if len(t.calls) > 0 {
		finish = "tool_calls"
	}
	sse(w, "", chunk(map[string]any{}, finish))
	sse(w, "", map[string]any{"id": "c1", "object": "chat.completion.chunk", "model": "fake-1", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": t.in, "completion_tokens": t.out, "total_tokens": t.in + t.out}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func anthropicMessage(t fakeTurn) map[string]any {
	var content []any
	if t.text != "" {
		content = append(content, map[string]any{"type": "text", "text": t.text})
	}
	stop := "end_turn"
	for _, c := range t.calls {
		var input any = map[string]any{}
		_ = json.Unmarshal([]byte(c.args), &input)
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": input})
		stop = "tool_use"
	}
	return map[string]any{
		"id": "m1", "type": "message", "role": "assistant", "model": "fake-1", "content": content,
		"stop_reason": stop, "usage": map[string]any{"input_tokens": t.in, "output_tokens": t.out},
	}
}

func (f *fakeModel) anthropicStream(w http.ResponseWriter, t fakeTurn) {
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "m1", "type": "message", "role": "assistant", "model": "fake-1", "content": []any{},
		"stop_reason": nil, "usage": map[string]any{"input_tokens": t.in, "output_tokens": 0}}})
	idx := 0
	if t.text != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, word := range strings.SplitAfter(t.text, " ") {
			if word != "" {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": word}})
			}
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if t.cut {
		return
	}
	stop := "end_turn"
	for _, c := range t.calls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.args}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": t.out}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
