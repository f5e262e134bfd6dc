package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
)

// Timers fire in the timers stream (events.Store.TimerStream), which only
// coordinators write: a stream with message schedules has roll-up headers
// forced on, and must not be one clients and workers publish to. The
// holder of a partition relays the timers of its runs that fired into
// their runs' logs, as the TimerFired notice the fold knows: one append
// per timer, acknowledged after it landed (a relay retried after a crash
// is de-duplicated by the event's id; a timer relayed twice changes its
// run once).

// relayTimers relays partition p's fired timers until pctx ends.
func (c *Coordinator) relayTimers(pctx context.Context, p int) {
	log := c.log.With(logattr.Partition, p)
	// The safety net learns of the partition's timers (timers.go), beside
	// the relay.
	var listing sync.WaitGroup
	defer listing.Wait()
	listing.Go(func() {
		_, _ = retry(pctx, log, "listing the partition's timers", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.watchScheduled(ctx, p)
		})
	})
	for pctx.Err() == nil {
		cons, err := retry(pctx, log, "setting up the partition's timer consumer", func(ctx context.Context) (jetstream.Consumer, error) {
			return c.timerConsumer(ctx, p)
		})
		if err != nil {
			return
		}
		iter, err := cons.Messages(jetstream.PullMaxMessages(64))
		if err != nil {
			log.Warn("consuming a partition's timers", logattr.Error, err)
			if !sleepCtx(pctx, time.Second) {
				return
			}
			continue
		}
		stop := context.AfterFunc(pctx, iter.Drain)
		for {
			msg, err := iter.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || pctx.Err() != nil {
					break
				}
				log.Warn("consuming a partition's timers", logattr.Error, err)
				continue
			}
			c.relay(pctx, msg, log)
		}
		stop()
	}
}

// relay appends one fired timer to its run.
func (c *Coordinator) relay(ctx context.Context, msg jetstream.Msg, log *slog.Logger) {
	e, err := eventlog.DecodeFired(msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		c.n.malformed.Add(1)
		log.Warn("passing over a fired timer the engine does not accept", logattr.Subject, msg.Subject(), logattr.Error, err)
		_ = msg.Term()
		return
	}
	if _, err := c.store.Append(ctx, e.RunID, events.AnySeq, e); err != nil {
		if permanent(err) {
			log.Error("a fired timer cannot be appended to its run", logattr.RunID, e.RunID, logattr.Error, err)
			_ = msg.Term()
			return
		}
		n := uint64(1)
		if meta, merr := msg.Metadata(); merr == nil {
			n = meta.NumDelivered
		}
		_ = msg.NakWithDelay(c.backoff(n))
		return
	}
	_ = msg.Ack()
}

// timerConsumer returns partition p's consumer of fired timers, set up
// as partConsumer says.
func (c *Coordinator) timerConsumer(ctx context.Context, p int) (jetstream.Consumer, error) {
	name := c.opts.durable + "-timers-" + strconv.Itoa(p)
	filters := eventlog.FiredFilters(p, c.opts.partitions)
	return c.partConsumer(ctx, partConsumerSpec{
		stream: c.store.TimerStream(), name: name, what: "timer",
		filters: filters,
		startAt: c.timersStartAt,
		recorded: func(cfg jetstream.ConsumerConfig) uint64 {
			_, timers := recordedStarts(cfg)
			return timers
		},
		config: func(startAt uint64) jetstream.ConsumerConfig {
			cfg := jetstream.ConsumerConfig{
				Durable:       name,
				Description:   fmt.Sprintf("Weft coordinator partition %d of %d: fired timers", p, c.opts.partitions),
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       c.opts.ackWait,
				MaxDeliver:    -1,
				DeliverPolicy: jetstream.DeliverAllPolicy,
			}
			if startAt > 0 {
				cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, startAt
			}
			setFilters(&cfg, filters)
			return cfg
		},
	})
}
