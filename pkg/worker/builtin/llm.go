package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

// LLM defaults.
const (
	DefaultLLMBaseURL   = "https://api.openai.com/v1"
	DefaultLLMAPIKeyEnv = "OPENAI_API_KEY"
	DefaultLLMTimeout   = 60 * time.Second
)

// Failure types of the llm executor.
const (
	FailureLLMStatus   = "LLMStatus"
	FailureLLMResponse = "LLMBadResponse"
)

// LLMConfig configures llm.
type LLMConfig struct {
	// BaseURL of an OpenAI-compatible API (default
	// https://api.openai.com/v1); requests go to BaseURL/chat/completions.
	BaseURL string `json:"baseURL,omitempty"`
	Model   string `json:"model"`
	// Temperature and MaxTokens are sent when set.
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	// System is the system message (a template, like Prompt), if any.
	System string `json:"system,omitempty"`
	// Prompt is the user message: a Go text/template over {"state",
	// "local", "invocation"}, e.g. "Summarise: {{.state.text}}". A key
	// that is missing is an error; use {{index .state "k"}} for optional
	// keys.
	Prompt string `json:"prompt"`
	// APIKeyEnv names the environment variable that holds the API key
	// (default OPENAI_API_KEY). When the default variable is unset, no
	// Authorization header is sent (local servers need none); when a
	// variable named here is unset, the node fails.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// Timeout bounds one request (default 60s).
	Timeout Duration `json:"timeout,omitempty"`
}

// LLM calls an OpenAI-compatible chat-completions endpoint with a prompt
// templated from the node's state, local data and invocation state, and
// outputs {"content", "model", "usage"}. The attempt's idempotency key is
// sent as the Idempotency-Key header.
//
// Statuses 408, 429 and 5xx, network errors and timeouts are retryable
// failures (the coordinator retries by the node's policy); other 4xx are
// not, nor are configuration and template errors. Failures carry the
// provider's error message, and Retry-After when given, in their details.
type LLM struct {
	// Client sends the requests (default http.DefaultClient).
	Client *http.Client
	// Getenv reads the API key (default os.Getenv).
	Getenv func(string) string
}

// Execute implements worker.Node.
func (l *LLM) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg LLMConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	if cfg.Model == "" {
		return nil, configError(in, "model: required")
	}
	if strings.TrimSpace(cfg.Prompt) == "" {
		return nil, configError(in, "prompt: required")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultLLMBaseURL
	}
	u, err := url.Parse(strings.TrimRight(base, "/") + "/chat/completions")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configError(in, fmt.Sprintf("baseURL: want an absolute http(s) URL, got %q", base))
	}
	data := map[string]any{"state": in.State, "local": in.Local, "invocation": in.Invocation}
	prompt, err := render(in, "prompt", cfg.Prompt, data)
	if err != nil {
		return nil, err
	}
	messages := []chatMessage{{Role: "user", Content: prompt}}
	if cfg.System != "" {
		system, err := render(in, "system", cfg.System, data)
		if err != nil {
			return nil, err
		}
		messages = append([]chatMessage{{Role: "system", Content: system}}, messages...)
	}
	key, err := l.apiKey(in, cfg.APIKeyEnv)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(chatRequest{Model: cfg.Model, Messages: messages, Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens})

	timeout := time.Duration(cfg.Timeout)
	if timeout == 0 {
		timeout = DefaultLLMTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, configError(in, err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.IdempotencyKey)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := l.Client
	if client == nil {
		client = http.DefaultClient
	}
	where := "POST " + redact(u)
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &worker.Error{Type: events.FailureTimeout, Message: fmt.Sprintf("%s: no response within %s", where, timeout), Retryable: true}
		}
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: where, Retryable: true, Cause: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBody+1))
	if err != nil {
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: where + ": reading the response", Retryable: true, Cause: err}
	}
	if len(raw) > DefaultMaxBody {
		return nil, worker.NonRetryable(FailureResponseTooLarge, fmt.Sprintf("%s: response body is larger than %d bytes", where, DefaultMaxBody))
	}
	if s := resp.StatusCode; s < 200 || s > 299 {
		details := map[string]any{"status": s, "error": providerError(raw)}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			details["retryAfter"] = ra
		}
		return nil, &worker.Error{
			Type:      FailureLLMStatus,
			Message:   fmt.Sprintf("%s: status %d %s: %s", where, s, http.StatusText(s), providerError(raw)),
			Retryable: s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests,
			Details:   details,
		}
	}
	var out chatResponse
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		msg := "no choices"
		if err != nil {
			msg = err.Error()
		}
		return nil, &worker.Error{Type: FailureLLMResponse, Message: fmt.Sprintf("%s: unexpected response: %s", where, msg), Retryable: true}
	}
	model := out.Model
	if model == "" {
		model = cfg.Model
	}
	return &worker.Result{Output: map[string]any{
		"content": out.Choices[0].Message.Content,
		"model":   model,
		"usage":   out.Usage,
	}}, nil
}

func (l *LLM) apiKey(in *worker.Input, env string) (string, error) {
	getenv := l.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if env == "" {
		return getenv(DefaultLLMAPIKeyEnv), nil
	}
	key := getenv(env)
	if key == "" {
		return "", configError(in, fmt.Sprintf("apiKeyEnv: environment variable %s is not set", env))
	}
	return key, nil
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message chatMessage `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage,omitempty"`
}

// providerError is the message of an OpenAI-style error body, or the body.
func providerError(raw []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// templates caches parsed prompt templates by text.
var templates sync.Map // string → *template.Template

func render(in *worker.Input, name, text string, data any) (string, error) {
	v, ok := templates.Load(text)
	if !ok {
		t, err := template.New(name).Option("missingkey=error").Parse(text)
		if err != nil {
			return "", configError(in, fmt.Sprintf("%s: %v", name, err))
		}
		v, _ = templates.LoadOrStore(text, t)
	}
	var b strings.Builder
	if err := v.(*template.Template).Execute(&b, data); err != nil {
		return "", worker.NonRetryable(events.FailureValidation, fmt.Sprintf("%s node %q: %s: %v", in.Type, in.NodeID, name, err))
	}
	return b.String(), nil
}
