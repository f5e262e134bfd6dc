// Package workqueue is the task queues of workers on the events stream,
// and the bucket their announcements live in: what the coordinator, the
// worker and the tools set up, and users never call.
//
// What it offers: QueueConsumer and QueueName (a queue's durable consumer,
// "work-<queue>"), EnsureQueue and QueueConfig (the consumer, filtered on
// the queue's node-ready subjects), QueueOptions, DefaultAckWait and
// DefaultMaxAckPending; WorkersBucket, WorkersKVConfig, AnnounceTTL and
// DefaultAnnounceInterval, the announcements bucket (pkg/worker announces,
// worker.LiveWorkers reads).
package workqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Queue consumer defaults, applied when EnsureQueue creates a consumer.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxAckPending = 1000
)

// QueueOptions are the settings of a task queue's consumer, used when
// EnsureQueue creates it. A zero field means the default. An existing
// consumer keeps the settings it has: a worker started with another ack
// wait must not make running nodes redeliver (and run twice) on every
// other worker; the difference is logged once instead, and changed on
// purpose with 'weft admin apply -ack-wait'.
type QueueOptions struct {
	// AckWait is how long a delivered item may go without an ack or a
	// heartbeat before it is delivered again (default 30s).
	AckWait time.Duration
	// MaxAckPending bounds the items delivered and not yet acknowledged,
	// across all workers of the queue (default 1000).
	MaxAckPending int
	// MaxDeliver bounds deliveries of one item (default -1, unlimited).
	MaxDeliver int
	// Logger receives the settings of an existing consumer that differ
	// from these (default slog.Default()).
	Logger *slog.Logger
}

// QueueConsumer is the name of the durable consumer the workers of a task
// queue share.
func QueueConsumer(queue string) string { return "work-" + queue }

// QueueName is the task queue of a queue consumer's name, if it is one.
func QueueName(consumer string) (string, bool) { return strings.CutPrefix(consumer, "work-") }

// EnsureQueue returns the consumer of a task queue on the events stream,
// creating it if it is missing. A new consumer delivers only events
// published after its creation (from the stream's next sequence, fixed at
// creation), so the coordinator calls EnsureQueue before it appends the
// first node-ready event of a queue. An existing consumer is used as it
// is: the non-zero fields of opts that differ from it are logged once,
// never applied. Its filter subject, which is Weft's and no operator's
// choice, is brought to the queue's. A consumer without explicit acks is
// refused (an error wrapping eventlog.ErrUnsafeSetting). EnsureQueue is safe
// to call concurrently from many processes.
func EnsureQueue(ctx context.Context, js jetstream.JetStream, stream, queue string, opts QueueOptions) (jetstream.Consumer, error) {
	if !eventlog.ValidToken(queue) {
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
		return checkQueue(ctx, js, stream, queue, c, opts)
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
	cfg := QueueConfig(queue, opts)
	cfg.OptStartSeq = s.CachedInfo().State.LastSeq + 1
	c, err = setup.CreateConsumer(ctx, js, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating consumer of queue %q: %w", queue, err)
	}
	// Another process may have created it meanwhile, with other settings.
	return checkQueue(ctx, js, stream, queue, c, opts)
}

// QueueConfig is the consumer EnsureQueue creates for a queue (without its
// start sequence, which is the stream's next at creation).
func QueueConfig(queue string, opts QueueOptions) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       QueueConsumer(queue),
		Description:   "Weft task queue " + queue,
		FilterSubject: eventlog.QueueFilter(queue),
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
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
	return cfg
}

// checkQueue checks an existing queue consumer, logs how it differs from
// opts, and brings its filter to the queue's.
func checkQueue(ctx context.Context, js jetstream.JetStream, stream, queue string, c jetstream.Consumer, opts QueueOptions) (jetstream.Consumer, error) {
	cfg := c.CachedInfo().Config
	resource := fmt.Sprintf("consumer %s of stream %s", cfg.Durable, stream)
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, &eventlog.SettingError{Resource: resource, Setting: "ack_policy", Have: cfg.AckPolicy.String(), Want: jetstream.AckExplicitPolicy.String(),
			Fix: fmt.Sprintf("it cannot be changed on a live consumer: delete it ('nats consumer rm %s %s') when its queue is idle, and a worker creates it again", stream, cfg.Durable)}
	}
	var diffs []setup.Diff
	if opts.AckWait > 0 {
		diffs = setup.Compare(diffs, "ack_wait", cfg.AckWait, opts.AckWait)
	}
	if opts.MaxAckPending > 0 {
		diffs = setup.Compare(diffs, "max_ack_pending", cfg.MaxAckPending, opts.MaxAckPending)
	}
	if opts.MaxDeliver != 0 {
		diffs = setup.Compare(diffs, "max_deliver", cfg.MaxDeliver, opts.MaxDeliver)
	}
	setup.WarnDiffs(opts.Logger, js, resource, diffs)
	f := eventlog.QueueFilter(queue)
	if cfg.FilterSubject == f && len(cfg.FilterSubjects) == 0 {
		return c, nil
	}
	cfg.FilterSubject, cfg.FilterSubjects = f, nil
	c, err := setup.UpdateConsumer(ctx, js, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("updating the filter of the consumer of queue %q: %w", queue, err)
	}
	return c, nil
}
