package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Map items under a rate limit (internal/decider's maprate.go has the
// decisions): an item's turn is taken with flow.Limiter.ReserveItem,
// which remembers a later turn in the limit's key, and the run is woken
// at that turn by a scheduled timer.fired notice (purpose "rate", which
// the fold passes over, as a slot's wake): its owner decides the run
// again, and the item, asking again, is given its turn.
//
// The wake is scheduled before the decision that asked is written, every
// time the item is asked for while its turn is later (the schedule is
// named by the item's attempt and replaces itself): a decision thrown
// away, or a coordinator that crashed, leaves either a wake already
// scheduled or an event handled again, which asks again and schedules it.
// A wake lost some other way costs time until the run's next event, never
// a turn: the turn stays remembered (for flow.Grace).

// reserveItem is flow.Limiter.Reserve for a map item's attempt: its turn
// remembered, and a later turn woken at.
func (c *Coordinator) reserveItem(r decider.ReserveRequest) func(context.Context, flow.RateSpec, flow.Holder, int, time.Time) (time.Time, error) {
	return func(ctx context.Context, s flow.RateSpec, h flow.Holder, units int, asked time.Time) (time.Time, error) {
		at, _, err := c.flow.ReserveItem(ctx, s, h, units, asked)
		if err != nil || at.IsZero() || !at.After(r.Now) {
			return at, err
		}
		return at, c.wakeAt(ctx, r, at)
	}
}

// wakeAt schedules a wake of r's run at its item's turn at.
func (c *Coordinator) wakeAt(ctx context.Context, r decider.ReserveRequest, at time.Time) error {
	// "ratei-", not a node's "rate-" (a node id may have a '-'), and as
	// long as "retry-", which node ids are bounded by.
	id := "ratei-" + r.Ref.Node + "-" + strconv.Itoa(r.Ref.Iteration) + "-" + strconv.Itoa(*r.Ref.Item) + "-" + strconv.Itoa(r.Attempt)
	ev, err := events.New(r.Run, eventlog.DecisionID(r.Run, events.TimerFired, id, strconv.FormatInt(at.UnixNano(), 10)), at,
		&events.TimerFiredData{TimerID: id, Purpose: "rate", Ref: r.Ref, Attempt: r.Attempt})
	if err != nil {
		return err
	}
	if err := c.store.Schedule(ctx, ev, id, at); err != nil && !errors.Is(err, events.ErrRunNotFound) {
		return fmt.Errorf("waking run %s at its item's turn: %w", r.Run, err)
	}
	return nil
}

// backoffItemRates holds back the rate limit's key of each item of map
// node id whose attempt failed as RateLimited, as backoffRate does for a
// node's attempt, while the item has not been readied again. An item's
// failure has no time of its own in the state: the hold is from when the
// coordinator folds it, a handling's time later (and, folded afresh
// after a restart while the item waits for its retry, again from then).
func (c *Coordinator) backoffItemRates(ctx context.Context, ent *runEntry, id string, ns *projection.NodeState) error {
	for i, it := range ns.Items {
		failed := it.Status == projection.NodeFailed || it.Status == projection.NodeRetrying || it.Status == projection.NodeRetryDue
		if !failed || it.Rate == nil || it.Error == nil || it.Error.Type != events.FailureRateLimited {
			continue // (an item's error stays past its next ready)
		}
		h := flow.Holder{Run: ent.state.RunID, Node: holderNode(itemRef(id, ns.Iteration, i)), Iteration: ns.Iteration, Attempt: it.Attempt}
		if err := c.holdBack(ctx, ent, id, it.Rate, it.Error, c.opts.now(), h); err != nil {
			return err
		}
	}
	return nil
}

func itemRef(node string, iteration, item int) events.NodeRef {
	return events.NodeRef{Node: node, Iteration: iteration, Item: &item}
}
