// Package builtin holds the node executors that come with Weft's worker
// daemon: echo, noop, sleep, fail, http, transform, llm and agent. Register adds them
// all to a worker, configured by options; each is also an exported type, for
// reuse under another name or with other settings. It is a face
// (executors.go) over internal/worker/builtin, where the executors live as
// engine code: the coordinator runs transform locally.
//
// Executors read their configuration from the node's "config" in the graph.
// Unknown configuration fields are refused: a misspelt field fails the node
// with a non-retryable "ValidationError" rather than being ignored. Graph
// validation (package graph; its doc lists the rules) checks the same
// configs when a graph is loaded, field by field, so that such a graph is
// refused before a run starts.
// Durations are Go duration strings ("100ms", "1m30s") or numbers of
// milliseconds.
//
// # What the graph chooses, and what the worker does
//
// A graph is written by whoever may start runs; the worker's configuration
// by its operator. So a graph never chooses where the worker's secrets go
// nor what its host can reach:
//
//   - http: the worker's AddressPolicy (WithAddressPolicy; nodeworker
//     -http-allow) decides which hosts and addresses may be reached. It is
//     checked on the address actually dialled, after DNS, for every
//     connection and every redirect, so DNS rebinding and redirects to a
//     denied address are refused. Loopback, link-local (cloud metadata),
//     private, shared, unspecified, multicast and reserved addresses are
//     denied unless an allowed address or network holds them. Proxies from
//     the environment are not used. A refusal fails the node with a
//     non-retryable "AddressDenied" naming the host and the rule.
//   - Secrets are referenced, never written: an http header value holds
//     ${secret:NAME} ("Authorization": "Bearer ${secret:API_TOKEN}"), which
//     the worker resolves from its own secrets (WithSecrets; nodeworker:
//     WEFT_SECRET_<NAME> variables and the files of -secrets-dir), so
//     events hold only the reference. Authorization, Cookie and
//     Proxy-Authorization must be references; a URL with user:password@ is
//     refused. Graph validation (pkg/graph) refuses both, located, before a
//     run starts. Secrets are sent only to hosts the allow-list names (not
//     to any public host), are dropped on a redirect to another host, and
//     their values are scrubbed from the node's output and failures.
//   - llm: endpoints and their keys are the worker's, under names
//     (WithLLMEndpoint; nodeworker -llm-endpoint name=N,url=U,key=SECRET);
//     a graph picks one with "endpoint". The old "baseURL" and "apiKeyEnv"
//     fields are refused, saying what to use instead. Operator-configured
//     endpoints are trusted: they are not subject to the address policy.
//     Redirects are not followed. An endpoint is OpenAI-compatible chat
//     completions or, with provider=anthropic, Anthropic's messages API;
//     both are called through their providers' SDKs, which read nothing
//     from the worker's environment (no OPENAI_* or ANTHROPIC_* variable)
//     and retry nothing themselves (the coordinator retries, durably).
//   - agent: a model loop (llm's endpoints) with tools. A tool is a node
//     type this worker runs (its registered executors: http under the
//     address policy, or a program's own), with its parameters' JSON
//     Schema, timeout and attempts; it runs with the call's arguments as
//     its state and "<attempt's key>/step/<n>" as its idempotency key.
//     Every model answer and tool result is a node-step event before the
//     loop goes on, so a node that runs again resumes at its last step,
//     without calling the model again for the answers it has. See
//     internal/worker/builtin's agent.go for the why.
//
// # Agents
//
// An agent's loop ends with the model's final answer (output: content,
// turns, steps, usage, messages and, when a guardrail warned,
// guardrails), or fails: maxTurns model calls without a final answer
// (AgentTurnBudget), maxTokens spent (AgentTokenBudget), an answer over
// maxMessageBytes (AgentMessageTooLarge), a guardrail that blocks
// (GuardrailBlocked), all non-retryable and naming the node and the limit.
// A tool the model invents, arguments that are not JSON or fail the
// schema, and a failing tool are given back to the model as error results
// (recorded like any result). With "stream": true the model's text is
// published as it arrives on the node's token subject (core NATS,
// weft.tok.<slot>.<run>.<queue>.<step>), not stored. API keys are never in
// a step, a failure or a log line: the endpoint's key is scrubbed from
// whatever the provider echoes.
//
// A tool marked "approval": "required" runs only once a person approved
// the call: the agent records a step that awaits it and its attempt ends;
// the node waits for a signal ({"approved": true|false, "reason": "..."})
// as a human node does, up to the tool's "approvalTimeout", and its next
// attempt goes on from the recorded steps. A rejection is the tool's
// result for the model. See docs/agents.md.
//
// # Limits
//
// Exceeding a limit fails the node with a non-retryable failure that names
// the node and the limit; the work item is acknowledged, so it cannot be
// redelivered to the next worker.
//
//	limit                      default  option (nodeworker flag)                            failure
//	http, llm response body    1 MiB    WithMaxResponse (-http-max-body)                    ResponseTooLarge
//	http redirects             5        WithMaxRedirects (-http-max-redirects)              TooManyRedirects
//	http request time          10s      config "timeout"; the node's timeout                Timeout (retryable)
//	llm request time           60s      config "timeout"; the node's timeout                Timeout (retryable)
//	agent model calls          8        config "maxTurns"                                   AgentTurnBudget
//	agent tokens               none     config "maxTokens"                                  AgentTokenBudget
//	agent answer size          64 KiB   config "maxMessageBytes"                            AgentMessageTooLarge
//	agent tool run time        30s      config "tools[i].timeout"                           (an error result)
//	template source            64 KiB   TemplateLimits.MaxSource                            TemplateLimit
//	template output            1 MiB    TemplateLimits.MaxOutput (-template-max-output)     TemplateLimit
//	template range iterations  100000   TemplateLimits.MaxIterations (-template-max-iterations) TemplateLimit
//	template printf width      1024     fixed                                               ValidationError
//	transform expression cost  1000000  fixed (internal/expr cost units)                    EvaluationError
//
// Templates (the llm prompt and system message, Go text/template over
// {"state", "local", "invocation"}) cannot be interrupted once they run, so
// they are bounded by construction: every range iteration (over a list, a
// map or an integer) counts against the budget and checks the node's
// context, so the node's timeout also stops a template; output past its cap
// aborts execution; printf refuses '*' and widths or precisions over 1024;
// {{define}}, {{block}} and {{template}} are refused (no recursion).
// Transform's CEL expressions have a cost limit (CEL cost units) and stop
// when the node's context ends.
package builtin
