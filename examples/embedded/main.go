// Command embedded is Weft inside a program of its own, in a module of its
// own: a graph built in Go with both kinds of Go condition, a node type of
// the program's, and the engine (coordinator, worker, embedded NATS) in the
// same process. Run it with `go run .` in this directory.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// score is this program's node type: it scores an order's amount.
func score(_ context.Context, in *worker.Input) (*worker.Result, error) {
	amount, _ := in.State["amount"].(float64)
	return &worker.Result{Updates: map[string]any{"score": amount * 2}}, nil
}

// big is a condition over the state; vip one over the state and the
// invocation state.
func big(state map[string]any) bool {
	v, _ := state["score"].(float64)
	return v > 10
}

func vip(_, invocation map[string]any) bool { return invocation["tier"] == "vip" }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	b := graph.New("orders").
		Node("score", "score").
		Node("review", "echo").
		Node("ship", "echo").
		Edge(graph.Start, "score").
		Edge("score", "review", graph.IfFunc("big", big)).
		Edge("score", "ship", graph.IfFunc("notbig", func(s map[string]any) bool { return !big(s) })).
		Edge("review", "ship", graph.IfFunc("vip", vip)).
		Edge("review", graph.End, graph.IfFunc("notvip", func(s, inv map[string]any) bool { return !vip(s, inv) })).
		Edge("ship", graph.End)
	g, err := b.Build(graph.WithTypes("score"))
	if err != nil {
		return err
	}

	eng, err := weft.Start(ctx,
		weft.Embedded(""), // a temporary store; weft.WithNATS(nc) in production
		weft.WithNode("score", worker.NodeFunc(score)),
		weft.WithConditions(b.Conditions()))
	if err != nil {
		return err
	}
	defer eng.Stop()

	orders := []struct {
		amount float64
		tier   string
	}{{3, "regular"}, {40, "regular"}, {40, "vip"}}
	for _, o := range orders {
		id, err := eng.Client().Start(ctx, g,
			client.WithInput(map[string]any{"amount": o.amount}),
			client.WithInvocation(map[string]any{"tier": o.tier}))
		if err != nil {
			return err
		}
		st, err := eng.Client().Wait(ctx, id)
		if err != nil {
			return err
		}
		shipped := st.Nodes["ship"] != nil && st.Nodes["ship"].Status == "succeeded"
		reviewed := st.Nodes["review"] != nil && st.Nodes["review"].Status == "succeeded"
		fmt.Printf("amount %v, tier %s: %s, reviewed %v, shipped %v\n", o.amount, o.tier, st.Status, reviewed, shipped)
	}
	return nil
}
