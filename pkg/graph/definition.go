package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The virtual nodes every graph starts from and ends at. They are never
// executed; edges from START mark the entry points and edges to END mark
// where the run may finish. An edge to CONTINUE ends the run too, and
// starts its continuation (continue-as-new: see ContinueSpec).
const (
	Start    = "START"
	End      = "END"
	Continue = "CONTINUE"
)

// DefaultQueue is the task queue a node is put on when it names none.
const DefaultQueue = "default"

// DefaultAction is the action a node triggers when its result names none.
// An edge without an action label matches it.
const DefaultAction = "default"

// Node types the coordinator runs itself, without a worker.
const (
	TypeRouter   = "router"   // chooses actions from the state; pure
	TypeHuman    = "human"    // waits for a signal
	TypeSubgraph = "subgraph" // starts a child run and waits for it
	// TypeWait waits for a duration or until a time on a durable timer,
	// holding no worker (the built-in sleep executor, by contrast, waits
	// inside a worker).
	TypeWait = "wait"
)

// Definition is a workflow graph as it is written in a YAML or JSON file and
// recorded in a run's run-started event. Its JSON form is the canonical one:
// Canonical gives the bytes whose digest identifies the graph.
type Definition struct {
	Name        string            `json:"name"`
	Version     string            `json:"version,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// State declares the shared state's reducers per key.
	State StateSpec `json:"state,omitzero"`
	// MaxIterations caps how often any one node may be activated in a run
	// (cycles). Zero means DefaultMaxIterations.
	MaxIterations int    `json:"maxIterations,omitempty"`
	Nodes         []Node `json:"nodes"`
	Edges         []Edge `json:"edges"`
	// Graphs holds subgraph definitions by name, referenced by subgraph nodes.
	Graphs map[string]*Definition `json:"graphs,omitempty"`
	// Retention is how long a run of the graph is kept once it ended (a
	// Go duration; empty: the coordinator's default). See package runs.
	Retention string `json:"retention,omitempty"`
	// SearchAttributes names the keys of a run's invocation state (else
	// its input) that the read model of runs records, for 'weft list
	// -attr'. At most MaxSearchAttributes.
	SearchAttributes []string `json:"searchAttributes,omitempty"`
	// ContinueAsNew says how the run continues as new: when an edge to
	// CONTINUE is taken, or (OnHistoryBudget) when its history nears its
	// budget.
	ContinueAsNew *ContinueSpec `json:"continueAsNew,omitempty"`
	// Concurrency limits the graph's runs in progress at once, per key,
	// across every coordinator (internal/flow has the design): a run
	// takes a slot before its first node, and gives it back when it ends,
	// however it ends.
	Concurrency *RunConcurrency `json:"concurrency,omitempty"`
	// Limits puts a concurrency or rate limit on every node of a type, or
	// on a queue, of this graph (not of its subgraphs, which declare
	// their own): shared across graphs by name, "type/<type>" or
	// "queue/<queue>" unless the limit names another.
	Limits *Limits `json:"limits,omitempty"`
}

// Limits are the limits a graph puts on its nodes by type and by queue.
// A node's own concurrency or rate replaces them; a node under both a
// type's and a queue's limit is refused at load. At load each node they
// apply to is given them as its own (the canonical form records them
// there), so a node takes one limit, as it does without them.
type Limits struct {
	Types  map[string]NodeLimits `json:"types,omitempty"`
	Queues map[string]NodeLimits `json:"queues,omitempty"`
}

// NodeLimits is a concurrency or a rate limit (one of the two, yet) for
// every node of a type or on a queue.
type NodeLimits struct {
	Concurrency *ConcurrencyLimit `json:"concurrency,omitempty"`
	Rate        *RateLimit        `json:"rate,omitempty"`
}

// RunConcurrency is a graph's limit on its runs in progress by key: at
// most Max runs of one key hold a slot at once. A run over the limit
// waits before its first node (Strategy RunQueue), is cancelled at once
// (RunCancelNewest), or has the oldest run holding a slot of its key
// cancelled and takes the slot it frees (RunCancelOldest).
type RunConcurrency struct {
	// Max is how many runs of one key may be in progress at once (1 to
	// MaxConcurrency).
	Max int `json:"max"`
	// Key is a CEL expression giving a string, over the run's input (as
	// state, alias input) and invocation; for example invocation.tenant.
	// Empty: one key for the whole limit.
	Key string `json:"key,omitempty"`
	// Name names the limit; graphs that give the same name share its
	// slots. Empty: the graph's name.
	Name string `json:"name,omitempty"`
	// Strategy is what a run over the limit does: RunQueue (the
	// default), RunCancelNewest or RunCancelOldest.
	Strategy string `json:"strategy,omitempty"`
}

// The strategies of a run limit.
const (
	RunQueue        = "queue"
	RunCancelNewest = "cancel-newest"
	RunCancelOldest = "cancel-oldest"
)

// RunLimitName is the name of graph g's run limit: its own, else the
// graph's name (which, having no '/', is never a node limit's default).
func RunLimitName(g *Definition) string {
	if g.Concurrency != nil && g.Concurrency.Name != "" {
		return g.Concurrency.Name
	}
	return g.Name
}

// RunStrategy is the strategy of graph g's run limit, RunQueue when it
// names none.
func RunStrategy(g *Definition) string {
	if g.Concurrency == nil || g.Concurrency.Strategy == "" {
		return RunQueue
	}
	return g.Concurrency.Strategy
}

// ContinueSpec configures continue-as-new. A run continues as new when an
// edge to CONTINUE was taken (a condition over state, or a node's action)
// and the run has come to rest, as END needs: it completes, its
// completion naming its continuation, and the continuation starts from
// START with the run's shared state as its input and the same invocation
// state. Every link of the chain shares the chain id (its first run's id);
// each names the run it continues. What must survive a link is what is in
// the state: pending joins, buffered signals and node outputs are not
// carried.
type ContinueSpec struct {
	// Graph names a graph of Graphs the continuation runs (a newer
	// version shipped with this one); empty: this graph.
	Graph string `json:"graph,omitempty"`
	// OnHistoryBudget makes the end of the history budget (the
	// coordinator's, 100,000 events or 64 MiB by default) continue the run
	// as new instead of failing it: from 90% of the budget on, the run
	// starts no new activation, and once at rest it continues as new. A
	// run that cannot come to rest (a node waiting for a signal) before
	// the budget's end fails as without it.
	OnHistoryBudget bool `json:"onHistoryBudget,omitempty"`
	// MaxStateBytes bounds the state a continuation carries (its JSON);
	// zero: DefaultMaxContinueStateBytes. A continuation over it fails
	// the run, naming the node and edge that asked for it.
	MaxStateBytes int `json:"maxStateBytes,omitempty"`
}

// DefaultMaxContinueStateBytes is the most state a continuation carries
// when ContinueSpec.MaxStateBytes is not set: well under the default NATS
// max_payload (1 MiB), which the continuation's start (its graph and the
// state) must fit in.
const DefaultMaxContinueStateBytes = 512 << 10

// MaxStateBytesOf is the state limit of spec (nil: the default).
func (c *ContinueSpec) MaxStateBytesOf() int {
	if c == nil || c.MaxStateBytes <= 0 {
		return DefaultMaxContinueStateBytes
	}
	return c.MaxStateBytes
}

// MaxSearchAttributes is the most search attributes a graph may declare.
const MaxSearchAttributes = 8

// DefaultMaxIterations is the per-node activation cap when a graph sets none.
const DefaultMaxIterations = 100

// StateSpec configures the shared state.
type StateSpec struct {
	// Reducers maps a state key to the reducer that merges updates into it.
	// Keys not listed use Replace.
	Reducers map[string]Reducer `json:"reducers,omitempty"`
}

// Reducer names how updates to one state key are merged.
type Reducer string

// The reducers. Updates are applied in log order, so parallel writers
// resolve deterministically.
const (
	Replace Reducer = "replace" // the last write wins
	Append  Reducer = "append"  // the value is a list; updates are appended (a list update is appended element by element)
	Merge   Reducer = "merge"   // the value is an object; updates are merged key by key, shallowly
	Sum     Reducer = "sum"     // the value is a number; updates are added
)

// Node is one step of a graph.
type Node struct {
	ID          string            `json:"id"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// Type names the executor that runs the node (for example "echo",
	// "http", "transform") or one of the coordinator's own types.
	Type string `json:"type"`
	// Queue is the task queue workers pull the node's work from. A queue
	// other than DefaultQueue keeps the node on workers even when its
	// type is local to the coordinator (see WithLocalTypes).
	Queue string `json:"queue,omitempty"`
	// Local false forces the node onto a worker queue when its type is
	// local to the coordinator (see WithLocalTypes). It can only be false: a
	// node runs locally by its type, not by asking.
	Local *bool `json:"local,omitempty"`
	// Config is the executor's configuration, passed to it verbatim.
	Config json.RawMessage `json:"config,omitempty"`

	Inputs       []string        `json:"inputs,omitempty"`  // state keys the node reads; empty means all
	Outputs      []string        `json:"outputs,omitempty"` // state keys the node may write; empty means any
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// OutputAs promotes the node's output into the run's artifacts under this key.
	OutputAs string `json:"outputAs,omitempty"`

	// When is a condition (CEL) that must hold for the node to execute;
	// when false the node is skipped and its successors see a skip.
	When string `json:"when,omitempty"`
	// Join says how many incoming forward edges must be taken before the
	// node runs: "all" (default), "any", or a number n for n-of.
	Join Join `json:"join,omitzero"`
	// Map makes the node run once per item of a list (dynamic fan-out).
	Map *MapSpec `json:"map,omitempty"`

	Retry         *RetryPolicy `json:"retry,omitempty"`
	Timeout       Duration     `json:"timeout,omitempty"`
	Heartbeat     Duration     `json:"heartbeat,omitempty"`
	MaxIterations int          `json:"maxIterations,omitempty"`
	Effect        Effect       `json:"effect,omitempty"`
	Checkpoint    Checkpoint   `json:"checkpoint,omitempty"`
	// Fallback is the output used when the last attempt failed, letting the
	// flow continue instead of failing the run.
	Fallback json.RawMessage `json:"fallback,omitempty"`
	// Concurrency limits how many attempts of the node run at once, across
	// every run and coordinator, per key (internal/flow has the design).
	Concurrency *ConcurrencyLimit `json:"concurrency,omitempty"`
	// Rate limits how often attempts of the node start, across every run
	// and coordinator, per key (internal/flow has the design).
	Rate *RateLimit `json:"rate,omitempty"`
}

