package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// The agent executor: a durable model loop with tools.
//
// An agent node calls its model with the conversation so far and the
// tools it declares; when the model asks for tools, the agent runs them
// and gives their results back, and calls the model again, until the
// model answers without a tool call (the final answer), or a budget ends
// the loop: maxTurns model calls, or maxTokens tokens over all calls.
//
// Every step is recorded before the loop goes on (a "step" is one model
// answer, or one tool's result): the agent hands each to its Journal,
// which on a worker appends a node-step event to the run's log
// (worker.RecordStep). When the node runs again, on a redelivery after
// its worker died or on a retry after a failure, the agent reads its last
// recorded step (worker.LastStep) and goes on from there: a model call
// whose answer is recorded is not made again, and a tool whose result is
// recorded is not run again. A step that was under way when the worker
// died is made again, under the same idempotency key
// (<attempt's key>/step/<n>), which the model call sends as the
// Idempotency-Key header and a tool node gets as its own key.
//
// Why steps recorded by the worker, not tool nodes scheduled by the
// coordinator: a step is a fact about one attempt of one node, which only
// the worker running it knows, in the order it happened; recording it on
// the worker's own subjects keeps the coordinator's decisions (principle
// 4) and the fold (principle 3) as they are, makes a model answer durable
// with one append and no round trip through the coordinator, and the
// worker's role may already write and read its queue's subjects, so no
// right is added (principle 8). Tools are node types of the same worker
// (its registered executors: http under the worker's allow-list, echo, or
// a program's own), run through the node contract's Execute with their
// own configuration, timeout, attempts and idempotency key; or, for a
// tool of another queue, a subgraph tool (remote.go) and a call that
// needs a person's approval (approval.go), the step awaits, the attempt
// ends, and the coordinator decides the wait and resumes the node.
//
// Bad input gets a located outcome. A tool the model invents, arguments
// that are not JSON or fail the tool's JSON Schema, and a tool that fails
// are given back to the model as an error result (it can correct itself),
// and recorded like any result. A model that never stops ends at
// maxTurns, a token budget at maxTokens, each a non-retryable failure
// that names the node and the budget; an answer larger than
// maxMessageBytes fails the node.

// Agent defaults.
const (
	DefaultAgentMaxTurns        = 8
	DefaultAgentMaxMessageBytes = 64 << 10
	DefaultToolTimeout          = 30 * time.Second
)

// Failure types of the agent executor.
const (
	FailureAgentTurns      = "AgentTurnBudget"
	FailureAgentTokens     = "AgentTokenBudget"
	FailureAgentOversized  = "AgentMessageTooLarge"
	FailureAgentCheckpoint = "AgentCheckpoint"
)

// AgentConfig configures agent.
type AgentConfig struct {
	// Endpoint and Model are as llm's.
	Endpoint string `json:"endpoint,omitempty"`
	Model    string `json:"model"`
	// System and Prompt are templates, as llm's.
	System string `json:"system,omitempty"`
	Prompt string `json:"prompt"`
	// Tools the model may call.
	Tools []AgentTool `json:"tools,omitempty"`
	// MaxTurns bounds the model calls (default 8); MaxTokens the tokens
	// of all calls together (0: no bound).
	MaxTurns  int `json:"maxTurns,omitempty"`
	MaxTokens int `json:"maxTokens,omitempty"`
	// MaxOutputTokens is each call's max_tokens, Temperature its
	// temperature (sent when set).
	MaxOutputTokens int      `json:"maxOutputTokens,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	// MaxMessageBytes bounds a model answer (default 64 KiB).
	MaxMessageBytes int `json:"maxMessageBytes,omitempty"`
	// Timeout bounds one model call (default 60s).
	Timeout Duration `json:"timeout,omitempty"`
	// Stream streams model calls; their tokens go to the worker's token
	// sink (see Agent.Tokens), when it has one.
	Stream bool `json:"stream,omitempty"`
	// Guardrails check the agent's prompt and its final answer.
	Guardrails *GuardrailPolicy `json:"guardrails,omitempty"`
}

// AgentTool is a tool an agent's model may call: a node type the worker
// runs, with the tool's configuration.
type AgentTool struct {
	// Name is what the model calls it by; Description tells the model
	// what it does.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the tool's arguments (an object).
	Parameters map[string]any `json:"parameters,omitempty"`
	// Type is the node type that runs the tool, Config its configuration.
	// The tool node's state is the call's arguments.
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config,omitempty"`
	// Queue, when set, is the queue whose workers run Type (any
	// language's): the call runs as a child run of that one node, which
	// the coordinator starts (remote.go). Graph, instead of Type, names a
	// subgraph of the graph (in its graphs) that the call runs as a child
	// run, its arguments the child's input, the child's output the result.
	Queue string `json:"queue,omitempty"`
	Graph string `json:"graph,omitempty"`
	// Timeout bounds one run of the tool (default 30s); MaxAttempts the
	// runs of a tool whose failure is retryable (default 1).
	Timeout     Duration `json:"timeout,omitempty"`
	MaxAttempts int      `json:"maxAttempts,omitempty"`
	// Approval "required" makes each call of the tool wait for a
	// person's approval before it runs (approval.go), up to
	// ApprovalTimeout (none when 0): the coordinator decides that wait,
	// from the graph.
	Approval        string   `json:"approval,omitempty"`
	ApprovalTimeout Duration `json:"approvalTimeout,omitempty"`
}

