package builtin

import (
	"context"
	"time"

	"github.com/weft-dev/weft/internal/worker"
)

// SleepConfig configures sleep.
type SleepConfig struct {
	Duration Duration `json:"duration"`
}

// Sleep waits for its configured duration, or until its context ends, and
// outputs {"slept": "<duration>"}. It waits inside the worker, holding one
// of its slots, and a redelivered attempt sleeps again from the start: a
// run that waits on time uses a wait node instead (graph.TypeWait), which
// waits on the coordinator's durable timer and holds no worker.
type Sleep struct{}

// Execute implements worker.Node.
func (Sleep) Execute(ctx context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg SleepConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	d := time.Duration(cfg.Duration)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return &worker.Result{Output: map[string]any{"slept": d.String()}}, nil
}
