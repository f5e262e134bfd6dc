package graph_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/graph"
)

func ExampleNew() {
	g, err := graph.New("review").
		Node("fetch", "http",
			graph.Config(map[string]any{"url": "https://example.com/doc", "method": "GET"}),
			graph.Queue("io"),
			graph.Timeout(30*time.Second),
			graph.OutputAs("page")).
		Node("approve", graph.TypeHuman).
		Node("publish", "echo").
		Edge(graph.Start, "fetch").
		Edge("fetch", "approve", graph.If(`size(output.body) > 0`)).
		Edge("approve", "publish", graph.OnAction("approve")).
		Edge("approve", graph.End, graph.OnAction("reject")).
		Edge("publish", graph.End).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range g.Definition().Edges {
		e := g.Edge(i)
		fmt.Printf("%s -> %s on %q\n", e.From, e.To, e.Action)
	}
	n, _ := g.Node("publish")
	fmt.Println("publish runs on queue", n.Queue)
	// Output:
	// START -> fetch on "default"
	// fetch -> approve on "default"
	// approve -> publish on "approve"
	// approve -> END on "reject"
	// publish -> END on "default"
	// publish runs on queue default
}

func ExampleParse() {
	src := `
name: premium
nodes:
  - {id: premium, type: echo}
  - {id: standard, type: echo, timeout: 3 sec}
edges:
  - {from: START, to: premium, when: 'invocation.user_tier == "premium"'}
  - {from: START, to: standard, when: 'invocation.user_tier != "premium"'}
  - {from: premium, to: END}
  - {from: standard, to: END}
`
	_, err := graph.Parse([]byte(src), "premium.yaml")
	fmt.Println(err)

	g, err := graph.Parse([]byte(strings.Replace(src, "3 sec", "3s", 1)), "premium.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, _ := g.Node("standard")
	fmt.Println("standard times out after", n.Timeout.D())
	for i := range g.Definition().Edges[:2] {
		fmt.Printf("START -> %s when %s\n", g.Edge(i).To, g.Edge(i).Condition)
	}
	// Output:
	// premium.yaml: line 5, column 41: node "standard": field "timeout": malformed duration "3 sec" (want e.g. "250ms", "30s", "1m")
	// standard times out after 3s
	// START -> premium when invocation.user_tier == "premium"
	// START -> standard when invocation.user_tier != "premium"
}
