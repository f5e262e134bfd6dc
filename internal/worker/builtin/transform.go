package builtin

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// FailureEvaluation is the failure type of a transform expression that
// compiles but fails when evaluated (a missing key, a type mismatch, the
// cost limit).
const FailureEvaluation = "EvaluationError"

// TransformConfig configures transform: CEL expressions per state key, and
// optionally one for the output.
type TransformConfig struct {
	Set    map[string]string `json:"set,omitempty"`
	Output string            `json:"output,omitempty"`
}

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
type Transform struct{}

// transformCostLimit bounds the work of one evaluation (roughly one unit per
// operation), so that no expression can keep a worker busy.
// transformCostLimit bounds one expression of a transform: a worker can
// afford more than a coordinator.
const transformCostLimit = 1_000_000

// programs caches compiled expressions by source.
var programs sync.Map // source -> *compiled

type compiled struct {
	prog *expr.Program
	err  error
}

func program(src string) (*expr.Program, error) {
	if c, ok := programs.Load(src); ok {
		return c.(*compiled).prog, c.(*compiled).err
	}
	p, err := expr.Compile(src, expr.Any, transformCostLimit)
	c, _ := programs.LoadOrStore(src, &compiled{prog: p, err: err})
	return c.(*compiled).prog, c.(*compiled).err
}

// Execute implements worker.Node.
func (Transform) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg TransformConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Set) == 0 && cfg.Output == "" {
		return nil, configError(in, `want "set" or "output"`)
	}
	keys, progs, err := compileTransform(in, &cfg)
	if err != nil {
		return nil, err
	}

	vars := expr.Vars{State: in.State, Local: in.Local, Invocation: in.Invocation}
	eval := func(name string) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, err := progs[name].Eval(ctx, vars)
		if err != nil {
			return nil, worker.NonRetryable(FailureEvaluation, fmt.Sprintf("transform node %q: %s: %v", in.NodeID, name, err))
		}
		return out, nil
	}
	updates := make(map[string]any, len(keys))
	for _, k := range keys {
		v, err := eval("set." + k)
		if err != nil {
			return nil, err
		}
		updates[k] = v
	}
	res := &worker.Result{Output: updates}
	if len(updates) > 0 {
		res.Updates = updates
	}
	if cfg.Output != "" {
		v, err := eval("output")
		if err != nil {
			return nil, err
		}
		res.Output = v
	}
	return res, nil
}

// compileTransform compiles cfg's programs, set's in the order of its
// sorted keys and then output, keyed "set.KEY" and "output"; it returns
// the sorted keys too. A program that does not compile is a non-retryable
// validation failure.
func compileTransform(in *worker.Input, cfg *TransformConfig) ([]string, map[string]*expr.Program, error) {
	keys := make([]string, 0, len(cfg.Set))
	for k := range cfg.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	progs := make(map[string]*expr.Program, len(keys)+1)
	compile := func(name, src string) error {
		p, err := program(src)
		if err != nil {
			return worker.NonRetryable(events.FailureValidation, fmt.Sprintf("transform node %q: %s: CEL %q: %v", in.NodeID, name, src, err))
		}
		progs[name] = p
		return nil
	}
	for _, k := range keys {
		if err := compile("set."+k, cfg.Set[k]); err != nil {
			return nil, nil, err
		}
	}
	if cfg.Output != "" {
		if err := compile("output", cfg.Output); err != nil {
			return nil, nil, err
		}
	}
	return keys, progs, nil
}
