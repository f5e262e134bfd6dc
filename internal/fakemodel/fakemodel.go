// Package fakemodel is a scripted fake of an OpenAI-compatible chat
// completions API (POST /v1/chat/completions, JSON or streamed as
// server-sent events), for 'weft demo' and for the tests that run Weft's
// programs as processes. It is a fake, and says so: every answer's model
// is "weft-fake-model" and every final answer starts with "[fake model]".
// It is never a real model's stand-in unless asked for by name (see
// internal/cli's demo).
//
// Its script is the same for any graph: at turn n of a conversation (the
// request holds n assistant messages), while n is less than the number of
// tools the request offers, it calls tool n, with arguments made from the
// tool's JSON Schema (each string property the last user message, each
// number 1, each boolean true); then it answers with the results it was
// given. So an agent with two tools makes three model calls: tool one,
// tool two, the answer. The answer depends on the conversation only, so a
// call made again (a loop resumed after a crash) gets the answer the first
// one got.
package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Model is the model name of every answer.
const Model = "weft-fake-model"

// Prefix starts every final answer.
const Prefix = "[fake model]"

// Server is the fake API, an http.Handler.
type Server struct {
	// Before, when set, is called with each request's number (0-based,
	// in arrival order) and its turn, before the answer is written; an
	// error drops the request unanswered. Tests hold a request here.
	Before func(ctx context.Context, n, turn int) error
	// Delay is waited before each answer (a model's latency), and
	// WordDelay between the words of a streamed answer (so that a watcher
	// sees the text come).
	Delay, WordDelay time.Duration

	mu    sync.Mutex
	turns []int // each request's turn, in arrival order
}

// Requests returns each request's turn, in arrival order.
func (s *Server) Requests() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.turns...)
}

// Start serves s on 127.0.0.1 (a free port) until ctx ends, and returns
// the base URL an OpenAI-compatible client takes (ending in /v1).
func Start(ctx context.Context, s *Server) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fake model: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + ln.Addr().String() + "/v1", nil
}

// request is the part of a chat completion request the script reads.
type request struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// answer is one scripted answer: text, or one tool call.
type answer struct {
	text       string
	call, args string
	turn       int
}

// ServeHTTP answers a chat completion request by the script.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"the fake model serves POST /v1/chat/completions only"}}`, http.StatusNotFound)
		return
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"the fake model: the request is not JSON"}}`, http.StatusBadRequest)
		return
	}
	a := script(&req)
	s.mu.Lock()
	n := len(s.turns)
	s.turns = append(s.turns, a.turn)
	before, delay, wordDelay := s.Before, s.Delay, s.WordDelay
	s.mu.Unlock()
	if before != nil {
		if err := before(r.Context(), n, a.turn); err != nil {
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if req.Stream {
		writeStream(r.Context(), w, a, wordDelay)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(completion(a))
}

// script picks the answer to a request.
func script(req *request) answer {
	turn, user := 0, ""
	var results []string
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			turn++
		case "user":
			user = text(m.Content)
		case "tool":
			results = append(results, text(m.Content))
		}
	}
	if turn < len(req.Tools) {
		f := req.Tools[turn].Function
		return answer{call: f.Name, args: arguments(f.Parameters, user), turn: turn}
	}
	out := Prefix + " " + fmt.Sprintf("I was asked %q.", clip(user, 200))
	if len(results) > 0 {
		out += " The tools said: " + clip(strings.Join(results, "; "), 1000)
	}
	return answer{text: out, turn: turn}
}

// text is a message's content: a string, or the text of its parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// arguments fills a tool's parameters schema: every string property
// gets the user's message, every number 1, every boolean true.
func arguments(schema json.RawMessage, user string) string {
	var sch struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &sch)
	args := map[string]any{}
	for name, p := range sch.Properties {
		switch p.Type {
		case "string":
			args[name] = clip(user, 200)
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = true
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

func message(a answer) (msg map[string]any, finish string) {
	msg = map[string]any{"role": "assistant", "content": a.text}
	if a.call == "" {
		return msg, "stop"
	}
	msg["tool_calls"] = []any{map[string]any{"id": callID(a), "type": "function",
		"function": map[string]any{"name": a.call, "arguments": a.args}}}
	return msg, "tool_calls"
}

func callID(a answer) string { return fmt.Sprintf("fake_call_%d", a.turn) }

func usage() map[string]any {
	return map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
}

func completion(a answer) map[string]any {
	msg, finish := message(a)
	return map[string]any{
		"id": "fake", "object": "chat.completion", "model": Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   usage(),
	}
}

// writeStream writes the answer as OpenAI's server-sent events: the text
// word by word (wordDelay apart), the tool call in two halves of its
// arguments, the finish reason, the usage.
func writeStream(ctx context.Context, w http.ResponseWriter, a answer, wordDelay time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "fake", "object": "chat.completion.chunk", "model": Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	for i, word := range strings.SplitAfter(a.text, " ") {
		if word == "" {
			continue
		}
		if i > 0 && wordDelay > 0 {
			select {
			case <-time.After(wordDelay):
			case <-ctx.Done():
				return
			}
		}
		send(chunk(map[string]any{"content": word}, nil))
	}
	_, finish := message(a)
	if a.call != "" {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID(a), "type": "function",
			"function": map[string]any{"name": a.call, "arguments": ""}}}}, nil))
		half := len(a.args) / 2
		for _, part := range []string{a.args[:half], a.args[half:]} {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil))
		}
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": "fake", "object": "chat.completion.chunk", "model": Model, "choices": []any{}, "usage": usage()})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