// AgentStep is what the agent records after each step: the conversation
// so far and the budgets spent. It is the data of a node-step event.
type AgentStep struct {
	// Step counts the recorded steps (1-based); Kind is "model" or
	// "tool"; Tool names the tool of a tool step.
	Step int    `json:"step"`
	Kind string `json:"kind"`
	Tool string `json:"tool,omitempty"`
	// Turns is the model calls made, Usage their tokens.
	Turns int   `json:"turns"`
	Usage Usage `json:"usage"`
	// Messages is the conversation, the system and user prompts first.
	Messages []Message `json:"messages"`
	// Warnings are the guardrails' warnings so far.
	Warnings []string `json:"warnings,omitempty"`
	// Awaiting is the id of the tool call the step (kind "await")
	// awaits, AwaitFor what for (events.AwaitApproval or
	// events.AwaitTool), AwaitArgs the call's arguments (a tool's child
	// run's input); Approved lists the calls a person approved.
	Awaiting  string          `json:"awaiting,omitempty"`
	AwaitFor  string          `json:"awaitFor,omitempty"`
	AwaitArgs json.RawMessage `json:"awaitArgs,omitempty"`
	Approved  []string        `json:"approved,omitempty"`
}

// Journal records an agent's steps and gives back the last one. The
// worker's journal (the default) appends each step to the run's log.
type Journal interface {
	// Last returns the last recorded step of the node's activation, or
	// nil when none is.
	Last(ctx context.Context, in *worker.Input) (*AgentStep, error)
	// Record records a step; the loop goes on only once it returns nil.
	Record(ctx context.Context, in *worker.Input, step *AgentStep) error
}

// PublishTokens is the Tokens of the agents Register adds: the worker
// publishes them on the node's token subject (worker.PublishTokens).
func PublishTokens(ctx context.Context, _ *worker.Input, step int, text string) {
	_ = worker.PublishTokens(ctx, step, text) // best effort: the step event holds the message
}

// Agent runs agent nodes.
type Agent struct {
	// Endpoints, Secrets, Client, MaxBody and Limits are as LLM's.
	Endpoints map[string]LLMEndpoint
	Secrets   Secrets
	Client    *http.Client
	MaxBody   int64
	Limits    TemplateLimits
	// Tools looks up the executor of a tool's node type (the worker's
	// registered executors).
	Tools func(nodeType string) (worker.Node, bool)
	// Journal records the steps (default: the run's log).
	Journal Journal
	// Tokens, when set, is given the text of streamed model calls as it
	// arrives, with the number of the step it will be recorded as (the
	// worker publishes it on the node's token subject: PublishTokens).
	Tokens func(ctx context.Context, in *worker.Input, step int, text string)
}

