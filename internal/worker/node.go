package worker

import (
	"context"
	"encoding/json"
)

// Input is what a node execution gets: which node of which run, its
// configuration, and the data it works on. Values decoded from the work item
// are plain JSON Go values (map[string]any, []any, float64, string, bool,
// nil).
type Input struct {
	RunID string
	// NodeID is the node's id in the graph; Type names its executor.
	NodeID string
	Type   string
	// Iteration is the node's activation (1-based; loops activate a node
	// again), Attempt the attempt of that activation (1-based; retries
	// increase it), Delivery how many times this attempt's work item has
	// been delivered (more than 1 after a worker died or handed it back).
	Iteration, Attempt, Delivery int
	// Item is the index of the item of a mapped node, nil otherwise.
	Item *int
	// Config is the node's configuration from the graph, verbatim.
	Config json.RawMessage
	// State is the node's view of the run's shared state.
	State map[string]any
	// Local is branch-local data: the forking data of the actions that led
	// here, or the item of a map.
	Local any
	// Invocation is the run's invocation state: runtime context given when
	// the run started, read-only.
	Invocation map[string]any
	// IdempotencyKey is stable across redeliveries of this attempt; guard
	// side effects with it.
	IdempotencyKey string
	// MaxAttempts is the node's retry limit (0: unknown); Attempt ==
	// MaxAttempts is the last attempt.
	MaxAttempts int
	// Effect is the node's effect class from the graph ("pure", "read",
	// "write", "external", "human"; empty when the graph set none).
	Effect string
	// Resume is, for an attempt that follows one that ended awaiting
	// (RecordAwait, ErrAwait), what came: the data of the signal that
	// answered a tool call's approval. Nil otherwise.
	Resume json.RawMessage
}

// Result is a node's success: its output, the state updates it makes (merged
// by the state's reducers), and the actions it triggers (which label the
// edges the run follows). All values must encode as JSON.
type Result struct {
	Output  any
	Updates map[string]any
	Actions []Action
}

// Action is an action a result triggers, optionally with branch-local data
// for the successors on that branch.
type Action struct {
	Name string
	Data any
}

// Node executes one node of a graph. Execute must honour ctx: it ends when
// the node times out, when its run is cancelled, and when the worker gives up
// on it during shutdown. Return a *Error to control the failure's type and
// whether it is retried.
type Node interface {
	Execute(ctx context.Context, in *Input) (*Result, error)
}

// NodeFunc adapts a function to a Node.
type NodeFunc func(ctx context.Context, in *Input) (*Result, error)

// Execute calls f.
func (f NodeFunc) Execute(ctx context.Context, in *Input) (*Result, error) { return f(ctx, in) }
