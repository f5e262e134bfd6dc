package worker

import (
	"context"
	"errors"
)

// The optional parts of the node contract. A Node may implement any of the
// interfaces below; the worker finds them with type assertions and runs one
// execution in this order:
//
//  1. the worker's invoking filters (they may change the input or cancel);
//  2. the node's input schema (from the graph), then Validator.Validate;
//  3. Skipper.ShouldExecute: false ends the execution as a skip;
//  4. BeforeHook.Before;
//  5. Executor: Preparer.Prep → Executor.Exec → Poster.Post, or else
//     Node.Execute;
//  6. the node's declared outputs and output schema (from the graph);
//  7. AfterHook.After on success; FailedHook.Failed on failure, then, when
//     the failed attempt is the last one, Fallbacker.Fallback;
//  8. the worker's invoked filters (they may replace the result).
//
// A failure anywhere fails the attempt the same way a failure of Execute
// does (see Error), except where a step says otherwise.

// Validator checks a node's input before it runs. Validate must not change
// the input, and should say what is wrong in terms the graph's author can act
// on ("state.email: want an address, got \"\""). Any error it returns fails
// the attempt with a non-retryable "ValidationError": retrying the same input
// gives the same answer.
type Validator interface {
	Validate(in *Input) error
}

// Skipper decides, at run time, whether a node does its work at all. When
// ShouldExecute returns false the node is not run: the worker records a
// NodeInvoked with no output, no updates and no actions, and a filter note
// {Filter: "shouldExecute", Action: "skipped"}, so the flow goes on along
// the node's default edges.
//
// This differs from a graph node's "when" condition, which the coordinator
// evaluates before any work is published and which makes the node skipped
// (its outgoing edges are not taken). ShouldExecute is for decisions only
// code can make (a cache lookup, a feature flag); an error from it fails the
// attempt.
type Skipper interface {
	ShouldExecute(ctx context.Context, in *Input) (bool, error)
}

// Executor is the exec phase of a node split into prep → exec → post. When
// a node implements Executor the worker runs the phases instead of Execute:
//
//   - Prep (optional, Preparer) reads the input and returns what exec needs;
//     without it exec receives the input's State.
//   - Exec receives only prep's result: it is the part that does the work
//     (calls a model, an API) and should be free of reads of the run's
//     state, so that every attempt does the same thing.
//   - Post (optional, Poster) receives the input, prep's and exec's results
//     and returns the Result: output, state updates and actions. Without it
//     exec's result is the output.
//
// Retries are the coordinator's, and durable: each attempt is a new work
// item, and each runs all three phases; exec is what is "retried" in the
// sense that a retryable failure of exec makes another attempt.
type Executor interface {
	Exec(ctx context.Context, prep any) (any, error)
}

// Preparer is the optional prep phase of an Executor.
type Preparer interface {
	Prep(ctx context.Context, in *Input) (any, error)
}

// Poster is the optional post phase of an Executor.
type Poster interface {
	Post(ctx context.Context, in *Input, prep, exec any) (*Result, error)
}

// BeforeHook runs before the node executes (after validation and
// should-execute). An error fails the attempt and the node does not run.
type BeforeHook interface {
	Before(ctx context.Context, in *Input) error
}

// AfterHook runs after the node succeeded, with its result (which it may
// change). An error fails the attempt.
type AfterHook interface {
	After(ctx context.Context, in *Input, res *Result) error
}

// FailedHook runs after every failed attempt of the node, with the error
// the attempt fails with; it cannot change the outcome. It is not called
// when the worker gives the node up (drain, lost heartbeat) or its run is
// cancelled: those are not failures of the node.
type FailedHook interface {
	Failed(ctx context.Context, in *Input, err error)
}

// Fallbacker gives a node's result after its last attempt failed, so that
// the flow continues. The attempt is the last when its failure is not
// retryable, or when Input.Attempt reached Input.MaxAttempts. If Fallback
// returns a result the worker records it as the node's success, a
// NodeInvoked with Fallback set; if it returns an error the attempt's
// failure stands. Fallback runs on a context detached from the attempt's (a
// timed-out attempt has a spent context) and bounded by the node's timeout,
// or by DefaultFallbackTimeout.
//
// A graph node may also name a static fallback output; the coordinator uses
// that one only when the worker recorded a failure.
type Fallbacker interface {
	Fallback(ctx context.Context, in *Input, err error) (*Result, error)
}

// Phases adapts prep, exec and post functions to a Node; Prep and Post may
// be nil (see Executor).
type Phases struct {
	Prep func(ctx context.Context, in *Input) (any, error)
	Exec func(ctx context.Context, prep any) (any, error)
	Post func(ctx context.Context, in *Input, prep, exec any) (*Result, error)
}

// Execute runs the phases; see RunPhases.
func (p Phases) Execute(ctx context.Context, in *Input) (*Result, error) {
	return RunPhases(ctx, phasesNode{p}, in)
}

// phasesNode gives Phases the phase interfaces without exporting methods
// that would clash with the fields.
type phasesNode struct{ p Phases }

func (n phasesNode) Prep(ctx context.Context, in *Input) (any, error) {
	if n.p.Prep == nil {
		return in.State, nil
	}
	return n.p.Prep(ctx, in)
}

func (n phasesNode) Exec(ctx context.Context, prep any) (any, error) {
	if n.p.Exec == nil {
		return nil, errors.New("phases: no exec function")
	}
	return n.p.Exec(ctx, prep)
}

func (n phasesNode) Post(ctx context.Context, in *Input, prep, exec any) (*Result, error) {
	if n.p.Post == nil {
		return &Result{Output: exec}, nil
	}
	return n.p.Post(ctx, in, prep, exec)
}

// RunPhases runs an Executor's phases for in: Prep if x implements
// Preparer (else the input's State is exec's argument), Exec, and Post if x
// implements Poster (else exec's result is the output). The worker calls it
// for every node that implements Executor; a type that implements Executor
// can satisfy Node with an Execute that calls it.
func RunPhases(ctx context.Context, x Executor, in *Input) (*Result, error) {
	var prep any = in.State
	if p, ok := x.(Preparer); ok {
		var err error
		if prep, err = p.Prep(ctx, in); err != nil {
			return nil, err
		}
	}
	out, err := x.Exec(ctx, prep)
	if err != nil {
		return nil, err
	}
	if p, ok := x.(Poster); ok {
		return p.Post(ctx, in, prep, out)
	}
	return &Result{Output: out}, nil
}