// Execute implements worker.Node.
func (a *Agent) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	cfg, tools, err := a.loadConfig(in)
	if err != nil {
		return nil, err
	}
	ms := &models{Endpoints: a.Endpoints, Secrets: a.Secrets, Client: a.Client, MaxBody: a.MaxBody}
	target, err := ms.resolve(in, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	model := ms.client(target)
	journal := a.journal()
	where := fmt.Sprintf("agent node %q", in.NodeID)

	st, err := a.resume(ctx, in, cfg, journal, where)
	if err != nil {
		return nil, err
	}
	record := recorder(ctx, in, journal, st, where)
	specs := toolSpecs(cfg.Tools)
	timeout := modelTimeout(cfg.Timeout)
	for {
		last := st.Messages[len(st.Messages)-1]
		if last.Role == "assistant" {
			if len(last.ToolCalls) == 0 {
				return a.finish(ctx, in, cfg, st)
			}
		}
		if pending := pendingCalls(st.Messages); len(pending) > 0 {
			if err := a.runPending(ctx, in, cfg, tools, pending, st, record); err != nil {
				return nil, err
			}
			continue
		}
		if err := roomForTurn(cfg, st, where); err != nil {
			return nil, err
		}
		resp, err := a.callModel(ctx, in, cfg, model, specs, timeout, st, where)
		if err != nil {
			return nil, err
		}
		addAnswer(st, resp)
		if err := record("model", ""); err != nil {
			return nil, err
		}
		if len(resp.Message.ToolCalls) == 0 && cfg.MaxTokens > 0 && st.Usage.TotalTokens > cfg.MaxTokens {
			return nil, worker.NonRetryable(FailureAgentTokens, fmt.Sprintf("%s: config: maxTokens: %d tokens spent of %d by turn %d", where, st.Usage.TotalTokens, cfg.MaxTokens, st.Turns))
		}
	}
}

// loadConfig decodes and checks an agent node's configuration, its
// defaults applied; it returns the tools by name too.
func (a *Agent) loadConfig(in *worker.Input) (*AgentConfig, map[string]*compiledTool, error) {
	if bad := checkLLMConfig(in.Config); len(bad) > 0 {
		return nil, nil, configError(in, strings.Join(bad, "; "))
	}
	var cfg AgentConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, nil, err
	}
	tools, err := a.checkConfig(in, &cfg)
	if err != nil {
		return nil, nil, err
	}
	return &cfg, tools, nil
}

// journal is the journal the agent records its steps in: a.Journal, or
// the run's log.
func (a *Agent) journal() Journal {
	if a.Journal == nil {
		return defaultJournal
	}
	return a.Journal
}

