package graph_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/graph"
)

// nested returns a JSON graph with depth levels of subgraphs, each
// starting the next: the shape of the graph that ran a coordinator out of
// memory (issue 11).
func nested(depth int) string {
	var b strings.Builder
	var level func(d int)
	level = func(d int) {
		fmt.Fprintf(&b, `{"name":"g%d","nodes":[{"id":"n","type":"echo"}`, d)
		if d < depth {
			fmt.Fprintf(&b, `,{"id":"s","type":"subgraph","config":{"graph":"g%d"}}`, d+1)
		}
		b.WriteString(`],"edges":[{"from":"START","to":"n"}`)
		if d < depth {
			b.WriteString(`,{"from":"n","to":"s"},{"from":"s","to":"END"}],"graphs":{`)
			fmt.Fprintf(&b, `"g%d":`, d+1)
			level(d + 1)
			b.WriteString(`}}`)
			return
		}
		b.WriteString(`,{"from":"n","to":"END"}]}`)
	}
	level(0)
	return b.String()
}

// A subgraph bomb is rejected at once, in little memory, with an error
// that says where. Before the limits, a 125 KB graph of this shape took
// 11 s and 265 MB of allocations to compile, growing as the square of its
// size.
func TestSubgraphBombRejectedQuickly(t *testing.T) {
	src := nested(1500)
	if len(src) < 190<<10 {
		t.Fatalf("bomb of %d bytes, want at least 190 KB", len(src))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := graph.Parse([]byte(src), "bomb.json")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, graph.ErrInvalidGraph) || !strings.Contains(err.Error(), "bomb.json: line 1, column") || !strings.Contains(err.Error(), "nesting deeper than the limit of 64") {
		t.Fatalf("err = %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("rejecting a %d-byte bomb allocated %d bytes", len(src), alloc)
	}
	if took > 2*time.Second {
		t.Errorf("rejecting a %d-byte bomb took %v", len(src), took)
	}
}

func TestGraphLimits(t *testing.T) {
	manyNodes := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"name":"many","nodes":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"id":"n%d","type":"echo"}`, i)
		}
		b.WriteString(`],"edges":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"from":"START","to":"n%d"},{"from":"n%d","to":"END"}`, i, i)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	// fan: graphs g0..g5 side by side, each with ten subgraph nodes
	// starting the next: 10^5 runs from one small file.
	fan := func() string {
		var b strings.Builder
		b.WriteString(`{"name":"fan","nodes":[{"id":"s","type":"subgraph","config":{"graph":"g0"}}],"edges":[{"from":"START","to":"s"},{"from":"s","to":"END"}],"graphs":{`)
		for g := range 6 {
			if g > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"g%d":{"name":"g%d","nodes":[`, g, g)
			for i := range 10 {
				if i > 0 {
					b.WriteString(",")
				}
				if g < 5 {
					fmt.Fprintf(&b, `{"id":"s%d","type":"subgraph","join":"any","config":{"graph":"g%d"}}`, i, g+1)
				} else {
					fmt.Fprintf(&b, `{"id":"s%d","type":"echo","join":"any"}`, i)
				}
			}
			b.WriteString(`],"edges":[`)
			for i := range 10 {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"from":"START","to":"s%d"},{"from":"s%d","to":"END"}`, i, i)
			}
			b.WriteString(`]}`)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	tests := []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"subgraphs nested too deep", nested(graph.MaxSubgraphDepth + 1), []string{`field "graphs"`, "subgraphs nested deeper than the limit of 8"}},
		{"too many nodes", manyNodes(graph.MaxNodes + 1), []string{`field "nodes"`, "1001 nodes, more than the limit of 1000"}},
		{"too many runs through subgraphs", fan(), []string{`graph "g2": node "s9": field "config.graph"`, "more than 10000 nodes through its subgraphs"}},
		{"subgraphs that start each other", `{"name":"loop","nodes":[{"id":"s","type":"subgraph","config":{"graph":"a"}}],
			"edges":[{"from":"START","to":"s"},{"from":"s","to":"END"}],
			"graphs":{"a":{"name":"a","nodes":[{"id":"x","type":"subgraph","config":{"graph":"b"}}],"edges":[{"from":"START","to":"x"},{"from":"x","to":"END"}]},
			          "b":{"name":"b","nodes":[{"id":"y","type":"subgraph","config":{"graph":"a"}}],"edges":[{"from":"START","to":"y"},{"from":"y","to":"END"}]}}}`,
			[]string{"starts itself through its subgraphs"}},
		{"expression too long", `{"name":"long","nodes":[{"id":"a","type":"echo"}],"edges":[{"from":"START","to":"a","when":"` +
			strings.Repeat("true && ", 600) + `true"},{"from":"a","to":"END"}]}`, []string{`edge 1 (START -> a)`, `field "when"`, "longer than the limit of 4096"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graph.Parse([]byte(tc.src), "limits.json")
			if !errors.Is(err, graph.ErrInvalidGraph) {
				t.Fatalf("err = %v, want ErrInvalidGraph", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// At the limits, graphs compile.
	if _, err := graph.Parse([]byte(nested(graph.MaxSubgraphDepth)), "deep.json"); err != nil {
		t.Errorf("graph nested %d deep: %v", graph.MaxSubgraphDepth, err)
	}
	if _, err := graph.Parse([]byte(manyNodes(graph.MaxNodes)), "wide.json"); err != nil {
		t.Errorf("graph of %d nodes: %v", graph.MaxNodes, err)
	}
}
