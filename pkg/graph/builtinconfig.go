package graph

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	wexpr "github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/nodeconfig"
)

// The configs of the built-in node types, field for field as their
// executors decode them (package builtin's EchoConfig, SleepConfig, …; a
// test there holds the two equal) and as the coordinator reads human and
// subgraph configs. Router configs are checked by validateRouter.
type (
	echoConfig struct {
		Output  json.RawMessage   `json:"output"`
		Updates map[string]any    `json:"updates"`
		Actions []json.RawMessage `json:"actions"`
	}
	noopConfig  struct{}
	sleepConfig struct {
		Duration execDuration `json:"duration"`
	}
	failConfig struct {
		Message      string `json:"message"`
		Type         string `json:"type"`
		Retryable    *bool  `json:"retryable"`
		FailAttempts int    `json:"failAttempts"`
	}
	httpConfig struct {
		URL          string            `json:"url"`
		Method       string            `json:"method"`
		Headers      map[string]string `json:"headers"`
		Body         any               `json:"body"`
		Timeout      execDuration      `json:"timeout"`
		ExpectStatus []int             `json:"expectStatus"`
	}
	transformConfig struct {
		Set    map[string]string `json:"set"`
		Output string            `json:"output"`
	}
	llmConfig struct {
		Endpoint    string       `json:"endpoint"`
		Model       string       `json:"model"`
		Temperature *float64     `json:"temperature"`
		MaxTokens   int          `json:"max_tokens"`
		System      string       `json:"system"`
		Prompt      string       `json:"prompt"`
		Timeout     execDuration `json:"timeout"`
		// Guardrails are checked by the executor (package builtin).
		Guardrails json.RawMessage `json:"guardrails"`
	}
	// agentConfig is package builtin's AgentConfig, as far as a graph
	// can be checked without the worker (its endpoints, its node types).
	agentConfig struct {
		Endpoint        string            `json:"endpoint"`
		Model           string            `json:"model"`
		System          string            `json:"system"`
		Prompt          string            `json:"prompt"`
		Tools           []agentToolConfig `json:"tools"`
		MaxTurns        int               `json:"maxTurns"`
		MaxTokens       int               `json:"maxTokens"`
		MaxOutputTokens int               `json:"maxOutputTokens"`
		Temperature     *float64          `json:"temperature"`
		MaxMessageBytes int               `json:"maxMessageBytes"`
		Timeout         execDuration      `json:"timeout"`
		Stream          bool              `json:"stream"`
		Guardrails      json.RawMessage   `json:"guardrails"`
	}
	agentToolConfig struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Type        string          `json:"type"`
		Config      json.RawMessage `json:"config"`
		Timeout     execDuration    `json:"timeout"`
		MaxAttempts int             `json:"maxAttempts"`
		// Approval "required": each call waits for a person's approval
		// (a signal), up to ApprovalTimeout when it is set.
		Approval        string   `json:"approval"`
		ApprovalTimeout Duration `json:"approvalTimeout"`
		// Queue: Type runs on that queue's workers, in a child run;
		// Graph: the tool is a subgraph (validateToolGraphs), no Type.
		Queue string `json:"queue"`
		Graph string `json:"graph"`
	}
	humanConfig struct {
		Timeout Duration      `json:"timeout"`
		Checks  []SignalCheck `json:"checks"`
	}
	subgraphConfig struct {
		Graph string `json:"graph"`
	}
)

// configCheck checks one built-in type's decoded config; failed names the
// fields that did not decode, so that their zero values are not blamed
// twice.
type configCheck struct {
	config func() any
	check  func(cfg any, failed map[string]bool, o *options, bad badFunc)
}

type badFunc = func(field, format string, args ...any)

