package expr

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// Path is a field an expression reads: a variable and the keys under it,
// written as in the expression ("output.approved", "state.user.email").
// Guarded is set when the expression tests it with has(...).
type Path struct {
	Var     string
	Keys    []string
	Guarded bool
}

func (p Path) String() string { return strings.Join(append([]string{p.Var}, p.Keys...), ".") }

// Paths lists the fields the expression reads through field selection
// (a.b) or a constant index (a["b"]), rooted at one of the variables, in
// the order they appear; a path tested with has(...) is marked Guarded.
func (p *Program) Paths() []Path { return p.paths }

var variables = []string{"state", "input", "output", "invocation", "local"}

// pathsOf walks a checked expression for the paths it reads.
func pathsOf(root celast.Expr) []Path {
	var out []Path
	seen := map[string]int{}
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		p, ok := pathAt(e)
		if !ok {
			return
		}
		if e.Kind() == celast.SelectKind && e.AsSelect().IsTestOnly() {
			p.Guarded = true
		}
		k := p.String()
		if i, ok := seen[k]; ok {
			out[i].Guarded = out[i].Guarded || p.Guarded
			return
		}
		seen[k] = len(out)
		out = append(out, p)
	}))
	// A path that is a prefix of a longer one read is read through it.
	return slices.DeleteFunc(out, func(p Path) bool {
		for _, q := range out {
			if len(q.Keys) > len(p.Keys) && q.Var == p.Var && slices.Equal(q.Keys[:len(p.Keys)], p.Keys) {
				return true
			}
		}
		return len(p.Keys) == 0
	})
}

// readsVariable reports whether an expression names one of the variables.
func readsVariable(root celast.Expr) bool {
	found := false
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.IdentKind && slices.Contains(variables, e.AsIdent()) {
			found = true
		}
	}))
	return found
}

// pathAt reads e as a path from a variable, if it is one.
func pathAt(e celast.Expr) (Path, bool) {
	var keys []string
	for {
		switch e.Kind() {
		case celast.IdentKind:
			if !slices.Contains(variables, e.AsIdent()) {
				return Path{}, false
			}
			slices.Reverse(keys)
			return Path{Var: e.AsIdent(), Keys: keys}, true
		case celast.SelectKind:
			s := e.AsSelect()
			keys = append(keys, s.FieldName())
			e = s.Operand()
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != "_[_]" || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
				return Path{}, false
			}
			str, ok := c.Args()[1].AsLiteral().(types.String)
			if !ok {
				return Path{}, false
			}
			keys = append(keys, string(str))
			e = c.Args()[0]
		default:
			return Path{}, false
		}
	}
}

// MissingKeyError is an evaluation that read a key the value does not
// have: Path is the field as the expression names it (best effort: the
// first path read whose last key is Key).
type MissingKeyError struct {
	Src  string
	Path string
	Key  string
}

func (e *MissingKeyError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("CEL %q: no such key %q", e.Src, e.Key)
	}
	return fmt.Sprintf("CEL %q reads %s, which is missing (no key %q)", e.Src, e.Path, e.Key)
}

// Fix says how to write the expression so that it does not fail.
func (e *MissingKeyError) Fix() string {
	if e.Path == "" {
		return "test the key with has(...) first"
	}
	return fmt.Sprintf("write has(%s) && ... to test it first", e.Path)
}

var noSuchKey = regexp.MustCompile(`no such key: (.*)$`)

// missingKey turns CEL's "no such key" into a MissingKeyError naming the
// path.
func (p *Program) missingKey(err error) error {
	m := noSuchKey.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	key := m[1]
	e := &MissingKeyError{Src: p.src, Key: key}
	for _, path := range p.paths {
		if len(path.Keys) > 0 && path.Keys[len(path.Keys)-1] == key {
			e.Path = path.String()
			break
		}
	}
	return e
}

// IsMissingKey reports whether err is an evaluation that read a missing
// key, and returns it.
func IsMissingKey(err error) (*MissingKeyError, bool) {
	var m *MissingKeyError
	ok := errors.As(err, &m)
	return m, ok
}
