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

// Wait blocks until the run has ended (completed, failed or cancelled) or
// ctx ends, and returns the run's final state. A failed or cancelled run is
// not an error: look at the state's Status and Error.
//
// Wait creates no consumer and does not poll (see watch.go: it reads
// again only now and then while nothing is heard, in case a wake-up was
// lost). It subscribes to the run's three terminal decision subjects
// first, then reads the last message on each (a direct get by subject; on
// a replicated stream a miss is confirmed by the stream leader), so a run
// that ended before the call returns at once, and one that ends later
// wakes it when its terminal event is published.
func (c *Client) Wait(ctx context.Context, runID string) (*projection.State, error) {
	if _, err := c.store.LastSeq(ctx, runID); err != nil {
		return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
	}
	w, err := c.watch(ctx, eventlog.TerminalSubjects(runID)...)
	if err != nil {
		return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
	}
	defer w.stop()
	for {
		retry := w.settle(func(string) bool { return false })
		ended, err := c.ended(ctx, runID)
		switch {
		case ended:
			return c.Get(ctx, runID)
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for run %s: %w", runID, context.Cause(ctx))
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
			}
			c.log.Warn("waiting for a run", logattr.RunID, runID, logattr.Error, err)
			retry = w.retryLater()
		}
		if err := w.wait(ctx, retry); err != nil {
			return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
		}
	}
}

// ended reports whether a run's log holds a valid terminal decision. A
// message on a terminal subject that is not a valid terminal event is
// passed over (the coordinator passes it over too).
func (c *Client) ended(ctx context.Context, runID string) (bool, error) {
	for _, leader := range []bool{false, true} {
		if leader && eventlog.Replicas(c.store) <= 1 {
			break
		}
		for _, subject := range eventlog.TerminalSubjects(runID) {
			read := eventlog.LastOn
			if leader {
				// A replica that is behind may have answered: the
				// leader has every acknowledged message.
				read = eventlog.LeaderLast
			}
			m, err := read(ctx, c.store, subject)
			if err != nil {
				return false, err
			}
			if m == nil {
				continue
			}
			if _, err := events.Decode(m.Subject, m.Header, m.Data); err != nil {
				c.log.Warn("passing over a malformed terminal event", logattr.RunID, runID, logattr.Subject, m.Subject, logattr.Error, err)
				continue
			}
			return true, nil
		}
	}
	return false, nil
}
