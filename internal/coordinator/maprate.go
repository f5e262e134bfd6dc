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
