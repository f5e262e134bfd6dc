package builtin

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
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
const transformCostLimit = 1_000_000

var (
	transformEnv = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(
			cel.Variable("state", cel.DynType),
			cel.Variable("input", cel.DynType),
			cel.Variable("local", cel.DynType),
			cel.Variable("invocation", cel.DynType),
			cel.CrossTypeNumericComparisons(true),
			cel.OptionalTypes(),
			cel.ParserExpressionSizeLimit(16<<10),
			ext.Strings(),
			ext.Math(),
			ext.Lists(),
			ext.Sets(),
			ext.Encoders(),
		)
	})
	programs sync.Map // source -> *compiled
)

type compiled struct {
	prog cel.Program
	err  error
}

func program(src string) (cel.Program, error) {
	if c, ok := programs.Load(src); ok {
		return c.(*compiled).prog, c.(*compiled).err
	}
	c := &compiled{}
	env, err := transformEnv()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		c.err = iss.Err()
	} else {
		c.prog, c.err = env.Program(ast, cel.CostLimit(transformCostLimit), cel.EvalOptions(cel.OptOptimize))
	}
	v, _ := programs.LoadOrStore(src, c)
	return v.(*compiled).prog, v.(*compiled).err
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
	keys := make([]string, 0, len(cfg.Set))
	for k := range cfg.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	progs := make(map[string]cel.Program, len(keys)+1)
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
			return nil, err
		}
	}
	if cfg.Output != "" {
		if err := compile("output", cfg.Output); err != nil {
			return nil, err
		}
	}

	state := celValue(in.State)
	vars := map[string]any{"state": state, "input": state, "local": celValue(in.Local), "invocation": celValue(in.Invocation)}
	eval := func(name string) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, _, err := progs[name].ContextEval(ctx, vars)
		if err == nil {
			var out any
			if out, err = plain(v); err == nil {
				return out, nil
			}
		}
		return nil, worker.NonRetryable(FailureEvaluation, fmt.Sprintf("transform node %q: %s: %v", in.NodeID, name, err))
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

// celValue prepares a JSON value for CEL: whole numbers become int64.
func celValue(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = celValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = celValue(e)
		}
		return out
	}
	return v
}

// plain converts a CEL value to a plain JSON Go value.
func plain(v ref.Val) (any, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v has no JSON form", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case types.Timestamp:
		return v.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return v.Duration.String(), nil
	case *types.Optional:
		if !v.HasValue() {
			return nil, nil
		}
		return plain(v.GetValue())
	case *types.Err:
		return nil, v
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return nil, fmt.Errorf("list of unknown size")
		}
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			e, err := plain(v.Get(i))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			e, err := plain(v.Get(k))
			if err != nil {
				return nil, err
			}
			if s, ok := k.(types.String); ok {
				out[string(s)] = e
				continue
			}
			kp, err := plain(k)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(kp)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s has no JSON form", v.Type().TypeName())
}
