package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// Example starts a run of a two-node graph, waits for it and reads its
// state. A deployment runs the coordinator and the workers as their own
// processes against a NATS cluster; here they run in-process, on an
// embedded server.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	store, stop := exampleEngine(ctx)
	defer stop()

	g, err := graph.Parse([]byte(`
name: hello
nodes:
  - {id: greet, type: echo}
  - id: shout
    type: transform
    config: {set: {greeting: "'Hello, ' + input.name + '!'"}}
edges:
  - {from: START, to: greet}
  - {from: greet, to: shout}
  - {from: shout, to: END}
`), "hello.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}

	c := client.New(store, client.WithIdentity("example"))
	run, err := c.Start(ctx, g, client.WithInput(map[string]any{"name": "Ada"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := c.Wait(ctx, run)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Status, st.VarsMap()["greeting"])
	// Output: completed Hello, Ada!
}

// ExampleClient_StateAt replays a run: the state after each of its events.
func ExampleClient_StateAt() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, stop := exampleEngine(ctx)
	defer stop()

	g, _ := graph.Parse([]byte(`{"name": "one", "nodes": [{"id": "a", "type": "noop"}],
		"edges": [{"from": "START", "to": "a"}, {"from": "a", "to": "END"}]}`), "one.json")
	c := client.New(store)
	run, _ := c.Start(ctx, g)
	if _, err := c.Wait(ctx, run); err != nil {
		fmt.Println(err)
		return
	}
	history, _ := c.Events(ctx, run)
	for _, e := range history {
		st, _ := c.StateAt(ctx, run, e.Position)
		a := "-"
		if n := st.Node("a"); n != nil {
			a = string(n.Status)
		}
		fmt.Printf("%-26s run %-9s node a %s\n", e.Type, st.Status, a)
	}
	// Output:
	// dev.weft.run.started.v1    run running   node a -
	// dev.weft.node.ready.v1     run running   node a ready
	// dev.weft.node.invoking.v1  run running   node a running
	// dev.weft.node.invoked.v1   run running   node a succeeded
	// dev.weft.node.routed.v1    run running   node a succeeded
	// dev.weft.run.completed.v1  run completed node a succeeded
}

// exampleEngine starts an embedded JetStream server, a coordinator and a
// worker with the built-in executors; stop shuts them down in order.
func exampleEngine(ctx context.Context) (events.Store, func()) {
	dir, _ := os.MkdirTemp("", "weft-example-")
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		panic(err)
	}
	nc, _ := nats.Connect(srv.ClientURL())
	js, _ := jetstream.New(nc)
	store, err := events.Open(ctx, js)
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	w, _ := worker.New(store, worker.WithLogger(quiet))
	builtin.Register(w)
	wctx, stopWorker := context.WithCancel(ctx)
	cctx, stopCoordinator := context.WithCancel(ctx)
	wdone, cdone := make(chan struct{}), make(chan struct{})
	go func() { _ = w.Run(wctx); close(wdone) }()
	go func() { _ = coordinator.New(store, coordinator.WithLogger(quiet)).Run(cctx); close(cdone) }()
	return store, func() {
		stopWorker()
		<-wdone
		stopCoordinator()
		<-cdone
		nc.Close()
		embedded.Stop(srv)
		_ = os.RemoveAll(dir)
	}
}

// ExampleWithQuery selects runs with a query (the language of 'weft list
// -q') and cancels each, as 'weft cancel -q' does: a batch in Go is a
// listing and a loop, each run's outcome its own.
func ExampleWithQuery() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c *client.Client // client.New(store) over a running engine
	if c == nil {
		return // compiled, not run: it needs an engine
	}
	stale, err := c.List(ctx, client.WithQuery(`status = "running" AND graph = "billing" AND started < now - duration("24h")`))
	if err != nil {
		fmt.Println(err) // a *client.QueryError says where a query is wrong
		return
	}
	for _, r := range stale {
		switch err := c.Cancel(ctx, r.RunID, "stale"); {
		case errors.Is(err, client.ErrRunEnded):
			fmt.Println(r.RunID, "ended meanwhile")
		case err != nil:
			fmt.Println(r.RunID, "not cancelled:", err)
		default:
			fmt.Println(r.RunID, "cancel requested")
		}
	}
}
