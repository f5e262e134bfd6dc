// Command customworker is a worker process with a node of its own: it
// registers a "wordcount" node (validated input, prep → exec → post phases,
// a fallback) next to the built-in executors, and two invocation filters
// (one masks secrets in the input, one records the output size). Run it
// against a NATS server with Weft's coordinator:
//
//	go run ./examples/customworker -nats nats://127.0.0.1:4222
//
// and start examples/customworker/wordcount.yaml with `weft run`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "customworker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("customworker", flag.ContinueOnError)
	url := fs.String("nats", nats.DefaultURL, "NATS server URL")
	queue := fs.String("queue", worker.DefaultQueue, "task queue to pull from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*url, nats.Name("weft customworker"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	store, err := events.Open(ctx, js)
	if err != nil {
		return err
	}
	w, err := worker.New(store,
		worker.WithQueues(*queue),
		worker.WithInvokingFilter("mask-secrets", worker.InvokingFilterFunc(maskSecrets)),
		worker.WithInvokedFilter("measure", worker.InvokedFilterFunc(measure)),
	)
	if err != nil {
		return err
	}
	builtin.Register(w)
	w.Handle("wordcount", wordCount{})
	return w.Run(ctx)
}

// wordCount counts the words of state.text. It shows the optional parts of
// the node contract: Validate, the prep → exec → post phases and Fallback.
type wordCount struct{}

// Execute satisfies worker.Node; the worker runs the phases instead, since
// wordCount implements worker.Executor.
func (n wordCount) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	return worker.RunPhases(ctx, n, in)
}

// Validate refuses input without text, saying what to fix.
func (wordCount) Validate(in *worker.Input) error {
	if s, _ := in.State["text"].(string); strings.TrimSpace(s) == "" {
		return errors.New(`state.text: want a non-empty string (start the run with {"text": "..."})`)
	}
	return nil
}

// Prep picks what exec needs from the input.
func (wordCount) Prep(ctx context.Context, in *worker.Input) (any, error) {
	return in.State["text"].(string), nil
}

// Exec does the work, on prep's result only.
func (wordCount) Exec(ctx context.Context, prep any) (any, error) {
	return len(strings.Fields(prep.(string))), nil
}

// Post writes the state and chooses the action that routes the run.
func (wordCount) Post(ctx context.Context, in *worker.Input, prep, exec any) (*worker.Result, error) {
	n := exec.(int)
	action := "short"
	if n > 100 {
		action = "long"
	}
	return &worker.Result{
		Output:  map[string]any{"words": n},
		Updates: map[string]any{"words": n},
		Actions: []worker.Action{{Name: action}},
	}, nil
}

// Fallback lets the run go on with an unknown count after the last attempt
// failed.
func (wordCount) Fallback(ctx context.Context, in *worker.Input, err error) (*worker.Result, error) {
	slog.Warn("wordcount falls back", "run", in.RunID, "error", err)
	return &worker.Result{Output: map[string]any{"words": -1}, Actions: []worker.Action{{Name: "short"}}}, nil
}

// maskSecrets replaces state.password before any node sees it; the
// NodeInvoking event records that it did.
func maskSecrets(ctx context.Context, in *worker.Input) (worker.FilterDecision, error) {
	if _, ok := in.State["password"]; !ok {
		return worker.Pass(), nil
	}
	in.State["password"] = "********"
	return worker.Modify("state.password masked"), nil
}

// measure logs the size of every output and passes it on unchanged.
func measure(ctx context.Context, in *worker.Input, res *worker.Result) (*worker.Result, error) {
	slog.Info("node output", "run", in.RunID, "node", in.NodeID, "output", fmt.Sprint(res.Output))
	return res, nil
}
