package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/nodeworker"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// engineConfig configures the in-process engine of demo and dev.
type engineConfig struct {
	dataDir     string // JetStream's store
	removeDir   bool   // remove dataDir on Stop
	port        int    // -1: any free port
	queues      []string
	concurrency int
	log         *slog.Logger
}

// localEngine is the whole of Weft in one process: an embedded NATS server
// with JetStream, a coordinator and a worker with the built-in executors.
type localEngine struct {
	cfg   engineConfig
	srv   *server.Server
	nc    *nats.Conn
	store events.Store

	stopWorker, stopCoordinator context.CancelFunc
	worker, coordinator         sync.WaitGroup
	once                        sync.Once
}

func startEngine(ctx context.Context, cfg engineConfig) (_ *localEngine, err error) {
	le := &localEngine{cfg: cfg}
	defer func() {
		if err != nil {
			le.Stop()
		}
	}()
	le.srv, err = embedded.Start(embedded.Config{StoreDir: cfg.dataDir, Port: cfg.port, ServerName: "weft-local"})
	if err != nil {
		return nil, err
	}
	le.nc, err = nats.Connect(le.srv.ClientURL(), nats.Name("weft local engine"))
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded server: %w", err)
	}
	js, err := jetstream.New(le.nc)
	if err != nil {
		return nil, err
	}
	le.store, err = events.Open(ctx, js)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(le.store,
		worker.WithQueues(cfg.queues...),
		worker.WithConcurrency(cfg.concurrency),
		worker.WithName("local-worker"),
		worker.WithLogger(cfg.log),
		worker.WithDrainTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	// The executors' limits, secrets and llm endpoints come from the same
	// WEFT_* variables as nodeworker's.
	execOpts, err := nodeworker.ExecutorOptionsFromEnv()
	if err != nil {
		return nil, err
	}
	builtin.Register(w, execOpts...)

	// The two run on contexts of their own, so that Stop can end them in
	// order: the worker first, then the coordinator.
	base := context.WithoutCancel(ctx)
	wctx, stopWorker := context.WithCancel(base)
	cctx, stopCoordinator := context.WithCancel(base)
	le.stopWorker, le.stopCoordinator = stopWorker, stopCoordinator
	le.coordinator.Go(func() {
		if err := coordinator.New(le.store, coordinator.WithLogger(cfg.log)).Run(cctx); err != nil {
			cfg.log.Error("coordinator stopped", "error", err)
		}
	})
	le.worker.Go(func() {
		if err := w.Run(wctx); err != nil {
			cfg.log.Error("worker stopped", "error", err)
		}
	})
	consumers := []string{coordinator.ConsumerName("coordinator", 0)}
	for _, q := range cfg.queues {
		consumers = append(consumers, worker.QueueConsumer(q))
	}
	if err := waitForConsumers(ctx, js, le.store.StreamName(), consumers); err != nil {
		return nil, err
	}
	return le, nil
}

// waitForConsumers waits until the coordinator and the worker have set up
// their consumers, so that the engine is ready when startEngine returns.
func waitForConsumers(ctx context.Context, js jetstream.JetStream, stream string, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, name := range names {
		for {
			_, err := js.Consumer(ctx, stream, name)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("waiting for consumer %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for consumer %s: %w", name, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// URL is the embedded server's client URL.
func (le *localEngine) URL() string { return le.srv.ClientURL() }

// Stop shuts down, in order, the worker, the coordinator, the connection
// and the server, and removes a temporary data directory. It is idempotent.
func (le *localEngine) Stop() {
	le.once.Do(func() {
		if le.stopWorker != nil {
			le.stopWorker()
			le.worker.Wait()
			le.stopCoordinator()
			le.coordinator.Wait()
		}
		if le.nc != nil {
			le.nc.Close()
		}
		embedded.Stop(le.srv)
		if le.cfg.removeDir {
			_ = os.RemoveAll(le.cfg.dataDir)
		}
	})
}

// graphQueues lists the task queues a graph's nodes (and its subgraphs'
// nodes) are put on, "default" first.
func graphQueues(def *graph.Definition) []string {
	qs := []string{worker.DefaultQueue}
	var walk func(d *graph.Definition)
	walk = func(d *graph.Definition) {
		for _, n := range d.Nodes {
			if n.Queue != "" && !slices.Contains(qs, n.Queue) {
				qs = append(qs, n.Queue)
			}
		}
		for _, sub := range d.Graphs {
			walk(sub)
		}
	}
	walk(def)
	return qs
}
