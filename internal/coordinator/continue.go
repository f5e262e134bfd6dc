package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// startContinuation appends the start of run's continuation (continue-as-
// new: internal/decider, continue.go), before the run's own completion
// that names it. The start is a decision of the continuation, on its
// decision subject, which only the coordinator may write, on a run that
// must have no events; its id derives from the ending run, so a decision
// made again (a coordinator that crashed after the start and before the
// completion, a redelivered event, two coordinators at once) finds the
// start written and goes on: one continuation per run. A start there that
// is not this run's continuation (another writer's events under the id)
// is refused as a permanent error: the run fails saying so, and the run
// under that id is never taken for the continuation.
func (c *Coordinator) startContinuation(ctx context.Context, run string, start *events.Event) error {
	if start == nil {
		return nil
	}
	telemetry.Inject(ctx, start)
	_, err := c.store.AppendDecisions(ctx, start.RunID, 0, start)
	if err == nil {
		c.n.continued.Add(1)
		c.log.DebugContext(ctx, "continued a run as new", logattr.RunID, run, logattr.Continuation, start.RunID)
		return nil
	}
	if !errors.Is(err, events.ErrRunExists) {
		return fmt.Errorf("starting continuation %s of run %s: %w", start.RunID, run, err)
	}
	got, err := c.decidedStart(ctx, start.RunID)
	if err != nil {
		return fmt.Errorf("reading the start of continuation %s: %w", start.RunID, err)
	}
	if !decider.IsContinuationStart(got, run, start.RunID) {
		return fmt.Errorf("%w: continuation %s of run %s: its id holds another writer's events, and a run the engine did not start is never taken for the continuation", events.ErrDuplicateMismatch, start.RunID, run)
	}
	return nil // started before: by an earlier decision of the same end
}
