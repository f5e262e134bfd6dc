package logattr_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestLogKeysAreConstants fails when a log call of Weft's code (pkg/,
// internal/, cmd/; tests aside) gives an attribute key that is not one of
// this package's constants: a string literal, or a constant of another
// value. Calls are found by type, so a method that is not slog's (a
// Backoff.Warn) is not taken for one.
func TestLogKeysAreConstants(t *testing.T) {
	mod := loadModule(t)
	keys := mod.logattrKeys(t)
	var bad []string
	for _, p := range mod.checkedTargets(t) {
		for _, f := range p.files {
			bad = append(bad, badKeys(mod.fset, f, p.info, keys)...)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a log key that is not an internal/logattr constant; add one there and use it", b)
	}
}

// TestMetricNamesAreConstants fails when an OpenTelemetry instrument is
// made with a name that is not a constant of internal/telemetry's
// metrics.go, where every metric Weft records is named.
func TestMetricNamesAreConstants(t *testing.T) {
	mod := loadModule(t)
	found := 0
	for _, p := range mod.checkedTargets(t) {
		info := p.info
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isInstrument(info, call) || len(call.Args) == 0 {
					return true
				}
				found++
				name := call.Args[0]
				var id *ast.Ident
				switch e := ast.Unparen(name).(type) {
				case *ast.Ident:
					id = e
				case *ast.SelectorExpr:
					id = e.Sel
				}
				c, ok := info.Uses[id].(*types.Const)
				if id == nil || !ok || filepath.Base(mod.fset.Position(c.Pos()).Filename) != "metrics.go" ||
					c.Pkg().Path() != "github.com/weft-dev/weft/internal/telemetry" {
					t.Errorf("%s: metric name %s is not a constant of internal/telemetry/metrics.go; name it there", mod.fset.Position(name.Pos()), types.ExprString(name))
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Error("found no instrument made: the check no longer sees them")
	}
}

// isInstrument reports whether call makes an instrument of an
// OpenTelemetry metric.Meter (Int64Counter, Float64Histogram, …).
func isInstrument(info *types.Info, call *ast.CallExpr) bool {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return false
	}
	s := info.Selections[sel]
	if s == nil {
		return false
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "go.opentelemetry.io/otel/metric" {
		return false
	}
	for _, kind := range []string{"Counter", "Histogram", "Gauge"} {
		if strings.HasSuffix(fn.Name(), kind) {
			return true
		}
	}
	return false
}

// TestLogKeysCheckFinds makes sure the check of TestLogKeysAreConstants
// finds what it is for: literal keys, in every position a key takes.
func TestLogKeysCheckFinds(t *testing.T) {
	mod := loadModule(t)
	keys := mod.logattrKeys(t)
	src := `package x

import (
	"context"
	"log/slog"

	"github.com/weft-dev/weft/internal/logattr"
)

const local = "local_key"

func f(ctx context.Context, log *slog.Logger, args []any) {
	log.Info("ok", logattr.RunID, 1, slog.String(logattr.NodeID, "n"), logattr.Error, nil)
	log.InfoContext(ctx, "ok", logattr.RunID, 1)
	log.LogAttrs(ctx, slog.LevelInfo, "ok", slog.Int(logattr.Seq, 1))
	log.Info("ok", args...)
	log.Warn("bad1", "run", 1)
	log.WarnContext(ctx, "bad2", logattr.RunID, 1, "bad2", 2)
	slog.Error("bad3", slog.Any("bad3", 1))
	_ = log.With(local, 1)
	_ = slog.Attr{Key: "bad5"}
	_ = slog.Group("bad6", logattr.RunID, 1, "bad7", 2)
	log.Log(ctx, slog.LevelInfo, "bad8", "bad8", 1)
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	files, info, err := mod.check("x", dir, []string{"x.go"})
	if err != nil {
		t.Fatal(err)
	}
	got := badKeys(mod.fset, files[0], info, keys)
	if len(got) != 8 {
		t.Fatalf("the check found %d bad keys, want 8 (bad1…bad8):\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, g := range got {
		if strings.Contains(g, "logattr.") {
			t.Errorf("the check flagged a good key: %s", g)
		}
	}
}

// module is Weft's packages as `go list` sees them, with the compiled
// export data of every package they import.
type module struct {
	fset    *token.FileSet
	exports map[string]string // import path → export data file
	targets []pkg
	imp     types.Importer

	checkOnce sync.Once
	checked   []checkedPkg
	checkErr  error
}

type pkg struct {
	path, dir string
	files     []string
}

// checkedPkg is a target package parsed and type-checked.
type checkedPkg struct {
	files []*ast.File
	info  *types.Info
}

// The module is listed (go list -export, which builds it) and its packages
// type-checked once for all the tests of this file.
var (
	listOnce sync.Once
	listed   *module
	listErr  error
)

func loadModule(t *testing.T) *module {
	t.Helper()
	listOnce.Do(func() { listed, listErr = listModule() })
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

// checkedTargets is every target package, type-checked.
func (m *module) checkedTargets(t *testing.T) []checkedPkg {
	t.Helper()
	m.checkOnce.Do(func() {
		for _, p := range m.targets {
			files, info, err := m.check(p.path, p.dir, p.files)
			if err != nil {
				m.checkErr = err
				return
			}
			m.checked = append(m.checked, checkedPkg{files, info})
		}
	})
	if m.checkErr != nil {
		t.Fatal(m.checkErr)
	}
	return m.checked
}

func listModule() (*module, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-export", "-deps",
		"-f", "{{.ImportPath}}\t{{.Export}}\t{{.DepOnly}}\t{{.Dir}}\t{{join .GoFiles \",\"}}",
		"./pkg/...", "./internal/...", "./cmd/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	m := &module{fset: token.NewFileSet(), exports: map[string]string{}}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		m.exports[f[0]] = f[1]
		if f[2] == "false" && f[4] != "" {
			m.targets = append(m.targets, pkg{path: f[0], dir: f[3], files: strings.Split(f[4], ",")})
		}
	}
	m.imp = importer.ForCompiler(m.fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := m.exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	return m, nil
}

// check parses and type-checks one package's files.
func (m *module) check(path, dir string, names []string) ([]*ast.File, *types.Info, error) {
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(m.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: m.imp}
	if _, err := conf.Check(path, m.fset, files, info); err != nil {
		return nil, nil, fmt.Errorf("type-checking %s: %w", path, err)
	}
	return files, info, nil
}

// logattrKeys is the values of this package's exported string constants.
func (m *module) logattrKeys(t *testing.T) map[string]bool {
	t.Helper()
	p, err := m.imp.Import("github.com/weft-dev/weft/internal/logattr")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, name := range p.Scope().Names() {
		if c, ok := p.Scope().Lookup(name).(*types.Const); ok && c.Exported() && c.Val().Kind() == constant.String {
			keys[constant.StringVal(c.Val())] = true
		}
	}
	if len(keys) == 0 {
		t.Fatal("internal/logattr has no string constants")
	}
	return keys
}

// Where log/slog's calls take keys: the index of their first key-value
// argument, and whether their first argument is itself a key.
var (
	slogMethods = map[string]int{
		"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
		"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
		"Log": 3, "With": 0,
	}
	slogKeyFirst = map[string]bool{
		"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true,
		"Bool": true, "Time": true, "Duration": true, "Any": true, "Group": true,
		"GroupAttrs": true, "WithGroup": true,
	}
)

// badKeys lists the keys in f's slog calls that are not logattr's.
func badKeys(fset *token.FileSet, f *ast.File, info *types.Info, keys map[string]bool) []string {
	var bad []string
	checkKey := func(e ast.Expr) {
		tv := info.Types[e]
		_, literal := ast.Unparen(e).(*ast.BasicLit)
		if literal || tv.Value == nil || tv.Value.Kind() != constant.String || !keys[constant.StringVal(tv.Value)] {
			bad = append(bad, fmt.Sprintf("%s: %s", fset.Position(e.Pos()), types.ExprString(e)))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if isAttr(info.Types[n].Type) {
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && types.ExprString(kv.Key) == "Key" {
						checkKey(kv.Value)
					}
				}
			}
		case *ast.CallExpr:
			fn := slogFunc(info, n)
			if fn == nil {
				return true
			}
			name := fn.Name()
			if slogKeyFirst[name] && len(n.Args) > 0 {
				checkKey(n.Args[0])
			}
			start, ok := slogMethods[name]
			if name == "Group" {
				start, ok = 1, true
			}
			if !ok {
				return true
			}
			for i := start; i < len(n.Args); i++ {
				if n.Ellipsis.IsValid() && i == len(n.Args)-1 {
					break // args...: checked where they are made
				}
				if isAttr(info.Types[n.Args[i]].Type) {
					continue // an Attr takes one place
				}
				checkKey(n.Args[i])
				i++ // its value
			}
		}
		return true
	})
	return bad
}

// slogFunc is the log/slog function or method a call calls, if it does.
func slogFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	var obj types.Object
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		if sel := info.Selections[fun]; sel != nil {
			obj = sel.Obj()
		} else {
			obj = info.Uses[fun.Sel]
		}
	case *ast.Ident:
		obj = info.Uses[fun]
	}
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "log/slog" {
		return nil
	}
	if recv := fn.Signature().Recv(); recv != nil && !isNamed(recv.Type(), "Logger") {
		return nil // a Handler's, a Value's, …
	}
	return fn
}

func isAttr(t types.Type) bool { return isNamed(t, "Attr") }

// isNamed reports whether t is log/slog's type name, or a pointer to it.
func isNamed(t types.Type, name string) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "log/slog" && n.Obj().Name() == name
}
