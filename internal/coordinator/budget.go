package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// The history budget. Every event of a run is read whenever the run is
// folded from its log, so a run whose history grows without bound (a
// client that floods it with signals, a loop that never ends within its
// caps) would cost ever more to load, and in the end could not be loaded
// at all. A run's history has a budget, in events and in payload bytes
// (projection.Stats: Events + Refused, every event the fold saw, accepted
// or not; and Bytes, the payloads of those not decided by the
// coordinator: what clients, workers and timers wrote); when an event takes a running run over
// it, the coordinator fails the run at once with a run-failed decision of
// type HistoryBudgetExceeded that says which limit and by how much, and
// asks its waiting child runs to cancel. Events after that are folded as
// for any ended run, and change nothing.
//
// The defaults (WithHistoryBudget) are far above what a graph within its
// limits needs (pkg/graph: at most 10000 nodes reached, each run at most
// its iteration cap) and far below what a coordinator cannot load: reads
// stream in batches of a few MB (pkg/events), so a larger budget costs
// time and memory, not a wedged shard.
//
// A run whose graph sets continueAsNew.onHistoryBudget is not failed at
// the budget's end if it can help it: from engine.DrainFraction of the
// budget on, it starts nothing new, and at rest it continues as new
// (internal/decider, continue.go); only a run that cannot come to rest
// before the end fails.
const (
	DefaultMaxHistoryEvents = decider.DefaultHistoryEvents
	DefaultMaxHistoryBytes  = decider.DefaultHistoryBytes
)

// FailureHistoryBudget is the failure type of a run failed for a history
// over its budget.
const FailureHistoryBudget = "HistoryBudgetExceeded"

// WithHistoryBudget sets the most events and payload bytes a run's
// history may hold before the run is failed (defaults
// DefaultMaxHistoryEvents, DefaultMaxHistoryBytes; zero or less keeps the
// default). Every coordinator of a deployment should use the same budget.
func WithHistoryBudget(events int, bytes int64) Option {
	return func(o *options) {
		if events > 0 {
			o.maxEvents = events
		}
		if bytes > 0 {
			o.maxBytes = bytes
		}
	}
}

// overBudget says how a run's history exceeds its budget, or "".
func (c *Coordinator) overBudget(s *projection.State) string {
	if n := s.Stats.Events + s.Stats.Refused; n > c.opts.maxEvents {
		return fmt.Sprintf("the run's history holds %d events, over its budget of %d", n, c.opts.maxEvents)
	}
	if s.Stats.Bytes > c.opts.maxBytes {
		return fmt.Sprintf("the run's history holds %d bytes of event data, over its budget of %d", s.Stats.Bytes, c.opts.maxBytes)
	}
	return ""
}

// enforceBudget fails a running run whose history is over its budget. It
// reports whether it did (or tried: err says why not), in which case
// there is nothing else to decide.
func (c *Coordinator) enforceBudget(ctx context.Context, ent *runEntry) (bool, error) {
	s := ent.state
	if s.Status.Ended() || s.Status == projection.RunPending {
		return false, nil
	}
	why := c.overBudget(s)
	if why == "" {
		return false, nil
	}
	for _, id := range sortedNodeIDs(s) {
		if n := s.Nodes[id]; n.Child != "" && n.Status.Active() {
			if err := c.requestCancel(ctx, n.Child, "run "+s.RunID, "parent run failed: history over its budget"); err != nil {
				return true, err
			}
		}
	}
	ev, err := events.New(ent.run, eventlog.DecisionID(ent.run, events.RunFailed), c.opts.now(),
		&events.RunFailedData{Error: events.Failure{Type: FailureHistoryBudget, Message: why}})
	if err != nil {
		return true, err
	}
	eventlog.MarkDecision(ev)
	telemetry.Inject(ctx, ev)
	if _, err := c.store.AppendDecisions(ctx, ent.run, ent.lastDecision, ev); err != nil {
		c.cache.del(ent.run)
		return true, fmt.Errorf("failing run %s over its history budget: %w", ent.run, err)
	}
	c.noticeEnd(ent.run, ev)
	c.n.overBudget.Add(1)
	c.n.failedRuns.Add(1)
	// The run-failed comes back through the consumer and is folded afresh;
	// the ended run's timers go then (syncTimers).
	c.cache.del(ent.run)
	c.log.WarnContext(ctx, "failed a run whose history is over its budget", logattr.RunID, ent.run, logattr.Error, why)
	return true, nil
}

func sortedNodeIDs(s *projection.State) []string {
	ids := make([]string, 0, len(s.Nodes))
	for id := range s.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
