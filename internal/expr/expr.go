// Package expr is Weft's expression language: CEL over JSON values, shared
// by everything that evaluates an expression (edge conditions, node whens,
// map lists, routers, the transform executor), so that an expression means
// the same wherever it is written.
//
// Expressions see up to five variables, all dynamically typed JSON values:
// state (the run's shared state), input (the same, as a node sees it),
// output (a node's output), invocation (the run's invocation state) and
// local (branch-local data). The CEL standard library is extended with
// strings, math, lists, sets and encoders, and optional types.
//
// Numbers: JSON has one number type and CEL two. Whole numbers arrive as
// CEL ints and others as doubles, so `state.count + 1` counts. Arithmetic
// across int and double is an error: `state.count + 1.0` fails, and so does
// `state.price * 1.2` when the price happens to be whole; write
// `double(state.price) * 1.2` where a value may be either. Comparisons
// across them work (`state.count > 2.5`). Results go back to JSON values:
// ints and doubles become float64, as encoding/json would decode them.
//
// Every evaluation is bounded by a cost limit, so a hostile expression
// cannot hold up the process that evaluates it.
package expr

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// DefaultCostLimit bounds the work of one evaluation: a few operations per
// item over lists of tens of thousands of items; a runaway expression stops
// within about 50ms.
const DefaultCostLimit = 100_000

// MaxSize bounds an expression's length in code points.
const MaxSize = 16 << 10

// Kind is the type an expression must give.
type Kind int

// The kinds an expression can be required to give.
const (
	Any    Kind = iota
	Bool        // conditions
	List        // map lists
	String      // keys (flow control)
	Int         // units (flow control)
	Time        // instants (a wait node's until): a timestamp or an RFC 3339 string
)

var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("state", cel.DynType),
		cel.Variable("input", cel.DynType),
		cel.Variable("output", cel.DynType),
		cel.Variable("invocation", cel.DynType),
		cel.Variable("local", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.ParserExpressionSizeLimit(MaxSize),
		ext.Strings(),
		ext.Math(),
		ext.Lists(),
		ext.Sets(),
		ext.Encoders(),
	)
})

// Program is a compiled expression, safe for concurrent use.
type Program struct {
	src   string
	kind  Kind
	prog  cel.Program
	paths []Path
	// constant is set when the expression reads no variable: its value
	// is known when it is compiled.
	constant bool
}

// Compile parses and type-checks src, requiring it to give kind (checked
// at evaluation when the type is only known then). A cost limit of zero
// means DefaultCostLimit. The error says where in the expression it is.
//
// Size: one case per wanted kind; the rest is the compile's three steps.
func Compile(src string, kind Kind, costLimit uint64) (*Program, error) {
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		var msgs []string
		for _, x := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", x.Location.Line(), x.Location.Column()+1, x.Message))
		}
		return nil, fmt.Errorf("CEL %q: %s", src, strings.Join(msgs, "; "))
	}
	t := ast.OutputType()
	switch {
	case t.Kind() == types.DynKind || t.Kind() == types.AnyKind:
	case kind == Bool && t.Kind() != types.BoolKind:
		return nil, fmt.Errorf("CEL %q: want a bool, expression gives %s", src, t)
	case kind == List && t.Kind() != types.ListKind:
		return nil, fmt.Errorf("CEL %q: want a list, expression gives %s", src, t)
	case kind == String && t.Kind() != types.StringKind:
		return nil, fmt.Errorf("CEL %q: want a string, expression gives %s", src, t)
	case kind == Int && t.Kind() != types.IntKind && t.Kind() != types.UintKind && t.Kind() != types.DoubleKind:
		return nil, fmt.Errorf("CEL %q: want an int, expression gives %s", src, t)
	case kind == Time && t.Kind() != types.TimestampKind && t.Kind() != types.StringKind:
		return nil, fmt.Errorf("CEL %q: want a timestamp or an RFC 3339 string, expression gives %s", src, t)
	}
	if costLimit == 0 {
		costLimit = DefaultCostLimit
	}
	prog, err := e.Program(ast, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, err)
	}
	root := ast.NativeRep().Expr()
	return &Program{src: src, kind: kind, prog: prog, paths: pathsOf(root), constant: !readsVariable(root)}, nil
}

