package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
)

// Queue consumer defaults, applied when EnsureQueue creates a consumer.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxAckPending = 1000
)

// QueueOptions are the settings of a task queue's consumer. A zero field
// means "the default when the consumer is created, and as it is otherwise",
// so that callers that do not care (the coordinator) never undo what a
// worker fleet configured.
type QueueOptions struct {
	// AckWait is how long a delivered item may go without an ack or a
	// heartbeat before it is delivered again (default 30s).
	AckWait time.Duration
	// MaxAckPending bounds the items delivered and not yet acknowledged,
	// across all workers of the queue (default 1000).
	MaxAckPending int
	// MaxDeliver bounds deliveries of one item (default -1, unlimited).
	MaxDeliver int
}

// QueueConsumer is the name of the durable consumer the workers of a task
// queue share.
func QueueConsumer(queue string) string { return "work-" + queue }

// EnsureQueue returns the consumer of a task queue on the events stream,
// creating it if it is missing. A new consumer delivers only events
// published after its creation (from the stream's next sequence, fixed at
// creation), so the coordinator calls EnsureQueue before
// it appends the first node-ready event of a queue. An existing consumer
// keeps its delivery policy (which JetStream cannot change); the non-zero
// fields of opts, and the filter subject, are updated if they differ.
// EnsureQueue is safe to call concurrently from many processes.
func EnsureQueue(ctx context.Context, js jetstream.JetStream, stream, queue string, opts QueueOptions) (jetstream.Consumer, error) {
	if !events.ValidToken(queue) {
		return nil, fmt.Errorf("queue %q: %w", queue, events.ErrInvalidID)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	name := QueueConsumer(queue)
	c, err := js.Consumer(ctx, stream, name)
	switch {
	case err == nil:
		return updateQueue(ctx, js, stream, queue, c, opts)
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("looking up consumer of queue %q: %w", queue, err)
	}
	// Start at a fixed sequence, not "new": a replicated consumer whose
	// leader dies before its state is replicated resolves "new" again on
	// the next leader, jumping past work not yet delivered. A fixed start
	// at worst redelivers (at-least-once) and never skips.
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s for queue %q: %w", stream, queue, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "Weft task queue " + queue,
		FilterSubject: events.QueueFilter(queue),
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   s.CachedInfo().State.LastSeq + 1,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       DefaultAckWait,
		MaxAckPending: DefaultMaxAckPending,
		MaxDeliver:    -1,
	}
	if opts.AckWait > 0 {
		cfg.AckWait = opts.AckWait
	}
	if opts.MaxAckPending > 0 {
		cfg.MaxAckPending = opts.MaxAckPending
	}
	if opts.MaxDeliver != 0 {
		cfg.MaxDeliver = opts.MaxDeliver
	}
	c, err = js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another process created it meanwhile, with other settings.
		if c, err = js.Consumer(ctx, stream, name); err == nil {
			return updateQueue(ctx, js, stream, queue, c, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating consumer of queue %q: %w", queue, err)
	}
	return c, nil
}

func updateQueue(ctx context.Context, js jetstream.JetStream, stream, queue string, c jetstream.Consumer, opts QueueOptions) (jetstream.Consumer, error) {
	cfg := c.CachedInfo().Config
	changed := false
	if f := events.QueueFilter(queue); cfg.FilterSubject != f || len(cfg.FilterSubjects) > 0 {
		cfg.FilterSubject, cfg.FilterSubjects, changed = f, nil, true
	}
	if opts.AckWait > 0 && cfg.AckWait != opts.AckWait {
		cfg.AckWait, changed = opts.AckWait, true
	}
	if opts.MaxAckPending > 0 && cfg.MaxAckPending != opts.MaxAckPending {
		cfg.MaxAckPending, changed = opts.MaxAckPending, true
	}
	if opts.MaxDeliver != 0 && cfg.MaxDeliver != opts.MaxDeliver {
		cfg.MaxDeliver, changed = opts.MaxDeliver, true
	}
	if !changed {
		return c, nil
	}
	c, err := js.UpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("updating consumer of queue %q: %w", queue, err)
	}
	return c, nil
}
