package graph

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	wexpr "github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/graphrt"
)

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

// DefaultCostLimit bounds the work of one expression evaluation, in CEL cost
// units: a few operations per item over lists of tens of thousands of items.
const DefaultCostLimit = wexpr.DefaultCostLimit

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
	prog *wexpr.Program
	fn   condFn
}

type exprKind = wexpr.Kind

const (
	boolExpr = wexpr.Bool   // conditions and whens: bool (or dyn, checked when evaluated)
	listExpr = wexpr.List   // map.over: a list (or dyn)
	strExpr  = wexpr.String // concurrency keys: a string (or dyn)
	intExpr  = wexpr.Int    // rate units: an int (or dyn)
)

// compileExpr compiles src, resolving "func:NAME" against funcs. The error
// is a message for a located Error.
func compileExpr(src string, kind exprKind, o *options) (*expr, string) {
	if msg := checkExpression(src); msg != "" { // limits.go
		return nil, msg
	}
	if name, ok := strings.CutPrefix(src, funcPrefix); ok {
		if kind != boolExpr {
			return nil, "Go function conditions are not allowed here"
		}
		fn, ok := o.funcs[name]
		if !ok {
			return nil, fmt.Sprintf("no Go condition registered as %q (%s)", name, o.condHint)
		}
		return &expr{src: src, fn: fn}, ""
	}
	prog, err := wexpr.Compile(src, kind, o.costLimit)
	if err != nil {
		return nil, err.Error()
	}
	return &expr{src: src, prog: prog}, ""
}

// vars gives the expression package env's variables.
func vars(e graphrt.Env) wexpr.Vars {
	return wexpr.Vars{State: e.State, Output: e.Output, Invocation: e.Invocation, Local: e.Local}
}

// evalBool evaluates a condition.
func (x *expr) evalBool(env graphrt.Env) (ok bool, err error) {
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
	return x.prog.EvalBool(context.Background(), vars(env))
}

// evalString evaluates a key expression.
func (x *expr) evalString(env graphrt.Env) (string, error) {
	v, err := x.prog.Eval(context.Background(), vars(env))
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("CEL %q: want a string, got %T", x.src, v)
	}
	return s, nil
}

// evalInt evaluates a units expression.
func (x *expr) evalInt(env graphrt.Env) (int64, error) {
	v, err := x.prog.Eval(context.Background(), vars(env))
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case float64:
		if n == float64(int64(n)) {
			return int64(n), nil
		}
	}
	return 0, fmt.Errorf("CEL %q: want an int, got %T", x.src, v)
}

// evalList evaluates a map.over expression to plain Go values.
func (x *expr) evalList(env graphrt.Env) ([]any, error) {
	return x.prog.EvalList(context.Background(), vars(env))
}
