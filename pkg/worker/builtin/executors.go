package builtin

import (
	"context"

	"github.com/weft-dev/weft/internal/worker"
	rt "github.com/weft-dev/weft/internal/worker/builtin"
)

// Duration is a configuration duration: a Go duration string or a number of
// milliseconds.
type Duration = rt.Duration

// EchoConfig configures echo. Without "output" the output is the node's
// input state.
type EchoConfig = rt.EchoConfig

// Echo outputs its input state, or its configured output, and the updates
// and actions its configuration lists. It is handy in tests and demos.
type Echo = rt.Echo

// Noop does nothing and outputs nothing.
type Noop = rt.Noop

// FailConfig configures fail.
type FailConfig = rt.FailConfig

// Fail fails with the configured error, for testing retries and failure
// paths.
type Fail = rt.Fail

const DefaultHTTPTimeout = rt.DefaultHTTPTimeout

const DefaultMaxBody = rt.DefaultMaxBody

const DefaultMaxRedirects = rt.DefaultMaxRedirects

const FailureHTTPStatus = rt.FailureHTTPStatus

const FailureHTTPNetwork = rt.FailureHTTPNetwork

const FailureResponseTooLarge = rt.FailureResponseTooLarge

const FailureTooManyRedirects = rt.FailureTooManyRedirects

// HTTPConfig configures http.
type HTTPConfig = rt.HTTPConfig

// HTTP sends an HTTP request and outputs {"status", "headers", "body"}: the
// body decoded as JSON when the response says it is JSON, else as a string.
// The work item's idempotency key is sent as the Idempotency-Key header.
//
// What it may reach is the worker's Policy (see AddressPolicy): checked on
// the address actually dialled, for the first request and for every
// redirect; at most MaxRedirects redirects are followed. A refused address
// fails the node with a non-retryable "AddressDenied" naming the host and
// the rule. Secrets referenced by headers are sent only to hosts the policy
// names (not to any public host), are dropped on a redirect to another
// host, and are scrubbed from the output and from errors.
//
// An unexpected status fails the node: 5xx, 408 and 429 retryably, others
// not. Network errors and timeouts are retryable. A body larger than MaxBody
// is a non-retryable "ResponseTooLarge".
type HTTP = rt.HTTP

const DefaultLLMTimeout = rt.DefaultLLMTimeout

// DefaultLLMEndpoint is the endpoint a node without "endpoint" uses,
// when the worker has several.
const DefaultLLMEndpoint = rt.DefaultLLMEndpoint

const FailureLLMStatus = rt.FailureLLMStatus

const FailureLLMResponse = rt.FailureLLMResponse

// LLMConfig configures llm.
type LLMConfig = rt.LLMConfig

// LLMEndpoint is a model API the operator configured on the worker, under
// a name graphs pick it by.
type LLMEndpoint = rt.LLMEndpoint

// LLM calls a model endpoint (OpenAI-compatible or Anthropic) with a prompt
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
type LLM = rt.LLM

// FailureAddressDenied is the failure type of a request the worker's
// address policy refuses: a host outside the allow-list, or an address in a
// denied range. It is not retryable.
const FailureAddressDenied = rt.FailureAddressDenied

// AddressPolicy decides which hosts and addresses the http executor may
// reach. It is the worker's, never the graph's.
//
// The allow-list holds host names ("api.example.com", or "*.example.com"
// for every name below example.com), IP addresses and networks in CIDR
// notation ("10.1.0.0/16", "fd00::/8"); a host name or an address may carry
// a port ("api.example.com:8443", "127.0.0.1:9000", "[::1]:9000"), which
// then is the only port allowed. With an empty list any host name may be
// requested, but only public addresses are dialled. With entries, a request
// must name an allowed host or dial an address in an allowed network.
//
// Whatever the host, the address actually dialled (after DNS, for every
// connection, on every redirect) must not be in a denied range — loopback,
// link-local (cloud metadata services live at 169.254.169.254 and
// fd00:ec2::254), private (RFC 1918, fc00::/7), shared (100.64.0.0/10),
// unspecified, multicast, broadcast or reserved — unless an allowed address
// or network contains it. Allowing a host name never opens a denied range:
// to reach a private service, allow its address or network as well. DNS
// answers are not trusted: a name that resolves to a denied address is
// refused when it is dialled.
type AddressPolicy = rt.AddressPolicy

