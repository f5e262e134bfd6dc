package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestSleepsSayWhy fails for a time.Sleep in a test with no comment on its
// line or in the four lines above it. A test that sleeps either waits for
// something that sends no event (a poll: say what it reads) or lets time
// pass on purpose (a fault's duration, a pace: say so); a sleep that says
// neither is usually a race waiting to fail on a loaded machine.
func TestSleepsSayWhy(t *testing.T) {
	root := filepath.Join("..", "..")
	var bare []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		commented := map[int]bool{}
		for _, g := range f.Comments {
			for _, c := range g.List {
				commented[fset.Position(c.Pos()).Line] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Sleep" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "time" {
				return true
			}
			line := fset.Position(call.Pos()).Line
			for l := line - 4; l <= line; l++ {
				if commented[l] {
					return true
				}
			}
			bare = append(bare, fset.Position(call.Pos()).String())
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bare {
		t.Errorf("%s: time.Sleep with no comment saying what it waits for", b)
	}
}
