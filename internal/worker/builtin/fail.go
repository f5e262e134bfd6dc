package builtin

import (
	"context"

	"github.com/weft-dev/weft/internal/worker"
)

// FailConfig configures fail.
type FailConfig struct {
	Message string `json:"message,omitempty"` // default "failed on purpose"
	Type    string `json:"type,omitempty"`    // default "Error"
	// Retryable defaults to true.
	Retryable *bool `json:"retryable,omitempty"`
	// FailAttempts, when positive, fails only the first n attempts; later
	// attempts succeed with {"attempt": n}. Zero fails every attempt.
	FailAttempts int `json:"failAttempts,omitempty"`
}

// Fail fails with the configured error, for testing retries and failure
// paths.
type Fail struct{}

// Execute implements worker.Node.
func (Fail) Execute(_ context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg FailConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	if cfg.FailAttempts > 0 && in.Attempt > cfg.FailAttempts {
		return &worker.Result{Output: map[string]any{"attempt": in.Attempt}}, nil
	}
	e := &worker.Error{Type: cfg.Type, Message: cfg.Message, Retryable: true}
	if e.Type == "" {
		e.Type = "Error"
	}
	if e.Message == "" {
		e.Message = "failed on purpose"
	}
	if cfg.Retryable != nil {
		e.Retryable = *cfg.Retryable
	}
	return nil, e
}
