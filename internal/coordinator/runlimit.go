package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Run limits (a graph's concurrency: internal/decider's runlimit.go has
// the decisions, internal/flow's runlimit.go the slots): the run's own
// slot is taken by its strategy while the run is decided before START is
// routed (admitRun), and given back once the fold says the run ended,
// however it ended (releaseRunSlot); a run that ended while its
// coordinator was down is reclaimed by the sweep (slotLive: a run holds
// its own slot while it has not ended).

// admitRun takes a run's own slot by its graph's strategy; with
// cancel-oldest it asks for the evicted run's cancellation. An error is a
// failure to reach the bucket or the log: the decision is thrown away.
func (c *Coordinator) admitRun(ctx context.Context, r decider.AdmitRequest, h flow.Holder) (decider.Admission, error) {
	g, err := c.flow.AcquireRun(ctx, slotOf(r.Slot), h, r.Strategy)
	switch {
	case flow.Final(err):
		details, _ := json.Marshal(map[string]any{"limit": r.Slot.Limit, "key": r.Slot.Key, "max": r.Slot.Max})
		return decider.Admission{Failure: &events.Failure{Type: events.FailureFlowLimit,
			Message: fmt.Sprintf("run limit: %v", err), Details: details}}, nil
	case err != nil:
		return decider.Admission{}, err
	}
	if g.Evict != nil {
		if err := c.evict(ctx, r, *g.Evict); err != nil {
			return decider.Admission{}, err
		}
	}
	return decider.Admission{Granted: g.Granted, Full: g.Full}, nil
}

// evict asks for the cancellation of run v, the oldest holding a key
// of a cancel-oldest run limit, for run r.Run, which takes its slot once
// v ends. The request's id is the run's cancel-requested's (as a
// client's): asked again, JetStream keeps one.
func (c *Coordinator) evict(ctx context.Context, r decider.AdmitRequest, v flow.Holder) error {
	reason := fmt.Sprintf("concurrency limit %q is full for key %q (max %d runs; strategy cancel-oldest): run %s takes this run's slot",
		r.Slot.Limit, r.Slot.Key, r.Slot.Max, r.Run)
	ev, err := events.New(v.Run, eventlog.DecisionID(v.Run, events.RunCancelRequested), c.opts.now().UTC(),
		&events.RunCancelRequestedData{By: "flow", Reason: reason})
	if err != nil {
		return err
	}
	if _, err := c.store.Append(ctx, v.Run, events.AnySeq, ev); err != nil && !errors.Is(err, events.ErrRunNotFound) {
		return fmt.Errorf("cancelling run %s for the run limit %q: %w", v.Run, r.Slot.Limit, err)
	}
	return nil
}

// releaseRunSlot gives back the run's own slot once it ended, and wakes
// who it lets in. The slot comes from the run's graph, input and
// invocation (decider.RunSlot), so it needs no record; releasing twice
// changes nothing.
func (c *Coordinator) releaseRunSlot(ctx context.Context, ent *runEntry) error {
	s := ent.state
	if !s.Status.Ended() {
		return nil
	}
	h := flow.RunHolder(s.RunID, 0, "")
	if _, done := ent.released[h.ID()]; done {
		return nil
	}
	g, err := c.graphFor(s)
	if err != nil || g.Definition().Concurrency == nil {
		return nil // no run limit (a graph that does not compile started nothing)
	}
	slot, err := decider.RunSlot(g, graphrt.Of(g), s.Input, s.InvocationMap())
	if err != nil {
		return nil // the run failed on its key: it took no slot
	}
	return c.releaseOnce(ctx, ent, *slot, h)
}

// runSlotLife is what state s says of the run's own slot: held until the
// run ends, waited for while START waits for it.
func runSlotLife(s *projection.State) flow.Life {
	if s.Status.Ended() {
		return flow.Gone
	}
	if n := s.Nodes[flow.RunNode]; n != nil && n.Status == projection.NodeWaiting && n.WaitingFor == "slot" {
		return flow.Waits
	}
	return flow.Holds
}
