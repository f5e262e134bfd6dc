package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

// fakeLLM is an OpenAI-compatible chat-completions server on 127.0.0.1.
type fakeLLM struct {
	mu      sync.Mutex
	reqs    []map[string]any
	headers []http.Header
	status  int
	body    string
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.headers = append(f.headers, r.Header.Clone())
	status, body := f.status, f.body
	f.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	_, _ = io.WriteString(w, `{"id":"c1","model":"tiny-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi Ada!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`)
}

func TestLLM(t *testing.T) {
	fake := &fakeLLM{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	secrets := map[string]string{"MY_KEY": "sk-test"}
	llm := &builtin.LLM{
		Endpoints: map[string]builtin.LLMEndpoint{"local": {URL: srv.URL + "/v1", KeySecret: "MY_KEY"}},
		Secrets:   func(k string) (string, bool) { v, ok := secrets[k]; return v, ok },
	}
	temp := 0.2
	cfg := builtin.LLMConfig{
		Endpoint: "local", Model: "tiny", Temperature: &temp, MaxTokens: 64,
		System: "You greet {{.invocation.tier}} users.", Prompt: "Greet {{.state.name}} ({{.local.item}}).",
	}
	in := input("llm", cfg)
	in.State["name"] = "Ada"
	in.Local = map[string]any{"item": 1}
	in.Invocation["tier"] = "premium"
	res, err := llm.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res.Output)
	if want := `{"content":"Hi Ada!","model":"tiny-1","usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`; string(out) != want {
		t.Errorf("output = %s, want %s", out, want)
	}
	req := fake.reqs[0]
	msgs, _ := json.Marshal(req["messages"])
	if want := `[{"content":"You greet premium users.","role":"system"},{"content":"Greet Ada (1).","role":"user"}]`; string(msgs) != want {
		t.Errorf("messages = %s, want %s", msgs, want)
	}
	if req["model"] != "tiny" || req["temperature"] != 0.2 || req["max_tokens"] != 64.0 {
		t.Errorf("request = %v", req)
	}
	h := fake.headers[0]
	if h.Get("Authorization") != "Bearer sk-test" || h.Get("Idempotency-Key") != "key-123" {
		t.Errorf("headers = %v", h)
	}
}

func TestLLMFailures(t *testing.T) {
	fake := &fakeLLM{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	llm := &builtin.LLM{
		Endpoints: map[string]builtin.LLMEndpoint{
			"default": {URL: srv.URL + "/v1"},
			"keyed":   {URL: srv.URL + "/v1", KeySecret: "NOPE"},
			"down":    {URL: "http://127.0.0.1:1/v1"},
		},
		Secrets: func(string) (string, bool) { return "", false },
	}
	tests := []struct {
		name      string
		status    int
		body      string
		cfg       builtin.LLMConfig
		wantType  string
		retryable bool
		wantMsg   string
	}{
		{name: "rate limited", status: 429, body: `{"error":{"message":"slow down"}}`, wantType: builtin.FailureLLMStatus, retryable: true, wantMsg: "slow down"},
		{name: "server error", status: 503, body: `overloaded`, wantType: builtin.FailureLLMStatus, retryable: true, wantMsg: "overloaded"},
		{name: "bad request", status: 400, body: `{"error":{"message":"unknown model"}}`, wantType: builtin.FailureLLMStatus, wantMsg: "unknown model"},
		{name: "unauthorized", status: 401, body: `{"error":{"message":"bad key"}}`, wantType: builtin.FailureLLMStatus, wantMsg: "bad key"},
		{name: "bad body", status: 200, body: `{"choices":[]}`, wantType: builtin.FailureLLMResponse, retryable: true},
		{name: "missing key", cfg: builtin.LLMConfig{Endpoint: "keyed"}, wantType: events.FailureValidation, wantMsg: "secret NOPE, is not configured"},
		{name: "unknown endpoint", cfg: builtin.LLMConfig{Endpoint: "elsewhere"}, wantType: events.FailureValidation, wantMsg: `"elsewhere" is not configured on this worker (it has: default, down, keyed)`},
		{name: "missing state", cfg: builtin.LLMConfig{Prompt: "{{.state.absent}}"}, wantType: events.FailureValidation, wantMsg: "absent"},
		{name: "bad template", cfg: builtin.LLMConfig{Prompt: "{{.state"}, wantType: events.FailureValidation},
		{name: "no model", cfg: builtin.LLMConfig{Model: "-"}, wantType: events.FailureValidation, wantMsg: "model"},
		{name: "unreachable", cfg: builtin.LLMConfig{Endpoint: "down"}, wantType: builtin.FailureHTTPNetwork, retryable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.mu.Lock()
			fake.status, fake.body = tt.status, tt.body
			if tt.status == 200 {
				fake.status = 200
			}
			fake.mu.Unlock()
			cfg := tt.cfg
			switch cfg.Model {
			case "":
				cfg.Model = "tiny"
			case "-":
				cfg.Model = ""
			}
			if cfg.Prompt == "" {
				cfg.Prompt = "hi"
			}
			_, err := llm.Execute(context.Background(), input("llm", cfg))
			we := failure(t, err, tt.wantType, tt.retryable)
			if !strings.Contains(we.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", we.Error(), tt.wantMsg)
			}
		})
	}
}

