package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Follow calls fn with each event of a run, from its first, and the run's
// state after it, as the events are stored: the events already in the log
// at once, later ones as they come. It returns nil when the run has ended
// (after fn saw its last event) or fn returns false, and ctx's error when
// ctx ends first. A run with no events gives events.ErrRunNotFound.
//
// It reads the run's subjects with a JetStream ordered consumer, which
// delivers every message once and in order, and re-creates itself after
// a gap; it does not poll.
func (c *Client) Follow(ctx context.Context, runID string, fn func(RunEvent, *projection.State) bool) error {
	if !events.ValidToken(runID) {
		return fmt.Errorf("following run %s: run id %q: %w", runID, runID, events.ErrInvalidID)
	}
	if _, err := c.store.LastSeq(ctx, runID); err != nil {
		return fmt.Errorf("following run %s: %w", runID, err)
	}
	cons, err := c.store.JetStream().OrderedConsumer(ctx, c.store.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.RunFilter(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("following run %s: %w", runID, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("following run %s: %w", runID, err)
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	s := &projection.State{}
	pos := 0
	for {
		msg, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("following run %s: %w", runID, context.Cause(ctx))
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("following run %s: %w", runID, err)
			}
			c.log.Warn("following a run", "run_id", runID, "error", err)
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		e := events.DecodeStored(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
		pos++
		_ = s.Apply(e)
		if !fn(RunEvent{Position: pos, Event: e}, s) || s.Status.Ended() {
			return nil
		}
	}
}
