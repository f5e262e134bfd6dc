package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// defaultJournal is the journal of an Agent that names none: the run's
// log, through the worker.
var defaultJournal Journal = workerJournal{}

// workerJournal records steps as node-step events of the run
// (worker.RecordStep) and reads the last one back (worker.LastStep).
// Outside a worker (a program that calls Execute itself) it records
// nothing.
type workerJournal struct{}

func (workerJournal) Last(ctx context.Context, _ *worker.Input) (*AgentStep, error) {
	raw, err := worker.LastStep(ctx)
	if errors.Is(err, worker.ErrNoWorkItem) || (err == nil && raw == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s AgentStep
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decoding the last step: %w", err)
	}
	return &s, nil
}

func (workerJournal) Record(ctx context.Context, _ *worker.Input, s *AgentStep) error {
	var err error
	if s.Kind == "await" {
		what := s.AwaitFor
		if what == "" {
			what = events.AwaitApproval
		}
		err = worker.RecordAwait(ctx, s.Step, s.Kind, s, &events.StepAwait{For: what, Tool: s.Tool, Call: s.Awaiting, Args: s.AwaitArgs})
	} else {
		err = worker.RecordStep(ctx, s.Step, s.Kind, s)
	}
	if errors.Is(err, worker.ErrNoWorkItem) {
		return nil // outside a worker (a direct call): nothing to record to
	}
	return err
}
