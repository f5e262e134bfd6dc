package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/workqueue"
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
	c, err := workqueue.EnsureQueue(ctx, js, "WEFT", "llm", workqueue.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.CachedInfo().Name)
}

// A node split into phases: prep reads the input, exec works on prep's
// result only, post turns exec's result into output, updates and actions.
func ExampleRunPhases() {
	node := worker.Phases{
		Prep: func(ctx context.Context, in *worker.Input) (any, error) { return in.State["text"], nil },
		Exec: func(ctx context.Context, prep any) (any, error) { return len(prep.(string)), nil },
		Post: func(ctx context.Context, in *worker.Input, prep, exec any) (*worker.Result, error) {
			return &worker.Result{Output: exec, Updates: map[string]any{"length": exec}}, nil
		},
	}
	res, err := node.Execute(context.Background(), &worker.Input{State: map[string]any{"text": "weft"}})
	fmt.Println(res.Output, res.Updates, err)
	// Output: 4 map[length:4] <nil>
}

// Filters run around every node of a worker, in registration order: this
// one cancels work of blocked tenants (the log gets a NodeCancelled by
// "filter:tenant-gate") and the other stamps every output.
func ExampleWithInvokingFilter() {
	var store events.Store // events.Open(ctx, js)
	w, err := worker.New(store,
		worker.WithInvokingFilter("tenant-gate", worker.InvokingFilterFunc(func(ctx context.Context, in *worker.Input) (worker.FilterDecision, error) {
			if in.Invocation["tenant"] == "blocked" {
				return worker.Cancel("tenant is blocked"), nil
			}
			return worker.Pass(), nil
		})),
		worker.WithInvokedFilter("stamp", worker.InvokedFilterFunc(func(ctx context.Context, in *worker.Input, res *worker.Result) (*worker.Result, error) {
			return &worker.Result{Output: map[string]any{"node": in.NodeID, "output": res.Output}, Updates: res.Updates, Actions: res.Actions}, nil
		})),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = w
}

// A node that validates its input and falls back after its last attempt.
type quote struct{}

func (quote) Validate(in *worker.Input) error {
	if _, ok := in.State["symbol"].(string); !ok {
		return errors.New("state.symbol: want a ticker symbol such as \"ACME\"")
	}
	return nil
}

func (quote) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	return nil, worker.Retryable("Upstream", "quote service unavailable")
}

func (quote) Fallback(ctx context.Context, in *worker.Input, err error) (*worker.Result, error) {
	return &worker.Result{Output: map[string]any{"price": nil, "stale": true}}, nil
}

// Optional interfaces are found by type assertion; a worker registers such
// a node as any other (w.Handle("quote", quote{})) and calls Validate before
// the node runs and Fallback after its last attempt failed.
func ExampleFallbacker() {
	var n worker.Node = quote{}
	ctx := context.Background()
	in := &worker.Input{State: map[string]any{}, Attempt: 3, MaxAttempts: 3}
	if v, ok := n.(worker.Validator); ok {
		fmt.Println(v.Validate(in))
	}
	in.State["symbol"] = "ACME"
	_, err := n.Execute(ctx, in)
	if f, ok := n.(worker.Fallbacker); ok {
		res, _ := f.Fallback(ctx, in, err)
		fmt.Println(res.Output)
	}
	// Output:
	// state.symbol: want a ticker symbol such as "ACME"
	// map[price:<nil> stale:true]
}

// LiveWorkers lists the workers that announce themselves, for operators and
// the CLI.
func ExampleLiveWorkers() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	live, err := worker.LiveWorkers(context.Background(), js)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range live {
		fmt.Println(a.Name, a.Queues, a.Types)
	}
}

// A long node reports its progress: each call keeps its work item its own,
// and the run's timeline shows the details (at most one event per
// HeartbeatEventInterval).
func ExampleHeartbeat() {
	var reindex worker.NodeFunc = func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		pages := 1000
		for page := 1; page <= pages; page++ {
			// ... index one page ...
			if err := worker.Heartbeat(ctx, map[string]int{"page": page, "of": pages}); err != nil {
				return nil, err
			}
		}
		return &worker.Result{Output: map[string]int{"pages": pages}}, nil
	}
	_ = reindex
}

// A node that works in steps records each one before it goes on, and
// resumes from the last one when it runs again (after its worker died, or
// on a retry): work whose step is recorded is not done twice.
func ExampleRecordStep() {
	pages := worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		done := 0
		if raw, err := worker.LastStep(ctx); err != nil {
			return nil, err
		} else if raw != nil {
			if err := json.Unmarshal(raw, &done); err != nil {
				return nil, err
			}
		}
		for page := done + 1; page <= 3; page++ {
			// ... the page's work, guarded by in.IdempotencyKey + "/" + page ...
			if err := worker.RecordStep(ctx, page, "page", page); err != nil {
				return nil, err
			}
		}
		return &worker.Result{Output: map[string]any{"pages": 3}}, nil
	})
	_ = pages // w.Handle("pages", pages)
}
