package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/weft-dev/weft/"

type listed struct {
	ImportPath string
	Imports    []string
}

// TestImportsRunOneWay lists every package of the module with go list and
// fails for a package with no layer, and for each non-test import that
// crosses the layers the wrong way.
func TestImportsRunOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	cmd := exec.Command("go", "list", "-json", "github.com/weft-dev/weft/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		from := strings.TrimPrefix(p.ImportPath, module)
		lf, ok := For(from)
		if !ok {
			t.Errorf("%s has no layer: add it to layers.Of", from)
			continue
		}
		for _, imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			lt, ok := For(to)
			if !ok {
				continue // reported as its own package
			}
			if msg := check(lf, lt); msg != "" {
				t.Errorf("%s (%s) imports %s (%s): %s", from, lf, to, lt, msg)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list found %d packages; want the whole module", n)
	}
}

// check says what is wrong with a package of layer from importing one of
// layer to, or "" when nothing is.
func check(from, to Layer) string {
	switch {
	case from == Testing:
		return ""
	case to == Testing:
		return "only tests and testing rooms may import a testing room"
	case to > from:
		return "imports run faces → engine → foundations"
	}
	return ""
}

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Layer
		ok   bool
	}{
		{"pkg/events", Foundation, true},
		{"cmd/weft", Face, true},
		{"examples/embedded", Face, true},
		{"internal/worker/builtin", Engine, true},
		{"internal/nosuch", 0, false},
	} {
		got, ok := For(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("For(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
