package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// A worker process: connect, open the events store, register nodes and run
// until SIGINT or SIGTERM, then drain.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	store, err := events.Open(ctx, js)
	if err != nil {
		log.Fatal(err)
	}

	w, err := worker.New(store, worker.WithQueues("default", "llm"), worker.WithConcurrency(32))
	if err != nil {
		log.Fatal(err)
	}
	builtin.Register(w)
	w.Handle("greet", worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		name, _ := in.State["name"].(string)
		if name == "" {
			return nil, worker.NonRetryable("MissingName", "state.name is empty")
		}
		return &worker.Result{
			Output:  "hello " + name,
			Updates: map[string]any{"greeted": true},
			Actions: []worker.Action{{Name: "greeted"}},
		}, nil
	}))
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Nodes control how their failures are recorded and retried with *Error.
func ExampleNonRetryable() {
	err := fmt.Errorf("charging card: %w", worker.NonRetryable("CardDeclined", "insufficient funds"))

	var we *worker.Error
	if errors.As(err, &we) {
		fmt.Println(we.Type, we.Retryable)
	}
	// Output: CardDeclined false
}

// The coordinator ensures a queue's consumer exists before it appends the
// queue's first work item; a new consumer sees only work appended after it.
func ExampleEnsureQueue() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	c, err := worker.EnsureQueue(ctx, js, "WEFT", "llm", worker.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.CachedInfo().Name)
}