// NewAddressPolicy parses an allow-list (see AddressPolicy). It reports
// every malformed entry at once.
func NewAddressPolicy(allow []string) (*AddressPolicy, error) {
	return rt.NewAddressPolicy(allow)
}

// DeniedError is a request the address policy refused: the host asked for,
// the address it resolved to (when it got that far) and the rule.
type DeniedError = rt.DeniedError

// Option configures the executors Register adds: what the worker allows
// them, never what a graph chooses.
type Option = rt.Option

// WithAddressPolicy sets what the http executor may reach (default: public
// addresses only).
func WithAddressPolicy(p *AddressPolicy) Option {
	return rt.WithAddressPolicy(p)
}

// WithSecrets sets where ${secret:NAME} references and llm endpoint keys
// are resolved (default: nowhere, every reference fails).
func WithSecrets(sec Secrets) Option {
	return rt.WithSecrets(sec)
}

// WithMaxResponse caps the response body of http and llm requests (default
// DefaultMaxBody, 1 MiB).
func WithMaxResponse(n int64) Option {
	return rt.WithMaxResponse(n)
}

// WithMaxRedirects caps the redirects the http executor follows (default
// DefaultMaxRedirects; negative: none).
func WithMaxRedirects(n int) Option {
	return rt.WithMaxRedirects(n)
}

// WithLLMEndpoint configures an llm endpoint under name; graphs pick it by
// that name.
func WithLLMEndpoint(name string, e LLMEndpoint) Option {
	return rt.WithLLMEndpoint(name, e)
}

// WithTemplateLimits sets the limits of prompt templates (zero fields keep
// the defaults).
func WithTemplateLimits(l TemplateLimits) Option {
	return rt.WithTemplateLimits(l)
}

const TypeEcho = rt.TypeEcho

const TypeNoop = rt.TypeNoop

const TypeSleep = rt.TypeSleep

const TypeFail = rt.TypeFail

const TypeHTTP = rt.TypeHTTP

const TypeTransform = rt.TypeTransform

const TypeLLM = rt.TypeLLM

const TypeAgent = rt.TypeAgent

// Providers of an LLMEndpoint: OpenAI-compatible chat completions (the
// default) and Anthropic's messages API, each called through its
// provider's Go SDK.
const (
	ProviderOpenAI    = rt.ProviderOpenAI
	ProviderAnthropic = rt.ProviderAnthropic
)

// AgentConfig configures agent: endpoint, model, system and prompt
// templates, tools, maxTurns, maxTokens, maxOutputTokens, temperature,
// maxMessageBytes, timeout, stream, guardrails.
type AgentConfig = rt.AgentConfig

// AgentTool is a tool an agent's model may call: a node type the worker
// runs, its configuration and its parameters' JSON Schema.
type AgentTool = rt.AgentTool

// AgentStep is what an agent records after each model answer and tool
// result (the data of a node-step event): the conversation so far and the
// budgets spent.
type AgentStep = rt.AgentStep

// Message and ToolCall are a conversation in the provider-neutral shape
// agents record; Usage counts a call's tokens.
type (
	Message  = rt.Message
	ToolCall = rt.ToolCall
	Usage    = rt.Usage
)

// Journal records an agent's steps and gives back the last one; the
// default is the run's log (worker.RecordStep, worker.LastStep).
type Journal = rt.Journal

// Agent is a durable model loop with tools (see the package doc).
type Agent = rt.Agent

// GuardrailPolicy and Guardrail are declarative checks of an agent's
// prompt and final answer: CEL, deny-lists, length limits; block, redact
// or warn.
type (
	GuardrailPolicy = rt.GuardrailPolicy
	Guardrail       = rt.Guardrail
)

// Agent defaults: model calls, answer size, a tool's run time; and the
// max_tokens sent to an Anthropic endpoint when a node sets none.
const (
	DefaultAgentMaxTurns        = rt.DefaultAgentMaxTurns
	DefaultAgentMaxMessageBytes = rt.DefaultAgentMaxMessageBytes
	DefaultToolTimeout          = rt.DefaultToolTimeout
	DefaultAnthropicMaxTokens   = rt.DefaultAnthropicMaxTokens
)