// RateLimit is a node's rate limit by key: at most Limit units start per
// Per, spaced evenly (GCRA; a burst of up to Limit after a quiet spell).
// An attempt over the rate waits, recorded in the log, until its turn.
type RateLimit struct {
	// Limit is how many units may start per Per (1 to MaxRate).
	Limit int `json:"limit"`
	// Per is the window (at least a millisecond).
	Per Duration `json:"per"`
	// Key is a CEL expression giving a string, over state, invocation and
	// local, as a concurrency key is. Empty: one key for the whole limit.
	Key string `json:"key,omitempty"`
	// Units is a CEL expression giving how many units an attempt takes
	// (an int from 1 to Limit), for example a request's estimated
	// tokens. Empty: 1.
	Units string `json:"units,omitempty"`
	// Name names the limit; nodes that give the same name share it.
	// Empty: "<graph>/<node>".
	Name string `json:"name,omitempty"`
}

// MaxRate is the largest limit of a rate limit.
const MaxRate = 1_000_000

// RateName is the name of node n's rate limit in graph g.
func RateName(g *Definition, n *Node) string {
	if n.Rate != nil && n.Rate.Name != "" {
		return n.Rate.Name
	}
	return g.Name + "/" + n.ID
}

// ConcurrencyLimit is a node's concurrency limit by key: at most Max
// attempts hold a slot of one key at once; the others wait, first come
// first served, recorded in the log as waiting for a slot.
type ConcurrencyLimit struct {
	// Max is how many attempts of one key may run at once (1 to
	// MaxConcurrency).
	Max int `json:"max"`
	// Key is a CEL expression giving a string, over state (alias input),
	// invocation and local (a map item, the forking data); for example
	// invocation.tenant. Empty: one key for the whole limit.
	Key string `json:"key,omitempty"`
	// Name names the limit; nodes of any graph that give the same name
	// share its slots. Empty: "<graph>/<node>".
	Name string `json:"name,omitempty"`
}

