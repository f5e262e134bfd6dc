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

// creators are the jetstream methods that make or change a resource.
var creators = map[string]bool{
	"CreateStream": true, "CreateOrUpdateStream": true, "UpdateStream": true,
	"CreateConsumer": true, "CreateOrUpdateConsumer": true, "UpdateConsumer": true,
	"CreateKeyValue": true, "CreateOrUpdateKeyValue": true, "UpdateKeyValue": true,
	"CreateObjectStore": true, "CreateOrUpdateObjectStore": true, "UpdateObjectStore": true,
	"CreatePushConsumer": true, "CreateOrUpdatePushConsumer": true,
}

// TestResourcesAreMadeInSetup fails for a call that makes or changes a
// JetStream resource outside internal/setup (the one place that does) and
// outside tests and the benchmark's raw floor (internal/bench, which
// measures JetStream without Weft).
func TestResourcesAreMadeInSetup(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && path != root && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") || rel == "internal/setup" || rel == "internal/bench") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && creators[sel.Sel.Name] {
					if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "setup" {
						t.Errorf("%s: %s outside internal/setup", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
