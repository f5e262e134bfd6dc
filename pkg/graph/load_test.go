package graph

import (
	"os"
	"path/filepath"
	"testing"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		if g, err := Parse(data, file); err == nil {
			f.Add(g.Canonical())
		}
	}
	f.Add([]byte(equivYAML))
	f.Add([]byte(equivJSON))
	f.Add([]byte("{name: t, nodes: [{id: a, type: echo, join: 2}], edges: [{from: START, to: a}]}"))
	f.Add([]byte("a: &a [*a, *a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		// A valid graph's canonical form is valid and a fixed point.
		again, err := Parse(g.Canonical(), "canonical")
		if err != nil {
			t.Fatalf("canonical form invalid: %v\n%s", err, g.Canonical())
		}
		if again.Digest() != g.Digest() {
			t.Fatalf("canonical form not a fixed point:\n%s\n%s", g.Canonical(), again.Canonical())
		}
	})
}
