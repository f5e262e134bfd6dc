package graph

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
)

const localSrc = `name: t
nodes:
  - {id: auto, type: transform, config: {set: {x: '1'}}}
  - {id: forced, type: transform, local: false, config: {set: {x: '1'}}}
  - {id: queued, type: transform, queue: gpu, config: {set: {x: '1'}}}
  - {id: echo, type: echo}
  - {id: r, type: router}
edges:
  - {from: START, to: auto}
  - {from: auto, to: forced}
  - {from: forced, to: queued}
  - {from: queued, to: echo}
  - {from: echo, to: r}
  - {from: r, to: END}
`

func TestIsLocal(t *testing.T) {
	g, err := Parse([]byte(localSrc), "x.yaml", WithLocalTypes("transform"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"auto": true, "forced": false, "queued": false, "echo": false, "r": false}
	for id, w := range want {
		if got := graphrt.Of(g).IsLocal(id); got != w {
			t.Errorf("IsLocal(%q) = %v, want %v", id, got, w)
		}
	}
	// Without the option, DefaultLocalTypes (transform) are local, as on a
	// stock coordinator; with none named, nothing is. The canonical form
	// is the same: local-ness is the coordinator's.
	plain, err := Parse([]byte(localSrc), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none, err := Parse([]byte(localSrc), "x.yaml", WithLocalTypes())
	if err != nil {
		t.Fatal(err)
	}
	if !graphrt.Of(plain).IsLocal("auto") || graphrt.Of(none).IsLocal("auto") || plain.Digest() != g.Digest() || none.Digest() != g.Digest() {
		t.Fatalf("IsLocal by default %v, with no local types %v; digests %s, %s, %s", graphrt.Of(plain).IsLocal("auto"), graphrt.Of(none).IsLocal("auto"), plain.Digest(), none.Digest(), g.Digest())
	}
	// A graph that never says local: its canonical form has no such field.
	b, err := Parse([]byte(base), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b.Canonical()), `"local"`) {
		t.Fatalf("canonical form %s", b.Canonical())
	}
}

func TestLocalValidation(t *testing.T) {
	tests := []struct {
		name, node, want string
	}{
		{"local true", `{id: a, type: transform, local: true}`, `node "a": field "local": only local: false is a setting`},
		{"router", `{id: a, type: router, local: false}`, `node "a": field "local": a router node is always run by the coordinator`},
		{"human", `{id: a, type: human, local: false}`, `field "local": a human node is always run by the coordinator`},
		{"reserved queue", `{id: a, type: transform, queue: _local}`, `field "queue": queue name "_local" must start with a letter or digit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nnodes: [" + tt.node + "]\nedges: [{from: START, to: a}, {from: a, to: END}]\n"
			_, err := Parse([]byte(src), "x.yaml", WithLocalTypes("transform"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