// Guardrail actions.
const (
	GuardrailBlock  = rt.GuardrailBlock
	GuardrailRedact = rt.GuardrailRedact
	GuardrailWarn   = rt.GuardrailWarn
)

// Failure types of the agent executor and of guardrails.
const (
	FailureAgentTurns      = rt.FailureAgentTurns
	FailureAgentTokens     = rt.FailureAgentTokens
	FailureAgentOversized  = rt.FailureAgentOversized
	FailureAgentCheckpoint = rt.FailureAgentCheckpoint
	FailureGuardrail       = rt.FailureGuardrail
)

// PublishTokens is the token sink of the agents Register adds: it
// publishes streamed text on the node's token subject.
func PublishTokens(ctx context.Context, in *worker.Input, step int, text string) {
	rt.PublishTokens(ctx, in, step, text)
}

// Register registers every built-in executor with w under its type,
// configured by opts.
func Register(w *worker.Worker, opts ...Option) {
	rt.Register(w, opts...)
}

// Secrets resolve the secret references of node configurations. A graph
// never holds a secret: it holds a reference, ${secret:NAME}, in a header
// value ("Authorization": "Bearer ${secret:API_TOKEN}"), which the worker
// replaces when it sends the request. Events, which copy the graph, hold
// only the reference.
//
// A Secrets returns the value of the named secret and whether it exists.
// SecretsFromEnv and SecretsFromDir are the worker daemon's sources; Or
// chains them.
type Secrets = rt.Secrets

// SecretEnvPrefix prefixes the environment variables SecretsFromEnv reads:
// ${secret:API_TOKEN} is WEFT_SECRET_API_TOKEN.
const SecretEnvPrefix = rt.SecretEnvPrefix

// SecretsFromEnv reads secret NAME from the variable WEFT_SECRET_NAME
// through lookup (os.LookupEnv when nil).
func SecretsFromEnv(lookup func(string) (string, bool)) Secrets {
	return rt.SecretsFromEnv(lookup)
}

// SecretsFromDir reads secret NAME from the file dir/NAME (a Kubernetes
// Secret mounted as a volume, say), without a trailing newline. Files are
// read on every use, so a rotated secret is picked up.
func SecretsFromDir(dir string) Secrets {
	return rt.SecretsFromDir(dir)
}

// SensitiveHeaders are the request headers whose values must be secret
// references and are never shown: a literal value in the graph would be
// copied into every event of the run.
var SensitiveHeaders = rt.SensitiveHeaders

// SleepConfig configures sleep.
type SleepConfig = rt.SleepConfig

// Sleep waits for its configured duration, or until its context ends, and
// outputs {"slept": "<duration>"}.
type Sleep = rt.Sleep

// FailureTemplateLimit is the failure type of a template that went past one
// of its limits. It is not retryable: the same template over the same
// state would go past it again.
const FailureTemplateLimit = rt.FailureTemplateLimit

const DefaultTemplateMaxSource = rt.DefaultTemplateMaxSource

const DefaultTemplateMaxOutput = rt.DefaultTemplateMaxOutput

const DefaultTemplateMaxIterations = rt.DefaultTemplateMaxIterations

// TemplateLimits bound one template's execution; zero fields take the
// defaults.
type TemplateLimits = rt.TemplateLimits

// FailureEvaluation is the failure type of a transform expression that
// compiles but fails when evaluated (a missing key, a type mismatch, the
// cost limit).
const FailureEvaluation = rt.FailureEvaluation

// TransformConfig configures transform: CEL expressions per state key, and
// optionally one for the output.
type TransformConfig = rt.TransformConfig

// Transform computes state updates with CEL expressions. Each expression
// sees the variables state (the node's input state; input is an alias),
// local (branch-local data) and invocation (the run's invocation state).
// JSON numbers that are whole become CEL ints, others doubles, so that
// "state.count + 1" works; comparisons across numeric types work too.
// Results become the node's updates; the output is the updates unless an
// "output" expression is given.
//
// Compiled programs are cached by source for the life of the process. An
// expression that does not compile fails the node with a non-retryable
// "ValidationError" naming its key; one that fails when evaluated, with a
// non-retryable "EvaluationError".
type Transform = rt.Transform
