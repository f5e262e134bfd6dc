package client_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// quiet is a logger for the in-process engine: warnings and errors only.
func quiet(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// engine starts a JetStream server, a coordinator and a worker with the
// built-in executors, and returns a client and the store. Everything stops
// with the test: the worker, then the coordinator, then the connection and
// the server.
func engine(t *testing.T, queues ...string) (*client.Client, events.Store) {
	t.Helper()
	_, store := testkit.Store(t)
	log := quiet(t)
	ctx, cancel := context.WithCancel(context.Background())
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	w, err := worker.New(store, worker.WithQueues(queues...), worker.WithName("test-worker"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	wctx, wcancel := context.WithCancel(ctx)
	var wg, cwg sync.WaitGroup
	cwg.Go(func() {
		if err := coordinator.New(store, coordinator.WithLogger(log)).Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	wg.Go(func() {
		if err := w.Run(wctx); err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	t.Cleanup(func() {
		wcancel()
		wg.Wait()
		cancel()
		cwg.Wait()
	})
	return client.New(store, client.WithLogger(log), client.WithIdentity("tester")), store
}

// waitListed waits until the read model of runs, which the coordinator
// writes after it decided, shows run in status.
func waitListed(t *testing.T, ctx context.Context, c *client.Client, run string, status projection.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := c.Summary(ctx, run)
		if err == nil && s.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not listed as %s in time: %+v, %v", run, status, s, err)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(10 * time.Millisecond)
	}
}
