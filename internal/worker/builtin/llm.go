package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// LLM defaults.
const (
	DefaultLLMTimeout = 60 * time.Second
	// DefaultLLMEndpoint is the endpoint a node without "endpoint" uses,
	// when the worker has several.
	DefaultLLMEndpoint = "default"
)

// Failure types of the llm executor.
const (
	FailureLLMStatus   = "LLMStatus"
	FailureLLMResponse = "LLMBadResponse"
)

// LLMConfig configures llm.
type LLMConfig struct {
	// Endpoint names one of the worker's endpoints (LLM.Endpoints; the
	// nodeworker's -llm-endpoint). Without it, the worker's only endpoint,
	// or the one named "default". A graph never gives a URL or a key.
	Endpoint string `json:"endpoint,omitempty"`
	Model    string `json:"model"`
	// Temperature and MaxTokens are sent when set.
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	// System is the system message (a template, like Prompt), if any.
	System string `json:"system,omitempty"`
	// Prompt is the user message: a Go text/template over {"state",
	// "local", "invocation"}, e.g. "Summarise: {{.state.text}}". A key
	// that is missing is an error; use {{index .state "k"}} for optional
	// keys. Templates are bounded (see TemplateLimits).
	Prompt string `json:"prompt"`
	// Timeout bounds one request (default 60s).
	Timeout Duration `json:"timeout,omitempty"`
}

// LLMEndpoint is an OpenAI-compatible API the operator configured on the
// worker, under a name graphs pick it by.
type LLMEndpoint struct {
	// URL is the API's base URL; requests go to URL/chat/completions.
	URL string
	// KeySecret names the worker secret (see Secrets) that holds the API
	// key, sent as a bearer token; empty: no Authorization header.
	KeySecret string
	// Key is the API key itself, for programs that embed the worker and
	// hold it already; KeySecret wins when both are set.
	Key string
}

// removedLLMFields are configuration fields a graph may no longer give,
// with what to use instead.
var removedLLMFields = map[string]string{
	"baseurl":   `a graph no longer chooses the URL: name an endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`,
	"url":       `a graph does not choose the URL: name an endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`,
	"apikeyenv": `a graph no longer chooses the API key: the key belongs to the endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`,
	"apikey":    `a graph does not hold the API key: the key belongs to the endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`,
}

// checkLLMConfig checks the parts of an llm node's configuration that must
// hold before the graph is accepted: no URL, no key, no environment
// variable. It returns one message per problem, each starting with the
// field.
func checkLLMConfig(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // the executor reports a malformed config
	}
	var bad []string
	for k := range m {
		if why, ok := removedLLMFields[strings.ToLower(k)]; ok {
			bad = append(bad, k+": "+why)
		}
	}
	slices.Sort(bad)
	return bad
}

// LLM calls an OpenAI-compatible chat-completions endpoint with a prompt
// templated from the node's state, local data and invocation state, and
// outputs {"content", "model", "usage"}. The attempt's idempotency key is
// sent as the Idempotency-Key header.
//
// The endpoint is one of Endpoints, chosen by name: operators configure
// them, and they are trusted (not subject to the http executor's address
// policy); redirects are not followed. Prompt templates are bounded by
// Limits.
//
// Statuses 408, 429 and 5xx, network errors and timeouts are retryable
// failures (the coordinator retries by the node's policy); other 4xx are
// not, nor are configuration and template errors. Failures carry the
// provider's error message, and Retry-After when given, in their details.
type LLM struct {
	// Endpoints by name.
	Endpoints map[string]LLMEndpoint
	// Secrets resolves the endpoints' KeySecret.
	Secrets Secrets
	// Client sends the requests (default: a client that follows no
	// redirects).
	Client *http.Client
	// MaxBody caps the response body (default 1 MiB).
	MaxBody int64
	// Limits bound the prompt templates.
	Limits TemplateLimits
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// endpoint picks the node's endpoint.
func (l *LLM) endpoint(in *worker.Input, name string) (string, LLMEndpoint, error) {
	if name == "" {
		switch {
		case len(l.Endpoints) == 1:
			for n, e := range l.Endpoints {
				return n, e, nil
			}
		case len(l.Endpoints) == 0:
			return "", LLMEndpoint{}, configError(in, "no llm endpoint is configured on this worker (nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)")
		}
		name = DefaultLLMEndpoint
	}
	e, ok := l.Endpoints[name]
	if !ok {
		known := slices.Sorted(maps.Keys(l.Endpoints))
		return "", LLMEndpoint{}, configError(in, fmt.Sprintf("endpoint: %q is not configured on this worker (it has: %s)", name, strings.Join(known, ", ")))
	}
	return name, e, nil
}

// Execute implements worker.Node.
func (l *LLM) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	if bad := checkLLMConfig(in.Config); len(bad) > 0 {
		return nil, configError(in, strings.Join(bad, "; "))
	}
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
	name, ep, err := l.endpoint(in, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimRight(ep.URL, "/") + "/chat/completions")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configError(in, fmt.Sprintf("endpoint %q: the worker's URL is not an absolute http(s) URL", name))
	}
	data := map[string]any{"state": in.State, "local": in.Local, "invocation": in.Invocation}
	prompt, err := render(ctx, in, "prompt", cfg.Prompt, data, l.Limits)
	if err != nil {
		return nil, err
	}
	messages := []chatMessage{{Role: "user", Content: prompt}}
	if cfg.System != "" {
		system, err := render(ctx, in, "system", cfg.System, data, l.Limits)
		if err != nil {
			return nil, err
		}
		messages = append([]chatMessage{{Role: "system", Content: system}}, messages...)
	}
	key := ep.Key
	if ep.KeySecret != "" {
		v, ok := "", false
		if l.Secrets != nil {
			v, ok = l.Secrets(ep.KeySecret)
		}
		if !ok {
			return nil, configError(in, fmt.Sprintf("endpoint %q: its key, secret %s, is not configured on this worker (set %s%s, or a file %s in its -secrets-dir)", name, ep.KeySecret, SecretEnvPrefix, ep.KeySecret, ep.KeySecret))
		}
		key = v
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
		client = noRedirects
	}
	where := fmt.Sprintf("llm node %q: endpoint %q: POST %s", in.NodeID, name, redact(u))
	var secrets []string
	if key != "" {
		secrets = []string{key}
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &worker.Error{Type: events.FailureTimeout, Message: fmt.Sprintf("%s: no response within %s", where, timeout), Retryable: true}
		}
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: where, Retryable: true, Cause: errors.New(scrub(err.Error(), secrets))}
	}
	defer resp.Body.Close()
	limit := l.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &worker.Error{Type: FailureHTTPNetwork, Message: where + ": reading the response", Retryable: true, Cause: err}
	}
	if int64(len(raw)) > limit {
		return nil, worker.NonRetryable(FailureResponseTooLarge, fmt.Sprintf("%s: the response body is larger than the worker's %d-byte limit", where, limit))
	}
	raw = []byte(scrub(string(raw), secrets))
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