var configChecks = map[string]configCheck{
	"echo":       {func() any { return &echoConfig{} }, checkEcho},
	"noop":       {func() any { return &noopConfig{} }, nil},
	"sleep":      {func() any { return &sleepConfig{} }, nil},
	"fail":       {func() any { return &failConfig{} }, checkFail},
	"http":       {func() any { return &httpConfig{} }, checkHTTP},
	"transform":  {func() any { return &transformConfig{} }, checkTransform},
	"llm":        {func() any { return &llmConfig{} }, checkLLM},
	"agent":      {func() any { return &agentConfig{} }, checkAgent},
	TypeHuman:    {func() any { return &humanConfig{} }, nil},
	TypeSubgraph: {func() any { return &subgraphConfig{} }, nil}, // config.graph: validateSubgraphRef
	TypeWait:     {func() any { return &waitConfig{} }, checkWait},
}

// validateExecutorConfig checks, at load, the config of a node of a
// built-in type as its executor would check it only when a run reaches the
// node: the config is an object, every field is known and of its type,
// required fields are there, CEL compiles, templates parse, durations,
// URLs, methods, headers and statuses are well formed, and no secret is
// written where events would copy it. Types registered by users are their
// executors' to check.
func validateExecutorConfig(n *Node, o *options, bad badFunc) {
	c, ok := configChecks[n.Type]
	if !ok {
		return
	}
	m := map[string]json.RawMessage{}
	if len(n.Config) > 0 && !isNull(n.Config) {
		if m, ok = asObject(n.Config); !ok {
			bad("config", "want an object, got %s", kindOf(n.Config))
			return
		}
	}
	if n.Type == "llm" || n.Type == "agent" {
		removedLLMFields(m, bad)
	}
	failed := map[string]bool{}
	report := func(field, msg string) {
		failed[strings.TrimPrefix(field, "config.")] = true
		bad(field, "%s", msg)
	}
	var skip []string
	if n.Type == TypeSubgraph {
		skip = []string{"graph"}
	}
	cfg := c.config()
	decodeFields(m, reflect.ValueOf(cfg).Elem(), "config.", report, skip...)
	if c.check != nil {
		c.check(cfg, failed, o, bad)
	}
	if n.Type == TypeHuman && !failed["checks"] {
		checkHumanAccept(n, bad)
	}
}

// execDuration is a duration as the built-in executors read it: a Go
// duration string or a number of milliseconds, not negative.
type execDuration time.Duration

func (d *execDuration) UnmarshalJSON(b []byte) error {
	x, err := nodeconfig.ParseDuration(b)
	*d = execDuration(x)
	return err
}

func checkEcho(c any, _ map[string]bool, _ *options, bad badFunc) {
	cfg := c.(*echoConfig)
	for i, raw := range cfg.Actions {
		field := fmt.Sprintf("config.actions[%d]", i)
		var name string
		if json.Unmarshal(raw, &name) == nil {
			continue
		}
		m, ok := asObject(raw)
		if !ok {
			bad(field, `want an action name or {"name": NAME, "data": VALUE}, got %s`, kindOf(raw))
			continue
		}
		var a struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}
		failed := false
		decodeFields(m, reflect.ValueOf(&a).Elem(), field+".", func(f, msg string) { failed = true; bad(f, "%s", msg) })
		if a.Name == "" && !failed {
			bad(field+".name", "missing action name")
		}
	}
}

func checkFail(c any, _ map[string]bool, _ *options, bad badFunc) {
	if cfg := c.(*failConfig); cfg.FailAttempts < 0 {
		bad("config.failAttempts", "must not be negative, got %d", cfg.FailAttempts)
	}
}

func checkTransform(c any, failed map[string]bool, o *options, bad badFunc) {
	cfg := c.(*transformConfig)
	if len(cfg.Set) == 0 && cfg.Output == "" && !failed["set"] && !failed["output"] {
		bad("config", `a transform needs "set" (CEL per state key) or "output" (CEL)`)
	}
	for _, k := range sortedKeys(cfg.Set) {
		if _, err := wexpr.Compile(cfg.Set[k], wexpr.Any, o.costLimit); err != nil {
			bad("config.set."+k, "%v", err)
		}
	}
	if cfg.Output != "" {
		if _, err := wexpr.Compile(cfg.Output, wexpr.Any, o.costLimit); err != nil {
			bad("config.output", "%v", err)
		}
	}
}

