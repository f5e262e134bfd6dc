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
// outputs {"slept": "<duration>"}.
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
