package builtin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

// TestTemplateBombs: prompt templates that would burn a core or the
// worker's memory fail the node, quickly, with a located non-retryable
// error; the executor serves the next node as before.
func TestTemplateBombs(t *testing.T) {
	fake := &fakeLLM{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	llm := &builtin.LLM{
		Endpoints: map[string]builtin.LLMEndpoint{"default": {URL: srv.URL + "/v1"}},
		Limits:    builtin.TemplateLimits{MaxOutput: 64 << 10, MaxIterations: 20_000},
	}
	list := make([]any, 1000)
	tests := []struct {
		name, prompt, wantType, wantMsg string
	}{
		{"range over a huge int", "{{range 1000000000000}}{{if false}}x{{end}}{{end}}", builtin.FailureTemplateLimit, "more than 20000 range iterations"},
		{"silent huge range", "{{range $i := 1000000000000}}{{end}}", builtin.FailureTemplateLimit, "range iterations"},
		{"nested ranges over state", "{{range .state.list}}{{range $.state.list}}{{range $.state.list}}{{end}}{{end}}{{end}}", builtin.FailureTemplateLimit, "range iterations"},
		{"range over a variable", "{{$n := 2000000000}}{{range $n}}{{end}}", builtin.FailureTemplateLimit, "range iterations"},
		{"huge output", "{{range 50000}}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{end}}", builtin.FailureTemplateLimit, "65536-byte limit"},
		{"printf width", `{{printf "%999999999d" 1}}`, events.FailureValidation, "widths and precisions are limited"},
		{"printf star", `{{printf "%*d" 999999999 1}}`, events.FailureValidation, "'*' widths"},
		{"recursion", `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, events.FailureValidation, "may not"},
		{"huge source", strings.Repeat("x", builtin.DefaultTemplateMaxSource+1), builtin.FailureTemplateLimit, "the limit is 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input("llm", map[string]any{"model": "m", "prompt": tt.prompt})
			in.State["list"] = list
			start := time.Now()
			_, err := llm.Execute(context.Background(), in)
			we := failure(t, err, tt.wantType, false)
			if !strings.Contains(we.Message, tt.wantMsg) || !strings.Contains(we.Message, `llm node "n1": `) || !strings.Contains(we.Message, "prompt") {
				t.Errorf("message %q does not say %q", we.Message, tt.wantMsg)
			}
			// Unbounded, any of these would run for hours.
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	fake.mu.Lock()
	n := len(fake.reqs)
	fake.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests sent for bombs", n)
	}
	// A template within its limits still runs, ranges included.
	in := input("llm", map[string]any{"model": "m", "prompt": `{{range $i, $x := .state.xs}}{{$i}}={{printf "%03d" $x}};{{end}}`})
	in.State["xs"] = []any{1, 2}
	if _, err := llm.Execute(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if msgs := fake.reqs[0]["messages"].([]any); msgs[0].(map[string]any)["content"] != "0=001;1=002;" {
		t.Errorf("prompt = %v", msgs)
	}
}

// TestTemplateHonoursContext: a template loop stops when the node's
// context ends.
func TestTemplateHonoursContext(t *testing.T) {
	llm := &builtin.LLM{
		Endpoints: map[string]builtin.LLMEndpoint{"default": {URL: "http://127.0.0.1:1"}},
		Limits:    builtin.TemplateLimits{MaxIterations: 1 << 40},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := llm.Execute(ctx, input("llm", map[string]any{"model": "m", "prompt": "{{range 1000000000000}}{{end}}"}))
	if err == nil || ctx.Err() == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
}