// MaxConcurrency is the largest max of a concurrency limit.
const MaxConcurrency = 1000

// MaxLimitNameLen is the longest name of a limit.
const MaxLimitNameLen = 256

// LimitName is the name of node n's concurrency limit in graph g: its
// own, else "<graph>/<node>".
func LimitName(g *Definition, n *Node) string {
	if n.Concurrency != nil && n.Concurrency.Name != "" {
		return n.Concurrency.Name
	}
	return g.Name + "/" + n.ID
}

// Edge connects two nodes. It is taken when its source triggers Action (or
// the default action when Action is empty) and Condition holds.
type Edge struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Action    string `json:"action,omitempty"`
	Condition string `json:"when,omitempty"`
	// Timeout marks the edge a human node takes when its deadline passes.
	Timeout bool `json:"timeout,omitempty"`
	// OnMissing says what a condition that reads a missing key means:
	// OnMissingFail (the default) fails the run with an error that names
	// the field and the fix, OnMissingFalse makes the condition false.
	OnMissing string `json:"onMissing,omitempty"`
}

// What an edge's condition that reads a missing key means (Edge.OnMissing).
const (
	OnMissingFail  = "fail"
	OnMissingFalse = "false"
)

// MapSpec describes a dynamic fan-out: one execution per item.
type MapSpec struct {
	// Over is a CEL expression giving the list, over state, output of the
	// predecessor (as output), invocation and local.
	Over string `json:"over"`
	// Concurrency caps how many items run at once; zero means no cap.
	Concurrency int `json:"concurrency,omitempty"`
}

