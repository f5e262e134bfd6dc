package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Wait blocks until the run has ended (completed, failed or cancelled) or
// ctx ends, and returns the run's final state. A failed or cancelled run is
// not an error: look at the state's Status and Error.
//
// Wait does not poll. It reads the run's three terminal decision subjects
// with an ordered consumer that starts at the beginning of the stream, so a
// run that ended before the call returns at once and one that ends later
// wakes it when its terminal event is stored.
func (c *Client) Wait(ctx context.Context, runID string) (*projection.State, error) {
	if _, err := c.store.LastSeq(ctx, runID); err != nil {
		return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
	}
	cons, err := c.store.JetStream().OrderedConsumer(ctx, c.store.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: events.TerminalSubjects(runID),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	for {
		msg, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for run %s: %w", runID, context.Cause(ctx))
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, nats.ErrConnectionClosed) {
				return nil, fmt.Errorf("waiting for run %s: %w", runID, err)
			}
			c.log.Warn("waiting for a run", logattr.RunID, runID, logattr.Error, err)
			continue
		}
		if _, err := events.Decode(msg.Subject(), msg.Headers(), msg.Data()); err != nil {
			// Not a valid terminal event; the coordinator passes it over
			// too, so keep waiting for one that is.
			c.log.Warn("passing over a malformed terminal event", logattr.RunID, runID, logattr.Subject, msg.Subject(), logattr.Error, err)
			continue
		}
		break
	}
	iter.Stop()
	st, err := c.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	return st, nil
}
