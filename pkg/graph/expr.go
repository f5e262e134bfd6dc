package graph

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// Env is what expressions see. Its values are plain JSON-decoded Go values:
// map[string]any, []any, float64, string, bool and nil.
type Env struct {
	State      map[string]any // the run's shared state
	Output     any            // the output of the node whose edges are evaluated (or the predecessor's, for when and map.over)
	Invocation map[string]any // the run's invocation state, read-only
	Local      any            // branch-local data: the forking data of an action, or the item of a map
}

// StateCondition is a Go condition over the shared state, referenced from an
// edge or a when as "func:NAME".
type StateCondition func(state map[string]any) bool

// InvocationCondition is a Go condition over the shared state and the
// invocation state, referenced as "func:NAME".
type InvocationCondition func(state, invocation map[string]any) bool

// ConditionFunc is satisfied by the two forms of Go condition.
type ConditionFunc interface {
	~func(state map[string]any) bool | ~func(state, invocation map[string]any) bool
}

// funcPrefix marks a condition resolved by a registered Go function.
const funcPrefix = "func:"

// DefaultCostLimit bounds the work of one evaluation, so that no expression
// (nested comprehensions over large lists, say) can keep a coordinator
// busy. One unit is roughly one operation; the default allows a few
// operations per item over lists of tens of thousands of items and stops a
// runaway expression within about 50ms. WithCostLimit changes it.
const DefaultCostLimit = 100_000

// maxExprSize bounds an expression's length in code points.
const maxExprSize = 16 << 10

// celEnv is shared by all graphs; a cel.Env is safe for concurrent use.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("state", cel.DynType),
		cel.Variable("output", cel.DynType),
		cel.Variable("invocation", cel.DynType),
		cel.Variable("local", cel.DynType),
		// JSON numbers arrive as doubles; literals in expressions are ints.
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.ParserExpressionSizeLimit(maxExprSize),
		ext.Strings(),
		ext.Math(),
		ext.Lists(),
		ext.Sets(),
		ext.Encoders(),
	)
})

// condFn is a Go condition in its general form.
type condFn func(state, invocation map[string]any) bool

// toCondFn accepts a StateCondition, an InvocationCondition, or any function
// value convertible to one.
func toCondFn(v any) (condFn, bool) {
	switch f := v.(type) {
	case StateCondition:
		if f != nil {
			return func(s, _ map[string]any) bool { return f(s) }, true
		}
	case InvocationCondition:
		if f != nil {
			return condFn(f), true
		}
	case func(map[string]any) bool:
		return toCondFn(StateCondition(f))
	case func(map[string]any, map[string]any) bool:
		return toCondFn(InvocationCondition(f))
	default:
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || rv.Kind() != reflect.Func || rv.IsNil() {
			return nil, false
		}
		for _, t := range []reflect.Type{reflect.TypeFor[StateCondition](), reflect.TypeFor[InvocationCondition]()} {
			if rv.Type().ConvertibleTo(t) {
				return toCondFn(rv.Convert(t).Interface())
			}
		}
	}
	return nil, false
}

// expr is a compiled condition: a CEL program or a Go function.
type expr struct {
	src  string
	prog cel.Program
	fn   condFn
}

type exprKind int

const (
	boolExpr exprKind = iota // conditions and whens: bool (or dyn, checked when evaluated)
	listExpr                 // map.over: a list (or dyn)
)

// compileExpr compiles src, resolving "func:NAME" against funcs. The error
// is a message for a located Error.
func compileExpr(src string, kind exprKind, o *options) (*expr, string) {
	if name, ok := strings.CutPrefix(src, funcPrefix); ok {
		if kind != boolExpr {
			return nil, "Go function conditions are not allowed here"
		}
		fn, ok := o.funcs[name]
		if !ok {
			return nil, fmt.Sprintf("no Go condition registered as %q (register it with the builder's IfFunc or WithConditions)", name)
		}
		return &expr{src: src, fn: fn}, ""
	}
	env, err := celEnv()
	if err != nil {
		return nil, "CEL environment: " + err.Error()
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
		}
		return nil, fmt.Sprintf("CEL %q: %s", src, strings.Join(msgs, "; "))
	}
	t := ast.OutputType()
	switch {
	case t.Kind() == types.DynKind || t.Kind() == types.AnyKind:
	case kind == boolExpr && t.Kind() != types.BoolKind:
		return nil, fmt.Sprintf("CEL %q: want a bool, expression gives %s", src, t)
	case kind == listExpr && t.Kind() != types.ListKind:
		return nil, fmt.Sprintf("CEL %q: want a list, expression gives %s", src, t)
	}
	prog, err := env.Program(ast, cel.CostLimit(o.costLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Sprintf("CEL %q: %v", src, err)
	}
	return &expr{src: src, prog: prog}, ""
}

func (e Env) activation() map[string]any {
	state, inv := e.State, e.Invocation
	if state == nil {
		state = map[string]any{}
	}
	if inv == nil {
		inv = map[string]any{}
	}
	return map[string]any{"state": state, "output": e.Output, "invocation": inv, "local": e.Local}
}

// evalBool evaluates a condition.
func (x *expr) evalBool(env Env) (ok bool, err error) {
	if x.fn != nil {
		defer func() {
			if r := recover(); r != nil {
				ok, err = false, fmt.Errorf("%s panicked: %v", x.src, r)
			}
		}()
		state, inv := env.State, env.Invocation
		if state == nil {
			state = map[string]any{}
		}
		if inv == nil {
			inv = map[string]any{}
		}
		return x.fn(state, inv), nil
	}
	v, err := x.eval(env)
	if err != nil {
		return false, err
	}
	b, isBool := v.(types.Bool)
	if !isBool {
		return false, fmt.Errorf("CEL %q: want a bool, got %s", x.src, v.Type().TypeName())
	}
	return bool(b), nil
}

// evalList evaluates a map.over expression to plain Go values.
func (x *expr) evalList(env Env) ([]any, error) {
	v, err := x.eval(env)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(traits.Lister); !ok {
		return nil, fmt.Errorf("CEL %q: want a list, got %s", x.src, v.Type().TypeName())
	}
	items, err := plain(v)
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", x.src, err)
	}
	return items.([]any), nil
}

func (x *expr) eval(env Env) (ref.Val, error) {
	v, _, err := x.prog.Eval(env.activation())
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", x.src, err)
	}
	return v, nil
}

// plain converts a CEL value to a plain JSON-like Go value. Numbers become
// float64, as if the value had gone through encoding/json.
func plain(v ref.Val) (any, error) {
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
		return float64(v), nil
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
			val, err := plain(v.Get(k))
			if err != nil {
				return nil, err
			}
			ks, ok := k.(types.String)
			if !ok {
				kp, err := plain(k)
				if err != nil {
					return nil, err
				}
				out[fmt.Sprint(kp)] = val
				continue
			}
			out[string(ks)] = val
		}
		return out, nil
	}
	return nil, fmt.Errorf("value of type %s has no JSON form", v.Type().TypeName())
}