func checkLLM(c any, failed map[string]bool, _ *options, bad badFunc) {
	cfg := c.(*llmConfig)
	if cfg.Model == "" && !failed["model"] {
		bad("config.model", "missing model")
	}
	if strings.TrimSpace(cfg.Prompt) == "" && !failed["prompt"] {
		bad("config.prompt", `missing prompt (a Go template over .state, .local and .invocation, e.g. "Summarise: {{.state.text}}")`)
	} else if _, err := nodeconfig.ParseTemplate("prompt", cfg.Prompt); err != nil {
		bad("config.prompt", "template: %v", err)
	}
	if cfg.System != "" {
		if _, err := nodeconfig.ParseTemplate("system", cfg.System); err != nil {
			bad("config.system", "template: %v", err)
		}
	}
	if cfg.MaxTokens < 0 {
		bad("config.max_tokens", "must not be negative, got %d", cfg.MaxTokens)
	}
}

func checkAgent(c any, failed map[string]bool, _ *options, bad badFunc) {
	cfg := c.(*agentConfig)
	if cfg.Model == "" && !failed["model"] {
		bad("config.model", "missing model")
	}
	if strings.TrimSpace(cfg.Prompt) == "" && !failed["prompt"] {
		bad("config.prompt", `missing prompt (a Go template over .state, .local and .invocation, e.g. "Research {{.state.topic}}")`)
	} else if _, err := nodeconfig.ParseTemplate("prompt", cfg.Prompt); err != nil {
		bad("config.prompt", "template: %v", err)
	}
	if cfg.System != "" {
		if _, err := nodeconfig.ParseTemplate("system", cfg.System); err != nil {
			bad("config.system", "template: %v", err)
		}
	}
	if cfg.MaxTurns < 0 {
		bad("config.maxTurns", "want at least 1 (0: the default, 8), got %d", cfg.MaxTurns)
	}
	if cfg.MaxTokens < 0 {
		bad("config.maxTokens", "want 0 (no bound) or more, got %d", cfg.MaxTokens)
	}
	checkAgentTools(cfg.Tools, bad)
}

// checkAgentTools checks an agent's config.tools: each named once, run by
// a node type that can be a tool, its parameters a JSON Schema object.
func checkAgentTools(tools []agentToolConfig, bad badFunc) {
	seen := map[string]bool{}
	for i, t := range tools {
		at := fmt.Sprintf("config.tools[%d]", i)
		switch {
		case t.Name == "":
			bad(at+".name", "missing name")
		case seen[t.Name]:
			bad(at+".name", "tool %q given twice", t.Name)
		}
		seen[t.Name] = true
		checkToolPlace(t, at, bad)
		switch t.Type {
		case "":
			if t.Graph == "" {
				bad(at+".type", "missing type (the node type that runs the tool), or graph (a subgraph that runs it)")
			}
		case "agent", TypeHuman, TypeSubgraph:
			bad(at+".type", "%s: a node of this type cannot be a tool", t.Type)
		}
		if t.Approval != "" && t.Approval != "required" {
			bad(at+".approval", "%q: want \"required\" (each call waits for a person's approval), or nothing", t.Approval)
		}
		if t.ApprovalTimeout < 0 {
			bad(at+".approvalTimeout", "want a positive duration (the deadline of a call's approval), or nothing")
		}
		if len(t.Parameters) > 0 && !isNull(t.Parameters) {
			if _, ok := asObject(t.Parameters); !ok {
				bad(at+".parameters", "want a JSON Schema object, got %s", kindOf(t.Parameters))
			}
		}
	}
}

