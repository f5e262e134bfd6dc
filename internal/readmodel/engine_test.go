package readmodel_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

func quiet(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// engine starts a JetStream server, a coordinator (with the given
// default retention) and a worker with the built-in executors.
func engine(t *testing.T, retention time.Duration) (*client.Client, events.Store) {
	t.Helper()
	_, store := testkit.Store(t)
	log := quiet(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(store, worker.WithQueues("default"), worker.WithName("test-worker"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	wctx, wcancel := context.WithCancel(ctx)
	var wg, cwg sync.WaitGroup
	cwg.Go(func() {
		if err := coordinator.New(store, coordinator.WithLogger(log), coordinator.WithRetention(retention)).Run(ctx); err != nil {
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

func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustGraph(t *testing.T, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// waitIndexed waits until the read model shows every run in want with its
// status.
func waitIndexed(t *testing.T, ctx context.Context, store events.Store, want map[string]projection.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := readmodel.Open(ctx, eventlog.JetStream(store))
		missing := ""
		if err == nil {
			for run, st := range want {
				s, gerr := m.Get(ctx, run)
				if gerr != nil || s.Status != st {
					missing = run + " (" + string(st) + ")"
					err = gerr
					break
				}
			}
		} else {
			missing = "the bucket"
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read model: %s not indexed in time (last error: %v)", missing, err)
		}
		// Polls: the read model's index notifies nobody.
		time.Sleep(20 * time.Millisecond)
	}
}

// startAll starts runs of g, one per input, and returns their ids.
func startAll(t *testing.T, ctx context.Context, c *client.Client, g *graph.Graph, inputs []map[string]any, opts ...client.StartOption) []string {
	t.Helper()
	var ids []string
	for _, in := range inputs {
		id, err := c.Start(ctx, g, append([]client.StartOption{client.WithInput(in)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// isNotFound reports a run that is not in the log.
func isNotFound(err error) bool { return errors.Is(err, events.ErrRunNotFound) }
