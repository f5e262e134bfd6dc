package coordinator

import (
	"context"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// HandleEvent is the coordinator's step for one event of the log, as Run
// does it for each delivered message after decoding it: fold the event
// into its run (reading the run when it is not cached or may have missed
// events), decide, and append the decisions. e.Seq must be the event's
// stream sequence; redelivered says the event was delivered before. A nil
// error means the event may be acknowledged; an error means it must be
// delivered again. It is the seam the deterministic simulator drives the
// production logic through, with an in-memory store whose JetStream() is
// nil (then task queue consumers and snapshots are not set up).
func (c *Coordinator) HandleEvent(ctx context.Context, e *events.Event, redelivered bool) error {
	c.n.processed.Add(1)
	if redelivered {
		c.cache.del(e.RunID)
	}
	return c.process(ctx, e, redelivered)
}

// CachedState returns a copy of the cached state of a run, or nil when the
// run is not cached: for checks that the cache equals a fresh fold.
func (c *Coordinator) CachedState(run string) *projection.State {
	ent := c.cache.get(run)
	if ent == nil {
		return nil
	}
	return ent.state.Clone()
}