// TestLLMGraphCannotChooseURLOrKey: the fields that let a graph send a
// worker's secret anywhere are refused, with what to use instead, before
// any request.
func TestLLMGraphCannotChooseURLOrKey(t *testing.T) {
	fake := &fakeLLM{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"default": {URL: srv.URL + "/v1", Key: "sk-worker"}}}
	for _, cfg := range []map[string]any{
		{"model": "m", "prompt": "p", "baseURL": srv.URL + "/v1"},
		{"model": "m", "prompt": "p", "apiKeyEnv": "HOME"},
		{"model": "m", "prompt": "p", "BaseUrl": "http://evil.example"},
	} {
		_, err := llm.Execute(context.Background(), input("llm", cfg))
		we := failure(t, err, events.FailureValidation, false)
		if !strings.Contains(we.Message, `"endpoint": "NAME"`) {
			t.Errorf("%v: %s does not say what to use", cfg, we.Message)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.reqs) != 0 {
		t.Errorf("%d requests sent", len(fake.reqs))
	}
	if got := builtin.CheckLLMConfig([]byte(`{"baseURL": "x", "apiKeyEnv": "Y", "model": "m"}`)); len(got) != 2 || !strings.HasPrefix(got[0], "apiKeyEnv: ") || !strings.HasPrefix(got[1], "baseURL: ") {
		t.Errorf("CheckLLMConfig = %q", got)
	}
}

// TestLLMKeyNeverInError: the endpoint's key is scrubbed from what a
// provider echoes back.
func TestLLMKeyNeverInError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad key `+r.Header.Get("Authorization")+`"}}`)
	}))
	t.Cleanup(srv.Close)
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"p": {URL: srv.URL, Key: "sk-very-secret"}}}
	_, err := llm.Execute(context.Background(), input("llm", map[string]any{"model": "m", "prompt": "p"}))
	we := failure(t, err, builtin.FailureLLMStatus, false)
	b, _ := json.Marshal(we)
	if strings.Contains(we.Error()+string(b), "sk-very-secret") || !strings.Contains(we.Message, "[redacted]") {
		t.Errorf("failure shows the key: %s %s", we.Error(), b)
	}
}