// checkToolPlace checks where an agent's tool runs: its queue, a queue
// name; its graph, with no type and no queue (validateToolGraphs finds
// the graph).
func checkToolPlace(t agentToolConfig, at string, bad badFunc) {
	switch {
	case t.Queue != "" && t.Graph != "":
		bad(at+".graph", "a tool runs on a queue (queue) or as a subgraph (graph), not both")
	case t.Graph != "" && t.Type != "":
		bad(at+".type", "a subgraph tool has no type: graph %q says what runs", t.Graph)
	case t.Queue != "" && !tokenPattern.MatchString(t.Queue):
		bad(at+".queue", "queue name %q must start with a letter or digit and hold only letters, digits, '_' and '-'", t.Queue)
	case len(t.Queue) > MaxQueueLen:
		bad(at+".queue", "queue name is %d characters, the limit is %d (it is a subject token)", len(t.Queue), MaxQueueLen)
	}
}

// awaitsApproval reports whether n is an agent node with a tool marked
// `approval: required`: it may wait for a person as a human node does,
// and so may have timeout edges.
func awaitsApproval(n *Node) bool {
	if n.Type != "agent" {
		return false
	}
	var cfg struct {
		Tools []agentToolConfig `json:"tools"`
	}
	_ = json.Unmarshal(n.Config, &cfg) // its errors are checkAgent's to report
	for _, t := range cfg.Tools {
		if t.Approval == "required" {
			return true
		}
	}
	return false
}

// llmEndpointHint says how a graph picks an llm endpoint instead.
const llmEndpointHint = `name an endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`

// removedLLMFields reports and drops the fields by which a graph once
// chose the llm URL or key: they belong to the worker (package builtin's
// llm executor says the same at run time).
func removedLLMFields(m map[string]json.RawMessage, bad badFunc) {
	for _, k := range sortedKeys(m) {
		switch strings.ToLower(k) {
		case "baseurl", "url":
			bad("config."+k, "a graph does not choose the llm URL: %s", llmEndpointHint)
		case "apikeyenv", "apikey":
			bad("config."+k, "a graph does not choose the llm API key: it belongs to the endpoint; %s", llmEndpointHint)
		default:
			continue
		}
		delete(m, k)
	}
}

// httpToken is an HTTP method or header name (RFC 9110 token).
var httpToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func checkHTTP(c any, failed map[string]bool, _ *options, bad badFunc) {
	cfg := c.(*httpConfig)
	if !failed["url"] {
		checkURL(cfg.URL, bad)
	}
	if cfg.Method != "" && !httpToken.MatchString(cfg.Method) {
		bad("config.method", "%q is not an HTTP method (GET, POST, PUT, …)", cfg.Method)
	}
	for _, h := range sortedKeys(cfg.Headers) {
		checkHeader(h, cfg.Headers[h], bad)
	}
	for i, s := range cfg.ExpectStatus {
		if s < 100 || s > 599 {
			bad(fmt.Sprintf("config.expectStatus[%d]", i), "%d is not an HTTP status (100-599)", s)
		}
	}
}

// checkURL checks an http node's URL as the executor would.
func checkURL(raw string, bad badFunc) {
	switch u, err := url.Parse(raw); {
	case raw == "":
		bad("config.url", "missing url (an absolute http or https URL)")
	case err == nil && u.User != nil:
		bad("config.url", "%s holds credentials (user:password@): a graph must not hold secrets, since events copy it; send them in a header that references a secret configured on the worker, e.g. \"Authorization\": \"Basic ${secret:NAME}\"", u.Redacted())
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad("config.url", "%q is not an absolute http or https URL", raw)
	case nodeconfig.HasSecretRef(raw):
		bad("config.url", "secret references are allowed in header values only")
	}
}

func checkHeader(h, v string, bad badFunc) {
	field := "config.headers." + h
	if !httpToken.MatchString(h) {
		bad(field, "%q is not a header name", h)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		bad(field, "a header value must not hold line breaks or NUL")
	}
	for _, p := range nodeconfig.HeaderProblems(h, v, nil) {
		bad(field, "%s", p)
	}
}