// RetryPolicy says how a failing node is retried. Zero fields take the
// defaults documented on DefaultRetryPolicy.
type RetryPolicy struct {
	MaxAttempts        int      `json:"maxAttempts,omitempty"`
	InitialInterval    Duration `json:"initialInterval,omitempty"`
	BackoffCoefficient float64  `json:"backoffCoefficient,omitempty"`
	MaxInterval        Duration `json:"maxInterval,omitempty"`
	// Jitter is the fraction (0..1) of each interval that is randomised,
	// deterministically from the attempt's idempotency key. Unset (nil)
	// means the default; 0 means no jitter (JitterOf(0) in Go).
	Jitter             *float64 `json:"jitter,omitempty"`
	NonRetryableErrors []string `json:"nonRetryableErrors,omitempty"`
}

// DefaultRetryPolicy is used for nodes that set no policy: three attempts,
// one second apart at first, doubling, at most a minute apart, 20% jitter.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:        3,
	InitialInterval:    Duration(time.Second),
	BackoffCoefficient: 2,
	MaxInterval:        Duration(time.Minute),
	Jitter:             JitterOf(0.2),
}

// JitterOf is a RetryPolicy's Jitter of fraction f (0 for none).
func JitterOf(f float64) *float64 { return &f }

// Effect classifies what running a node does to the world. It decides what
// may be retried or replayed freely: pure and read nodes always; write and
// external nodes only with their idempotency key honoured; human nodes never
// re-ask.
type Effect string

// The effect classes.
const (
	EffectPure     Effect = "pure"
	EffectRead     Effect = "read"
	EffectWrite    Effect = "write"
	EffectExternal Effect = "external"
	EffectHuman    Effect = "human"
)

// Checkpoint says when a snapshot of the run's projection is stored around a node.
type Checkpoint string

// The checkpoint policies.
const (
	CheckpointNone   Checkpoint = "none"
	CheckpointBefore Checkpoint = "before"
	CheckpointAfter  Checkpoint = "after"
	CheckpointBoth   Checkpoint = "both"
)

// Join is a node's join policy over its incoming forward edges. Its JSON form
// is "all", "any" or a positive number n (n-of).
type Join struct {
	Kind JoinKind
	N    int // for JoinN
}

// JoinKind is the kind of a join.
type JoinKind string

// The join kinds.
const (
	JoinAll JoinKind = "all"
	JoinAny JoinKind = "any"
	JoinN   JoinKind = "n"
)

// MarshalJSON writes "all", "any" or n; the zero Join is written as "".
func (j Join) MarshalJSON() ([]byte, error) {
	switch j.Kind {
	case JoinN:
		return json.Marshal(j.N)
	default:
		return json.Marshal(string(j.Kind))
	}
}

// UnmarshalJSON reads "all", "any", a number, or "n-of" forms like "2".
func (j *Join) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 1 {
			return fmt.Errorf("n-of needs n ≥ 1, got %d", n)
		}
		*j = Join{Kind: JoinN, N: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want \"all\", \"any\" or a number, got %s", b)
	}
	switch JoinKind(strings.ToLower(s)) {
	case "":
		*j = Join{}
	case JoinAll:
		*j = Join{Kind: JoinAll}
	case JoinAny:
		*j = Join{Kind: JoinAny}
	default:
		return fmt.Errorf("want \"all\", \"any\" or a number, got %q", s)
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("1.5s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "250ms" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\", got %s", b)
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("malformed duration %q (want e.g. \"250ms\", \"30s\", \"1m\")", s)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