// TestLLMAnthropic: an endpoint of provider anthropic is called through
// Anthropic's SDK: the messages API, the key as its bearer token, the system
// prompt apart, and the answer in llm's one output shape.
func TestLLMAnthropic(t *testing.T) {
	fake, url := newFakeModel(t, true, fakeTurn{text: "Bonjour Ada", in: 7, out: 2})
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"claude": {URL: url, Provider: builtin.ProviderAnthropic, Key: "sk-ant-test"}}}
	cfg := builtin.LLMConfig{Model: "claude-test", System: "Be brief.", Prompt: "Greet {{.state.name}}.", MaxTokens: 50}
	in := input("llm", cfg)
	in.State["name"] = "Ada"
	res, err := llm.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res.Output)
	if want := `{"content":"Bonjour Ada","model":"fake-1","usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`; string(out) != want {
		t.Errorf("output = %s, want %s", out, want)
	}
	req := fake.request(0)
	msgs, _ := json.Marshal(req["messages"])
	sys, _ := json.Marshal(req["system"])
	if want := `[{"content":[{"text":"Greet Ada.","type":"text"}],"role":"user"}]`; string(msgs) != want {
		t.Errorf("messages = %s, want %s", msgs, want)
	}
	if want := `[{"text":"Be brief.","type":"text"}]`; string(sys) != want {
		t.Errorf("system = %s, want %s", sys, want)
	}
	if req["model"] != "claude-test" || req["max_tokens"] != 50.0 {
		t.Errorf("request = %v", req)
	}
	h := fake.headers[0]
	if h.Get("Authorization") != "Bearer sk-ant-test" || h.Get("Idempotency-Key") != "key-123" {
		t.Errorf("headers = %v", h)
	}
}

// TestLLMAnthropicFailure: a 429 from the messages API is retryable and
// carries its Retry-After; the SDK does not retry it itself.
func TestLLMAnthropicFailure(t *testing.T) {
	// The worker's environment is not the endpoint's configuration.
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	fake, url := newFakeModel(t, true, fakeTurn{status: 429, retryAfter: "3", body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`})
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"claude": {URL: url, Provider: builtin.ProviderAnthropic}}}
	_, err := llm.Execute(context.Background(), input("llm", builtin.LLMConfig{Model: "m", Prompt: "p"}))
	we := failure(t, err, builtin.FailureLLMStatus, true)
	if !strings.Contains(we.Message, "slow down") || we.Details.(map[string]any)["retryAfter"] != "3" {
		t.Errorf("failure = %s %v", we.Message, we.Details)
	}
	if n := fake.requests(); n != 1 {
		t.Errorf("%d requests, want 1 (the coordinator retries, not the SDK)", n)
	}
	if h := fake.headers[0]; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("a key the endpoint does not have was sent: %v", h)
	}
}

// TestLLMIgnoresSDKEnvironment: OPENAI_* variables of the worker's
// process are not sent to an endpoint configured without them.
func TestLLMIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	fake, url := newFakeModel(t, false, fakeTurn{text: "ok"})
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"p": {URL: url}}}
	if _, err := llm.Execute(context.Background(), input("llm", builtin.LLMConfig{Model: "m", Prompt: "p"})); err != nil {
		t.Fatal(err)
	}
	if h := fake.headers[0]; h.Get("Authorization") != "" {
		t.Errorf("the environment's key was sent: %v", h)
	}
}

// TestLLMGuardrails: guardrails apply to llm nodes too: a prompt that
// fails a check is never sent; an answer is redacted.
func TestLLMGuardrails(t *testing.T) {
	fake, url := newFakeModel(t, false, fakeTurn{text: "call 555-1234"})
	llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"p": {URL: url}}}
	in := input("llm", map[string]any{"model": "m", "prompt": "{{.state.q}}", "guardrails": map[string]any{
		"input":  []any{map[string]any{"name": "short", "maxLength": 10}},
		"output": []any{map[string]any{"deny": []any{`\d{3}-\d{4}`}, "action": "redact"}},
	}})
	in.State["q"] = "a question far too long"
	_, err := llm.Execute(context.Background(), in)
	we := failure(t, err, builtin.FailureGuardrail, false)
	if !strings.Contains(we.Message, `llm node "n1": guardrails.input short: the input 23 bytes, more than maxLength 10`) || fake.requests() != 0 {
		t.Errorf("failure %q after %d requests", we.Message, fake.requests())
	}
	in.State["q"] = "phone?"
	res, err := llm.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Output.(map[string]any); out["content"] != "call [redacted]" || out["guardrails"] == nil {
		t.Errorf("output = %v", out)
	}
}