// Constant reports whether the expression reads none of the variables,
// so that evaluating it once, with no variables, gives its only value.
func (p *Program) Constant() bool { return p.constant }

// Source is the expression's text.
func (p *Program) Source() string { return p.src }

// Vars are an evaluation's variables, as plain JSON values (map[string]any,
// []any, float64, string, bool, nil). Absent maps read as empty objects.
type Vars struct {
	State, Output, Invocation, Local any
}

func (v Vars) activation() map[string]any {
	state, inv := v.State, v.Invocation
	if state == nil {
		state = map[string]any{}
	}
	if inv == nil {
		inv = map[string]any{}
	}
	s := Value(state)
	return map[string]any{"state": s, "input": s, "output": Value(v.Output), "invocation": Value(inv), "local": Value(v.Local)}
}

// Eval evaluates the expression and returns its result as a plain JSON value.
func (p *Program) Eval(ctx context.Context, vars Vars) (any, error) {
	v, _, err := p.prog.ContextEval(ctx, vars.activation())
	if err != nil {
		if m := p.missingKey(err); m != err {
			return nil, m
		}
		return nil, fmt.Errorf("CEL %q: %w", p.src, err)
	}
	switch p.kind {
	case Bool:
		b, ok := v.(types.Bool)
		if !ok {
			return nil, fmt.Errorf("CEL %q: want a bool, got %s", p.src, v.Type().TypeName())
		}
		return bool(b), nil
	case List:
		if _, ok := v.(traits.Lister); !ok {
			return nil, fmt.Errorf("CEL %q: want a list, got %s", p.src, v.Type().TypeName())
		}
	case String:
		s, ok := v.(types.String)
		if !ok {
			return nil, fmt.Errorf("CEL %q: want a string, got %s", p.src, v.Type().TypeName())
		}
		return string(s), nil
	case Time:
		switch t := v.(type) {
		case types.String:
			return string(t), nil
		case types.Timestamp:
			return t.Time.UTC().Format(time.RFC3339Nano), nil
		}
		return nil, fmt.Errorf("CEL %q: want a timestamp or an RFC 3339 string, got %s", p.src, v.Type().TypeName())
	}
	out, err := Plain(v)
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", p.src, err)
	}
	return out, nil
}

// EvalBool evaluates a Bool expression.
func (p *Program) EvalBool(ctx context.Context, vars Vars) (bool, error) {
	v, err := p.Eval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("CEL %q: want a bool, got %T", p.src, v)
	}
	return b, nil
}

// EvalList evaluates a List expression.
func (p *Program) EvalList(ctx context.Context, vars Vars) ([]any, error) {
	v, err := p.Eval(ctx, vars)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("CEL %q: want a list, got %T", p.src, v)
	}
	return l, nil
}

// Value prepares a JSON value for CEL: whole numbers become int64.
func Value(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = Value(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = Value(e)
		}
		return out
	}
	return v
}

// Plain converts a CEL value to a plain JSON value; numbers become float64.
//
// Size: one case per CEL value type, each a line or a loop.
func Plain(v ref.Val) (any, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return float64(v), nil
	case types.Uint:
		return float64(v), nil
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
		return Plain(v.GetValue())
	case *types.Err:
		return nil, v
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return nil, fmt.Errorf("list of unknown size")
		}
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			e, err := Plain(v.Get(i))
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
			e, err := Plain(v.Get(k))
			if err != nil {
				return nil, err
			}
			if s, ok := k.(types.String); ok {
				out[string(s)] = e
				continue
			}
			kp, err := Plain(k)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(kp)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s has no JSON form", v.Type().TypeName())
}