// toolSpecs are the tools as the model is told of them.
func toolSpecs(tools []AgentTool) []toolSpec {
	var specs []toolSpec
	for _, t := range tools {
		specs = append(specs, toolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return specs
}

// modelTimeout is how long a model call may take: d, or
// DefaultLLMTimeout when d is 0.
func modelTimeout(d Duration) time.Duration {
	if d == 0 {
		return DefaultLLMTimeout
	}
	return time.Duration(d)
}

// recorder is the function that records st, as it is after each step, as
// step kind (of tool, for a tool's result) in journal; a step that does
// not fit in one event is a non-retryable failure. Kind "" records the
// last step again, as it is (an await that a new delivery of the attempt
// makes again: approval.go).
func recorder(ctx context.Context, in *worker.Input, journal Journal, st *AgentStep, where string) func(kind, tool string) error {
	return func(kind, tool string) error {
		if kind == "" {
			kind, tool = st.Kind, st.Tool
			st.Step--
		}
		st.Step++
		st.Kind, st.Tool = kind, tool
		if err := journal.Record(ctx, in, st); err != nil {
			st.Step--
			if errors.Is(err, events.ErrPayloadTooLarge) {
				// Retrying would pay for the same calls again and fail
				// the same way.
				return worker.NonRetryable(events.FailurePayloadTooLarge, fmt.Sprintf("%s: step %d (%s): the conversation no longer fits in one event (%v); lower maxTurns or maxMessageBytes", where, st.Step+1, kind, err))
			}
			return &worker.Error{Type: FailureAgentCheckpoint, Message: fmt.Sprintf("%s: recording step %d (%s)", where, st.Step+1, kind), Retryable: true, Cause: err}
		}
		return nil
	}
}

// roomForTurn says whether st leaves room for another model call: fewer
// than maxTurns made, and fewer than maxTokens spent when it is set.
func roomForTurn(cfg *AgentConfig, st *AgentStep, where string) error {
	if st.Turns >= cfg.MaxTurns {
		return worker.NonRetryable(FailureAgentTurns, fmt.Sprintf("%s: config: maxTurns: %d model calls made and the model has not given a final answer", where, cfg.MaxTurns))
	}
	if cfg.MaxTokens > 0 && st.Usage.TotalTokens >= cfg.MaxTokens {
		return worker.NonRetryable(FailureAgentTokens, fmt.Sprintf("%s: config: maxTokens: %d tokens spent of %d before turn %d", where, st.Usage.TotalTokens, cfg.MaxTokens, st.Turns+1))
	}
	return nil
}

// resume is the conversation to go on from: the last step journal
// recorded, or, when none is, the first step's (start). A recorded step
// with no conversation in it is a non-retryable failure.
func (a *Agent) resume(ctx context.Context, in *worker.Input, cfg *AgentConfig, journal Journal, where string) (*AgentStep, error) {
	st, err := journal.Last(ctx, in)
	if err != nil {
		return nil, &worker.Error{Type: FailureAgentCheckpoint, Message: where + ": reading its recorded steps", Retryable: true, Cause: err}
	}
	if st != nil && (len(st.Messages) == 0 || st.Step < 1 || st.Turns < 0) {
		// A step this executor did not write (or an older, other shape):
		// going on from it would be guessing.
		return nil, worker.NonRetryable(FailureAgentCheckpoint, fmt.Sprintf("%s: its last recorded step (%d, %q) holds no conversation to go on from", where, st.Step, st.Kind))
	}
	if st == nil {
		return a.start(ctx, in, cfg)
	}
	return st, nil
}

// runPending runs the tool calls of the last answer that have no recorded
// result, in the model's order, each result (its head, if oversized)
// added to st and recorded as a step.
func (a *Agent) runPending(ctx context.Context, in *worker.Input, cfg *AgentConfig, tools map[string]*compiledTool, pending []ToolCall, st *AgentStep, record func(kind, tool string) error) error {
	for _, tc := range pending {
		res, err := a.callTool(ctx, in, tools, tc, st, record)
		if err != nil {
			return err // worker.ErrAwait: the attempt ends, awaiting an approval or a tool's child run
		}
		if err := ctx.Err(); err != nil {
			return err // cut short: not a result to record
		}
		if n := len(res.Content); n > cfg.MaxMessageBytes {
			// The model gets the head of an oversized result and
			// is told so; the conversation stays bounded.
			res.Content = strings.ToValidUTF8(res.Content[:cfg.MaxMessageBytes], "") +
				fmt.Sprintf("\n[truncated: the result is %d bytes, more than maxMessageBytes %d]", n, cfg.MaxMessageBytes)
		}
		st.Messages = append(st.Messages, *res)
		if err := record("tool", tc.Name); err != nil {
			return err
		}
	}
	return nil
}

// callTool is the result of tool call tc: arguments that do not fit the
// tool are an error result at once; a call that needs a person's approval
// awaits it first (approval.go), and a rejection is its result; a tool of
// another queue or a subgraph awaits its child run (remote.go); any other
// runs here. worker.ErrAwait (or a recording's error) ends the attempt.
func (a *Agent) callTool(ctx context.Context, in *worker.Input, tools map[string]*compiledTool, tc ToolCall, st *AgentStep, record func(kind, tool string) error) (*Message, error) {
	t := tools[tc.Name]
	if t == nil {
		res := a.runTool(ctx, in, tools, tc, st.Step+1) // says there is no such tool
		return &res, nil
	}
	args, problem := toolArgs(t, tc)
	if problem != "" {
		return &Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Name, Content: problem, IsError: true}, nil
	}
	if in.Item != nil && (t.remote() || t.Approval == ApprovalRequired) {
		// A map item's attempt cannot end awaiting: its node's other
		// items run on, and the fold keeps no wait per item.
		return nil, worker.NonRetryable(events.FailureValidation, fmt.Sprintf("agent node %q item %d: tool %q runs as a child run or needs approval, which a map item's agent cannot await", in.NodeID, *in.Item, tc.Name))
	}
	if t.Approval == ApprovalRequired && !slices.Contains(st.Approved, tc.ID) {
		rejected, err := approval(in, tc, st, record)
		if err != nil || rejected != nil {
			return rejected, err
		}
	}
	if t.remote() {
		return remoteTool(in, tc, args, st, record)
	}
	res := a.runTool(ctx, in, tools, tc, st.Step+1)
	return &res, nil
}

// callModel makes the next turn's model call on the conversation st,
// streamed to a.Tokens when cfg says so, within timeout; an answer over
// maxMessageBytes is a non-retryable failure.
func (a *Agent) callModel(ctx context.Context, in *worker.Input, cfg *AgentConfig, model chatModel, specs []toolSpec, timeout time.Duration, st *AgentStep, where string) (chatResponse, error) {
	req := chatRequest{
		Model: cfg.Model, Messages: st.Messages, Tools: specs,
		Temperature: cfg.Temperature, MaxTokens: cfg.MaxOutputTokens,
		IdempotencyKey: in.IdempotencyKey + "/step/" + strconv.Itoa(st.Step+1),
	}
	if cfg.Stream && a.Tokens != nil {
		step := st.Step + 1
		req.OnToken = func(s string) { a.Tokens(ctx, in, step, s) }
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := model.chat(cctx, req)
	cancel()
	if err != nil {
		return chatResponse{}, err
	}
	if n := messageSize(resp.Message); n > cfg.MaxMessageBytes {
		return chatResponse{}, worker.NonRetryable(FailureAgentOversized, fmt.Sprintf("%s: turn %d: the model's answer is %d bytes, more than maxMessageBytes %d", where, st.Turns+1, n, cfg.MaxMessageBytes))
	}
	return resp, nil
}

// addAnswer adds the model's answer to st as a turn: its tool calls
// given ids of their own where they need them, its usage counted.
func addAnswer(st *AgentStep, resp chatResponse) {
	st.Turns++
	// Results are matched to calls by id: a call without one, or with
	// one the answer used already (some OpenAI-compatible servers
	// give none), gets its own.
	seen := map[string]bool{}
	for i := range resp.Message.ToolCalls {
		tc := &resp.Message.ToolCalls[i]
		if tc.ID == "" || seen[tc.ID] {
			tc.ID = fmt.Sprintf("weft_call_%d_%d", st.Turns, i+1)
		}
		seen[tc.ID] = true
	}
	st.Usage.PromptTokens += resp.Usage.PromptTokens
	st.Usage.CompletionTokens += resp.Usage.CompletionTokens
	st.Usage.TotalTokens += resp.Usage.TotalTokens
	resp.Message.Role = "assistant"
	st.Messages = append(st.Messages, resp.Message)
}

// start renders the prompts and checks them against the input guardrails:
// the first step's conversation (not recorded until the first answer).
func (a *Agent) start(ctx context.Context, in *worker.Input, cfg *AgentConfig) (*AgentStep, error) {
	data := map[string]any{"state": in.State, "local": in.Local, "invocation": in.Invocation}
	prompt, err := render(ctx, in, "prompt", cfg.Prompt, data, a.Limits)
	if err != nil {
		return nil, err
	}
	st := &AgentStep{}
	if cfg.System != "" {
		system, err := render(ctx, in, "system", cfg.System, data, a.Limits)
		if err != nil {
			return nil, err
		}
		st.Messages = append(st.Messages, Message{Role: "system", Content: system})
	}
	if cfg.Guardrails != nil {
		prompt, err = cfg.Guardrails.check(ctx, in, "input", prompt)
		if err != nil {
			return nil, err
		}
	}
	st.Messages = append(st.Messages, Message{Role: "user", Content: prompt})
	if cfg.Guardrails != nil {
		st.Warnings = cfg.Guardrails.warnings
		cfg.Guardrails.warnings = nil
	}
	return st, nil
}

// finish checks the final answer against the output guardrails and makes
// the node's output.
func (a *Agent) finish(ctx context.Context, in *worker.Input, cfg *AgentConfig, st *AgentStep) (*worker.Result, error) {
	answer := st.Messages[len(st.Messages)-1].Content
	if cfg.Guardrails != nil {
		var err error
		answer, err = cfg.Guardrails.check(ctx, in, "output", answer)
		if err != nil {
			return nil, err
		}
	}
	out := map[string]any{
		"content":  answer,
		"turns":    st.Turns,
		"steps":    st.Step,
		"usage":    st.Usage,
		"messages": st.Messages,
	}
	warnings := st.Warnings
	if cfg.Guardrails != nil {
		warnings = append(warnings, cfg.Guardrails.warnings...)
	}
	if len(warnings) > 0 {
		out["guardrails"] = warnings
	}
	return &worker.Result{Output: out}, nil
}

// pendingCalls are the tool calls of the last assistant message that have
// no result after it yet.
func pendingCalls(msgs []Message) []ToolCall {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role != "assistant" {
		i--
	}
	if i < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[i+1:] {
		answered[m.ToolCallID] = true
	}
	var out []ToolCall
	for _, tc := range msgs[i].ToolCalls {
		if !answered[tc.ID] {
			out = append(out, tc)
		}
	}
	return out
}

// compiledTool is a tool with its schema compiled and its node found.
type compiledTool struct {
	AgentTool
	schema *jsonschema.Schema
	node   worker.Node
}

// checkConfig checks the configuration and applies its defaults; it
// returns the tools by name.
func (a *Agent) checkConfig(in *worker.Input, cfg *AgentConfig) (map[string]*compiledTool, error) {
	var bad []string
	if cfg.Model == "" {
		bad = append(bad, "model: required")
	}
	if strings.TrimSpace(cfg.Prompt) == "" {
		bad = append(bad, "prompt: required")
	}
	switch {
	case cfg.MaxTurns < 0:
		bad = append(bad, "maxTurns: want at least 1")
	case cfg.MaxTurns == 0:
		cfg.MaxTurns = DefaultAgentMaxTurns
	}
	if cfg.MaxTokens < 0 {
		bad = append(bad, "maxTokens: want 0 (no bound) or more")
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultAgentMaxMessageBytes
	}
	tools, toolsBad := a.compileTools(cfg)
	bad = append(bad, toolsBad...)
	if cfg.Guardrails != nil {
		bad = append(bad, cfg.Guardrails.compile()...)
	}
	if len(bad) > 0 {
		return nil, configError(in, strings.Join(bad, "; "))
	}
	return tools, nil
}

// compileTools compiles cfg's tools by name, each with its parameters'
// schema (an object, when it gives none) and the node that runs it; it
// returns them and what is wrong with them.
func (a *Agent) compileTools(cfg *AgentConfig) (map[string]*compiledTool, []string) {
	var bad []string
	tools := map[string]*compiledTool{}
	for i, t := range cfg.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			bad = append(bad, at+".name: required")
			continue
		}
		at = fmt.Sprintf("tools[%d] (%s)", i, t.Name)
		if tools[t.Name] != nil {
			bad = append(bad, at+".name: given twice")
		}
		ct := &compiledTool{AgentTool: t}
		if t.Parameters == nil {
			ct.Parameters = map[string]any{"type": "object"}
			cfg.Tools[i].Parameters = ct.Parameters
		}
		s, err := compileToolSchema(ct.Parameters)
		if err != nil {
			bad = append(bad, at+".parameters: "+err.Error())
		}
		ct.schema = s
		bad = append(bad, checkApproval(t, at)...)
		switch n, ok := a.lookup(t.Type); {
		case t.Queue != "" && t.Graph != "":
			bad = append(bad, at+".graph: a tool runs on a queue or as a subgraph, not both")
		case t.Graph != "" && t.Type != "":
			bad = append(bad, at+".type: a subgraph tool has no type (its graph says what runs)")
		case t.Graph != "":
			// a subgraph, in a child run
		case t.Type == "":
			bad = append(bad, at+".type: required")
		case t.Type == TypeAgent:
			bad = append(bad, at+".type: an agent cannot be a tool")
		case t.Queue != "":
			// run by the queue's workers, in a child run
		case !ok:
			bad = append(bad, fmt.Sprintf("%s.type: %q is not a node type this worker runs (a tool of another queue names it: queue)", at, t.Type))
		default:
			ct.node = n
		}
		tools[t.Name] = ct
	}
	return tools, bad
}

