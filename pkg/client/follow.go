package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Follow calls fn with each event of a run, from its first, and the run's
// state after it, as the events are stored: the events already in the log
// at once, later ones as they come. It returns nil when the run has ended
// (after fn saw its last event) or fn returns false, and ctx's error when
// ctx ends first. A run with no events gives events.ErrRunNotFound.
//
// Follow creates no consumer and does not poll (see watch.go: it reads
// again only now and then while nothing is heard, in case a wake-up was
// lost). It subscribes to the run's subjects first, then reads the run's history in
// batched direct gets from the sequence after the last event it handed
// to fn, whenever something was published on them: each event once, in
// log order, whatever arrives while a read is under way (what is
// published during a read either is in it, or wakes the next read).
func (c *Client) Follow(ctx context.Context, runID string, fn func(RunEvent, *projection.State) bool) error {
	if !eventlog.ValidToken(runID) {
		return fmt.Errorf("following run %s: run id %q: %w", runID, runID, events.ErrInvalidID)
	}
	w, err := c.watch(ctx, eventlog.RunFilter(runID))
	if err != nil {
		return fmt.Errorf("following run %s: %w", runID, err)
	}
	defer w.stop()
	s := &projection.State{}
	recent := newRecentIDs(maxHeard)
	next, pos := uint64(1), 0
	for {
		done := false
		err := eventlog.Each(ctx, c.store, runID, next, 0, func(e *events.Event) error {
			if e.Seq < next {
				return nil // read before
			}
			next = e.Seq + 1
			recent.add(e.ID)
			pos++
			_ = s.Apply(e)
			if !fn(RunEvent{Position: pos, Event: e}, s) || s.Status.Ended() {
				done = true
				return eventlog.ErrStop
			}
			return nil
		})
		if done {
			return nil
		}
		retry := w.settle(recent.has)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return fmt.Errorf("following run %s: %w", runID, context.Cause(ctx))
			case pos == 0 && errors.Is(err, events.ErrRunNotFound), errors.Is(err, nats.ErrConnectionClosed):
				return fmt.Errorf("following run %s: %w", runID, err)
			}
			c.log.Warn("following a run", logattr.RunID, runID, logattr.Error, err)
			retry = w.retryLater()
		}
		if err := w.wait(ctx, retry); err != nil {
			return fmt.Errorf("following run %s: %w", runID, err)
		}
	}
}

// recentIDs is the set of the last n event ids read: an event heard of is
// looked for in the stream until its id is among them.
type recentIDs struct {
	ring []string
	next int
	set  map[string]int // id → how many times it is in ring
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{ring: make([]string, n), set: make(map[string]int, n)}
}

func (r *recentIDs) add(id string) {
	if old := r.ring[r.next]; old != "" {
		if r.set[old]--; r.set[old] <= 0 {
			delete(r.set, old)
		}
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	if id != "" {
		r.set[id]++
	}
}

func (r *recentIDs) has(id string) bool { return r.set[id] > 0 }
