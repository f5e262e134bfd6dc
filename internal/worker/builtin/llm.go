package builtin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/worker"
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
	// Guardrails check the rendered prompt and the answer, as an
	// agent's do.
	Guardrails *GuardrailPolicy `json:"guardrails,omitempty"`
}

// LLMEndpoint is a model API the operator configured on the worker, under
// a name graphs pick it by: OpenAI-compatible chat completions (the
// default) or Anthropic's messages API, each called through its provider's
// SDK.
type LLMEndpoint struct {
	// URL is the API's base URL: requests go to URL/chat/completions
	// (openai) or URL/v1/messages (anthropic, whose base URL has no /v1).
	URL string
	// Provider is ProviderOpenAI (empty) or ProviderAnthropic.
	Provider string
	// KeySecret names the worker secret (see Secrets) that holds the API
	// key, sent as a bearer token (openai) or x-api-key (anthropic);
	// empty: no key.
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

// LLM calls a model endpoint (OpenAI-compatible chat completions, or
// Anthropic's messages API) with a prompt templated from the node's state,
// local data and invocation state, and outputs {"content", "model",
// "usage"}. The attempt's idempotency key is sent as the Idempotency-Key
// header.
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
	// Client's transport sends the requests (default
	// http.DefaultTransport); redirects are never followed.
	Client *http.Client
	// MaxBody caps the response body (default 1 MiB).
	MaxBody int64
	// Limits bound the prompt templates.
	Limits TemplateLimits
}

func (l *LLM) models() *models {
	return &models{Endpoints: l.Endpoints, Secrets: l.Secrets, Client: l.Client, MaxBody: l.MaxBody}
}

// Execute implements worker.Node.
func (l *LLM) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	cfg, err := decodeLLMConfig(in)
	if err != nil {
		return nil, err
	}
	ms := l.models()
	target, err := ms.resolve(in, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	messages, err := l.messages(ctx, in, cfg)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(cfg.Timeout)
	if timeout == 0 {
		timeout = DefaultLLMTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := ms.client(target).chat(ctx, chatRequest{
		Model: cfg.Model, Messages: messages, Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens,
		IdempotencyKey: in.IdempotencyKey,
	})
	if err != nil {
		return nil, err
	}
	model := resp.Model
	if model == "" {
		model = cfg.Model
	}
	content := resp.Message.Content
	out := map[string]any{"model": model, "usage": resp.Usage}
	if cfg.Guardrails != nil {
		if content, err = cfg.Guardrails.check(ctx, in, "output", content); err != nil {
			return nil, err
		}
		if len(cfg.Guardrails.warnings) > 0 {
			out["guardrails"] = cfg.Guardrails.warnings
		}
	}
	out["content"] = content
	return &worker.Result{Output: out}, nil
}

// decodeLLMConfig decodes and checks an llm node's configuration, its
// guardrails compiled.
func decodeLLMConfig(in *worker.Input) (*LLMConfig, error) {
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
	if cfg.Guardrails != nil {
		if bad := cfg.Guardrails.compile(); len(bad) > 0 {
			return nil, configError(in, strings.Join(bad, "; "))
		}
	}
	return &cfg, nil
}

// messages renders the messages an llm node sends: its prompt, through
// the input guardrails, after its system message if it has one.
func (l *LLM) messages(ctx context.Context, in *worker.Input, cfg *LLMConfig) ([]Message, error) {
	data := map[string]any{"state": in.State, "local": in.Local, "invocation": in.Invocation}
	prompt, err := render(ctx, in, "prompt", cfg.Prompt, data, l.Limits)
	if err != nil {
		return nil, err
	}
	if cfg.Guardrails != nil {
		if prompt, err = cfg.Guardrails.check(ctx, in, "input", prompt); err != nil {
			return nil, err
		}
	}
	messages := []Message{{Role: "user", Content: prompt}}
	if cfg.System != "" {
		system, err := render(ctx, in, "system", cfg.System, data, l.Limits)
		if err != nil {
			return nil, err
		}
		messages = append([]Message{{Role: "system", Content: system}}, messages...)
	}
	return messages, nil
}

// providerError is the message of an OpenAI- or Anthropic-style error
// body ({"error": {"message": …}}), or the body.
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
