package builtin

import (
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

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// The model seam. The llm and agent executors talk to a model through
// chatModel, whose two implementations wrap the providers' own SDKs
// (openai-go for OpenAI-compatible chat completions, anthropic-sdk-go for
// Anthropic's messages API). Conversations are held, and recorded in the
// log, in one provider-neutral shape (Message), so that an agent's steps
// read the same whatever model made them.
//
// The SDKs' own retries are off: a failed call is the node's failure, and
// the coordinator retries it by the node's policy, durably (a retry the SDK
// made in memory would be invisible in the log).

// Providers of an LLMEndpoint.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// DefaultAnthropicMaxTokens is the max_tokens sent to an Anthropic endpoint
// when the node sets none: the messages API requires one.
const DefaultAnthropicMaxTokens = 1024

// Message is one message of a conversation in the provider-neutral shape
// the agent records: a system or user prompt, an assistant's answer with
// the tool calls it asks for, or a tool's result.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the assistant's requests, in the model's order.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and Name say which call a tool message answers; IsError
	// marks a result that reports a failure back to the model.
	ToolCallID string `json:"toolCallId,omitempty"`
	Name       string `json:"name,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
}

// ToolCall is a model's request to run a tool. Arguments is the JSON text
// the model gave, verbatim, valid or not.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage counts the tokens of a model call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// toolSpec is a tool as a model sees it: its parameters are a JSON Schema
// of an object.
type toolSpec struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// chatRequest is one model call.
type chatRequest struct {
	Model       string
	Messages    []Message
	Tools       []toolSpec
	Temperature *float64
	MaxTokens   int
	// IdempotencyKey is sent as the Idempotency-Key header.
	IdempotencyKey string
	// OnToken, when set, streams the call (SSE) and is given each piece of
	// text as it arrives.
	OnToken func(string)
}

// chatResponse is a model call's answer.
type chatResponse struct {
	Message Message
	Model   string
	// Stop is the provider's reason for stopping ("stop", "tool_calls",
	// "end_turn", "tool_use", "length", "max_tokens", …).
	Stop  string
	Usage Usage
}

// chatModel is a model behind an endpoint.
type chatModel interface {
	chat(ctx context.Context, req chatRequest) (chatResponse, error)
}

// errBodyTooLarge is what a response body larger than the worker's limit
// reads as.
var errBodyTooLarge = errors.New("the response body is larger than the worker's limit")

// limitTransport caps response bodies, so that an endpoint cannot make the
// worker hold an unbounded answer.
type limitTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errBodyTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// modelTarget is an endpoint resolved for a node: where, with which key,
// and how failures are described.
type modelTarget struct {
	name     string
	endpoint LLMEndpoint
	base     *url.URL
	key      string
	// where prefixes failures: the node, the endpoint and its URL without
	// credentials.
	where string
}

// models resolves endpoints and builds their SDK clients: what llm and
// agent share.
type models struct {
	Endpoints map[string]LLMEndpoint
	Secrets   Secrets
	Client    *http.Client
	MaxBody   int64
}

// resolve picks the node's endpoint by name and reads its key.
func (m *models) resolve(in *worker.Input, name string) (*modelTarget, error) {
	if name == "" {
		switch {
		case len(m.Endpoints) == 1:
			for n := range m.Endpoints {
				name = n
			}
		case len(m.Endpoints) == 0:
			return nil, configError(in, "no llm endpoint is configured on this worker (nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)")
		default:
			name = DefaultLLMEndpoint
		}
	}
	ep, ok := m.Endpoints[name]
	if !ok {
		known := slices.Sorted(maps.Keys(m.Endpoints))
		return nil, configError(in, fmt.Sprintf("endpoint: %q is not configured on this worker (it has: %s)", name, strings.Join(known, ", ")))
	}
	switch ep.Provider {
	case "", ProviderOpenAI, ProviderAnthropic:
	default:
		return nil, configError(in, fmt.Sprintf("endpoint %q: provider %q is not one of %s, %s", name, ep.Provider, ProviderOpenAI, ProviderAnthropic))
	}
	u, err := url.Parse(strings.TrimRight(ep.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configError(in, fmt.Sprintf("endpoint %q: the worker's URL is not an absolute http(s) URL", name))
	}
	key := ep.Key
	if ep.KeySecret != "" {
		v, ok := "", false
		if m.Secrets != nil {
			v, ok = m.Secrets(ep.KeySecret)
		}
		if !ok {
			return nil, configError(in, fmt.Sprintf("endpoint %q: its key, secret %s, is not configured on this worker (set %s%s, or a file %s in its -secrets-dir)", name, ep.KeySecret, SecretEnvPrefix, ep.KeySecret, ep.KeySecret))
		}
		key = v
	}
	return &modelTarget{
		name: name, endpoint: ep, base: u, key: key,
		where: fmt.Sprintf("%s node %q: endpoint %q (%s)", in.Type, in.NodeID, name, redact(u)),
	}, nil
}

// client builds the SDK client of a resolved endpoint.
func (m *models) client(t *modelTarget) chatModel {
	base := http.DefaultTransport
	if m.Client != nil && m.Client.Transport != nil {
		base = m.Client.Transport
	}
	limit := m.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	hc := &http.Client{
		Transport:     limitTransport{base: base, limit: limit},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if t.endpoint.Provider == ProviderAnthropic {
		// No environment defaults: the SDK would read ANTHROPIC_* variables
		// and profile files, and a worker sends what its operator
		// configured for the endpoint, nothing else.
		opts := []aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(t.base.String() + "/"), aoption.WithHTTPClient(hc), aoption.WithMaxRetries(0)}
		if t.key != "" {
			opts = append(opts, aoption.WithAPIKey(t.key))
		}
		return &anthropicModel{c: anthropic.NewClient(opts...), t: t}
	}
	opts := []ooption.RequestOption{ooption.WithBaseURL(t.base.String() + "/"), ooption.WithHTTPClient(hc), ooption.WithMaxRetries(0)}
	if t.key != "" {
		opts = append(opts, ooption.WithAPIKey(t.key))
	}
	// The service alone, not openai.NewClient, which would read OPENAI_*
	// variables (a key, headers) into every request.
	return &openAIModel{c: openai.NewChatCompletionService(opts...), t: t}
}

// callError maps an SDK call's error to the node's failure: statuses 408,
// 429 and 5xx, network errors and timeouts are retryable; other statuses
// are not. The key is scrubbed from whatever the provider echoed.
func (t *modelTarget) callError(err error, status int, header http.Header, body string) error {
	var secrets []string
	if t.key != "" {
		secrets = []string{t.key}
	}
	switch {
	case status != 0:
		msg := scrub(providerError([]byte(body)), secrets)
		details := map[string]any{"status": status, "error": msg}
		if ra := header.Get("Retry-After"); ra != "" {
			details["retryAfter"] = ra
		}
		return &worker.Error{
			Type:      FailureLLMStatus,
			Message:   fmt.Sprintf("%s: status %d %s: %s", t.where, status, http.StatusText(status), msg),
			Retryable: status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests,
			Details:   details,
		}
	case errors.Is(err, errBodyTooLarge):
		return worker.NonRetryable(FailureResponseTooLarge, t.where+": "+errBodyTooLarge.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return &worker.Error{Type: events.FailureTimeout, Message: t.where + ": no response in time", Retryable: true}
	case errors.Is(err, context.Canceled):
		return err
	}
	return &worker.Error{Type: FailureHTTPNetwork, Message: t.where, Retryable: true, Cause: errors.New(scrub(err.Error(), secrets))}
}

// badResponse is a retryable failure about an answer the worker cannot use.
func (t *modelTarget) badResponse(msg string) error {
	return &worker.Error{Type: FailureLLMResponse, Message: fmt.Sprintf("%s: unexpected response: %s", t.where, msg), Retryable: true}
}

// openAIModel is an OpenAI-compatible chat-completions endpoint.
type openAIModel struct {
	c openai.ChatCompletionService
	t *modelTarget
}

func (m *openAIModel) chat(ctx context.Context, req chatRequest) (chatResponse, error) {
	params := openai.ChatCompletionNewParams{Model: req.Model}
	for _, msg := range req.Messages {
		params.Messages = append(params.Messages, openAIMessage(msg))
	}
	for _, tool := range req.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        tool.Name,
			Description: openai.String(tool.Description),
			Parameters:  shared.FunctionParameters(tool.Parameters),
		}))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = openai.Int(int64(req.MaxTokens))
	}
	var opts []ooption.RequestOption
	if req.IdempotencyKey != "" {
		opts = append(opts, ooption.WithHeader("Idempotency-Key", req.IdempotencyKey))
	}
	if req.OnToken != nil {
		return m.stream(ctx, params, req, opts)
	}
	resp, err := m.c.New(ctx, params, opts...)
	if err != nil {
		return chatResponse{}, m.err(err)
	}
	if len(resp.Choices) == 0 {
		return chatResponse{}, m.t.badResponse("no choices")
	}
	ch := resp.Choices[0]
	out := chatResponse{
		Message: Message{Role: "assistant", Content: ch.Message.Content},
		Model:   resp.Model,
		Stop:    ch.FinishReason,
		Usage:   Usage{int(resp.Usage.PromptTokens), int(resp.Usage.CompletionTokens), int(resp.Usage.TotalTokens)},
	}
	for _, tc := range ch.Message.ToolCalls {
		out.Message.ToolCalls = append(out.Message.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// stream makes the call as server-sent events and assembles the answer
// from its chunks; a stream that ends before a finish reason is a
// retryable failure (the text streamed so far is not recorded).
func (m *openAIModel) stream(ctx context.Context, params openai.ChatCompletionNewParams, req chatRequest, opts []ooption.RequestOption) (chatResponse, error) {
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	s := m.c.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var (
		out     = chatResponse{Message: Message{Role: "assistant"}}
		content strings.Builder
		calls   = map[int64]*ToolCall{}
		order   []int64
	)
	for s.Next() {
		chunk := s.Current()
		if chunk.Model != "" {
			out.Model = chunk.Model
		}
		if chunk.Usage.TotalTokens > 0 {
			out.Usage = Usage{int(chunk.Usage.PromptTokens), int(chunk.Usage.CompletionTokens), int(chunk.Usage.TotalTokens)}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				content.WriteString(d)
				req.OnToken(d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				c, ok := calls[tc.Index]
				if !ok {
					c = &ToolCall{}
					calls[tc.Index] = c
					order = append(order, tc.Index)
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					c.Name = tc.Function.Name
				}
				c.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				out.Stop = ch.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		return chatResponse{}, m.err(err)
	}
	if out.Stop == "" {
		return chatResponse{}, m.t.badResponse("the stream ended before the model finished")
	}
	out.Message.Content = content.String()
	slices.Sort(order)
	for _, i := range order {
		out.Message.ToolCalls = append(out.Message.ToolCalls, *calls[i])
	}
	return out, nil
}

func (m *openAIModel) err(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		h, body := errorBody(apiErr.Response)
		if body == "" {
			body = apiErr.RawJSON()
		}
		return m.t.callError(err, apiErr.StatusCode, h, body)
	}
	return m.t.callError(err, 0, nil, "")
}

// openAIMessage is a neutral message as a chat-completions message.
func openAIMessage(m Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case "system":
		return openai.SystemMessage(m.Content)
	case "tool":
		return openai.ToolMessage(m.Content, m.ToolCallID)
	case "assistant":
		a := openai.ChatCompletionAssistantMessageParam{}
		if m.Content != "" {
			a.Content.OfString = openai.String(m.Content)
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
	}
	return openai.UserMessage(m.Content)
}

// anthropicModel is an endpoint of Anthropic's messages API.
type anthropicModel struct {
	c anthropic.Client
	t *modelTarget
}

func (m *anthropicModel) chat(ctx context.Context, req chatRequest) (chatResponse, error) {
	params := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: int64(req.MaxTokens)}
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultAnthropicMaxTokens
	}
	addAnthropicMessages(&params, req.Messages)
	for _, tool := range req.Tools {
		params.Tools = append(params.Tools, anthropicTool(tool))
	}
	var opts []aoption.RequestOption
	if req.IdempotencyKey != "" {
		opts = append(opts, aoption.WithHeader("Idempotency-Key", req.IdempotencyKey))
	}
	msg, err := m.send(ctx, params, opts, req.OnToken)
	if err != nil {
		return chatResponse{}, err
	}
	return m.response(msg)
}

// addAnthropicMessages puts messages into params as Anthropic's API wants
// them: system messages apart, tool calls as tool_use blocks, and
// consecutive tool results in one user message.
func addAnthropicMessages(params *anthropic.MessageNewParams, messages []Message) {
	for _, msg := range messages {
		switch msg.Role {
		case "system":
			params.System = append(params.System, anthropic.TextBlockParam{Text: msg.Content})
		case "assistant":
			var blocks []anthropic.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				var input any = json.RawMessage(tc.Arguments)
				if !json.Valid([]byte(tc.Arguments)) {
					input = map[string]any{}
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		case "tool":
			// Consecutive tool results go back in one user message.
			block := anthropic.NewToolResultBlock(msg.ToolCallID, msg.Content, msg.IsError)
			if n := len(params.Messages); n > 0 && isToolResults(params.Messages[n-1]) {
				u := params.Messages[n-1].OfUser
				u.Content = append(u.Content, block)
				continue
			}
			params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
		default:
			params.Messages = append(params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(msg.Content)))
		}
	}
}

// anthropicTool is tool as Anthropic's API wants it: its parameters
// split into properties, required and the rest of the schema.
func anthropicTool(tool toolSpec) anthropic.ToolUnionParam {
	schema := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range tool.Parameters {
		switch k {
		case "type":
		case "properties":
			schema.Properties = v
		case "required":
			for _, r := range asList(v) {
				if s, ok := r.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
		default:
			schema.ExtraFields[k] = v
		}
	}
	tp := anthropic.ToolParam{Name: tool.Name, InputSchema: schema}
	if tool.Description != "" {
		tp.Description = anthropic.String(tool.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &tp}
}

// send makes the call, streamed when onToken is set (each piece of text
// given to it as it arrives), and returns the model's message.
func (m *anthropicModel) send(ctx context.Context, params anthropic.MessageNewParams, opts []aoption.RequestOption, onToken func(string)) (anthropic.Message, error) {
	var msg anthropic.Message
	if onToken != nil {
		s := m.c.Messages.NewStreaming(ctx, params, opts...)
		defer s.Close()
		stopped := false
		for s.Next() {
			ev := s.Current()
			if err := msg.Accumulate(ev); err != nil {
				return anthropic.Message{}, m.t.badResponse(err.Error())
			}
			if ev.Type == "content_block_delta" && ev.Delta.Text != "" {
				onToken(ev.Delta.Text)
			}
			if ev.Type == "message_stop" {
				stopped = true
			}
		}
		if err := s.Err(); err != nil {
			return anthropic.Message{}, m.err(err)
		}
		if !stopped {
			return anthropic.Message{}, m.t.badResponse("the stream ended before the model finished")
		}
	} else {
		resp, err := m.c.Messages.New(ctx, params, opts...)
		if err != nil {
			return anthropic.Message{}, m.err(err)
		}
		msg = *resp
	}
	return msg, nil
}

// response is the chatResponse of the model's message: its text, its
// tool calls (arguments {} when it gave none), its stop reason and usage.
func (m *anthropicModel) response(msg anthropic.Message) (chatResponse, error) {
	out := chatResponse{
		Message: Message{Role: "assistant"},
		Model:   string(msg.Model),
		Stop:    string(msg.StopReason),
		Usage:   Usage{int(msg.Usage.InputTokens), int(msg.Usage.OutputTokens), int(msg.Usage.InputTokens + msg.Usage.OutputTokens)},
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Message.Content = text.String()
	if out.Stop == "" {
		return chatResponse{}, m.t.badResponse("no stop reason")
	}
	return out, nil
}

func (m *anthropicModel) err(err error) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		h, body := errorBody(apiErr.Response)
		if body == "" {
			body = apiErr.RawJSON()
		}
		return m.t.callError(err, apiErr.StatusCode, h, body)
	}
	return m.t.callError(err, 0, nil, "")
}

// errorBody is the header and the (buffered, capped) body of an SDK
// error's response: the SDKs keep the body readable for their callers.
func errorBody(resp *http.Response) (http.Header, string) {
	if resp == nil {
		return nil, ""
	}
	var body string
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		body = string(b)
	}
	return resp.Header, body
}

func isToolResults(m anthropic.MessageParam) bool {
	if m.OfUser == nil {
		return false
	}
	for _, b := range m.OfUser.Content {
		if b.OfToolResult == nil {
			return false
		}
	}
	return len(m.OfUser.Content) > 0
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