// checkApproval says what is wrong with tool t's approval fields, at at.
func checkApproval(t AgentTool, at string) []string {
	var bad []string
	if t.Approval != "" && t.Approval != ApprovalRequired {
		bad = append(bad, fmt.Sprintf("%s.approval: %q: want %q, or nothing", at, t.Approval, ApprovalRequired))
	}
	if t.ApprovalTimeout < 0 {
		bad = append(bad, at+".approvalTimeout: want 0 (no deadline) or more")
	}
	return bad
}

func (a *Agent) lookup(typ string) (worker.Node, bool) {
	if a.Tools == nil {
		return nil, false
	}
	return a.Tools(typ)
}

func compileToolSchema(params map[string]any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource("tool.json", params); err != nil {
		return nil, err
	}
	return c.Compile("tool.json")
}

// refuseLoader loads no other document: a tool's schema is self-contained.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: a tool's schema may not load other documents", url)
}

// runTool runs one tool call and returns its result message; every
// problem is a result with IsError set, for the model to read.
func (a *Agent) runTool(ctx context.Context, in *worker.Input, tools map[string]*compiledTool, tc ToolCall, step int) Message {
	res := Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Name}
	fail := func(msg string) Message {
		res.Content, res.IsError = msg, true
		return res
	}
	t, ok := tools[tc.Name]
	if !ok {
		return fail(fmt.Sprintf("error: there is no tool %q; the tools are: %s", tc.Name, strings.Join(slices.Sorted(maps.Keys(tools)), ", ")))
	}
	state, problem := toolArgs(t, tc)
	if problem != "" {
		return fail(problem)
	}
	timeout := time.Duration(t.Timeout)
	if timeout == 0 {
		timeout = DefaultToolTimeout
	}
	attempts := max(t.MaxAttempts, 1)
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		tin := &worker.Input{
			RunID: in.RunID, NodeID: in.NodeID + "/" + tc.Name, Type: t.Type,
			Iteration: in.Iteration, Attempt: attempt, Delivery: 1, Item: in.Item,
			Config: t.Config, State: state, Invocation: in.Invocation,
			IdempotencyKey: in.IdempotencyKey + "/step/" + strconv.Itoa(step),
			MaxAttempts:    attempts,
		}
		tctx, cancel := context.WithTimeout(ctx, timeout)
		out, err := t.node.Execute(tctx, tin)
		cancel()
		if err == nil {
			var v any
			if out != nil {
				v = out.Output
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fail(fmt.Sprintf("error: tool %q gave an output that is not JSON: %v", tc.Name, err))
			}
			res.Content = string(b)
			return res
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		var we *worker.Error
		if !errors.As(err, &we) || !we.Retryable {
			break
		}
	}
	return fail(fmt.Sprintf("error: tool %q failed: %v", tc.Name, lastErr))
}

// toolArgs decodes a tool call's arguments (none: {}) and checks them
// against the tool's parameters: the state the tool runs on, or, when
// they are not a JSON object that fits, what the model is told.
func toolArgs(t *compiledTool, tc ToolCall) (map[string]any, string) {
	var args any
	raw := strings.TrimSpace(tc.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		return nil, fmt.Sprintf("error: the arguments of tool %q are not valid JSON: %v", tc.Name, err)
	}
	if err := t.schema.Validate(args); err != nil {
		return nil, fmt.Sprintf("error: the arguments of tool %q do not match its parameters: %v", tc.Name, err)
	}
	state, _ := args.(map[string]any)
	if state == nil {
		return nil, fmt.Sprintf("error: the arguments of tool %q are not a JSON object", tc.Name)
	}
	return state, ""
}

func messageSize(m Message) int {
	n := len(m.Content)
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments) + len(tc.ID)
	}
	return n
}
