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
	taken, _ := g.EdgeTaken(1, "", graph.Env{Output: map[string]any{"body": "hello"}})
	fmt.Println("fetch -> approve:", taken)
	taken, _ = g.EdgeTaken(2, "reject", graph.Env{})
	fmt.Println("approve -> publish on reject:", taken)
	n, _ := g.Node("publish")
	fmt.Println("publish runs on queue", n.Queue)
	// Output:
	// fetch -> approve: true
	// approve -> publish on reject: false
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
	env := graph.Env{Invocation: map[string]any{"user_tier": "premium"}}
	for _, i := range g.Outgoing(graph.Start) {
		taken, _ := g.EdgeTaken(i, "", env)
		fmt.Printf("START -> %s: %v\n", g.Edge(i).To, taken)
	}
	// Output:
	// premium.yaml: node "standard": field "timeout": malformed duration "3 sec" (want e.g. "250ms", "30s", "1m")
	// START -> premium: true
	// START -> standard: false
}
