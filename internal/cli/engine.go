package cli

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/nodeworker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// engineConfig configures the in-process engine of demo and dev.
type engineConfig struct {
	dataDir     string // JetStream's store
	removeDir   bool   // remove dataDir on Stop
	port        int    // -1: any free port
	queues      []string
	concurrency int
	log         *slog.Logger
	// roles runs the engine under Weft's roles (weft.WithRoles), with the
	// credentials kept in rolesDir ("": in memory).
	roles    bool
	rolesDir string
	// keys, if not nil, seal events' data (-encrypt-keys).
	keys events.KeyRing
	// fakeModel, if not "", is the URL of the demo's fake model, given to
	// the worker as the llm endpoint named fakeEndpoint.
	fakeModel string
}

// localEngine is the whole of Weft in one process (pkg/weft): an embedded
// NATS server with JetStream, a coordinator and a worker with the built-in
// executors.
type localEngine struct {
	*weft.Engine
	cfg  engineConfig
	once sync.Once
}

func startEngine(ctx context.Context, cfg engineConfig) (*localEngine, error) {
	// The executors' limits, secrets and llm endpoints come from the same
	// WEFT_* variables as nodeworker's.
	execOpts, err := nodeworker.ExecutorOptionsFromEnv()
	if err != nil {
		return nil, err
	}
	if cfg.fakeModel != "" {
		execOpts = append(execOpts, builtin.WithLLMEndpoint(fakeEndpoint, builtin.LLMEndpoint{URL: cfg.fakeModel}))
	}
	opts := []weft.Option{
		weft.WithBuiltins(execOpts...),
		weft.Embedded(cfg.dataDir),
		weft.WithPort(cfg.port),
		weft.WithQueues(cfg.queues...),
		weft.WithConcurrency(cfg.concurrency),
		weft.WithName("local-worker"),
		weft.WithLogger(cfg.log),
		weft.WithDrainTimeout(10 * time.Second),
	}
	if cfg.roles {
		opts = append(opts, weft.WithRoles(cfg.rolesDir))
	}
	if cfg.keys != nil {
		opts = append(opts, weft.WithEncryptKeys(cfg.keys))
	}
	eng, err := weft.Start(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &localEngine{Engine: eng, cfg: cfg}, nil
}

// Stop shuts the engine down and removes a temporary data directory. It is
// idempotent.
func (le *localEngine) Stop() {
	le.once.Do(func() {
		le.Engine.Stop()
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
