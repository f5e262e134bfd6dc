package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/setup"
)

// EnsureConsumer returns a coordinator consumer (a partition's) on stream,
// creating it with want when it is missing. An existing consumer is used
// as it is: its filters, ack wait, max ack pending and max deliver, where
// they differ from want, are logged once (an ack wait too short for one
// coordinator would make every coordinator's events redeliver; 'weft
// admin' shows and changes them). A consumer that does not acknowledge
// explicitly would lose events: it is refused with an error wrapping
// eventlog.ErrUnsafeSetting. partitionConsumer can call it with its
// configuration.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig, log *slog.Logger) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// Created now, or by another coordinator meanwhile: checked below.
		c, err = setup.CreateConsumer(ctx, js, stream, want)
	}
	if err != nil {
		return nil, fmt.Errorf("setting up coordinator consumer %q: %w", want.Durable, err)
	}
	have := c.CachedInfo().Config
	if err := CheckConsumer(stream, have); err != nil {
		return nil, err
	}
	var diffs []setup.Diff
	if hf, wf := filters(have), filters(want); !slices.Equal(hf, wf) {
		diffs = append(diffs, setup.Diff{Setting: "filter_subjects", Have: hf, Want: wf})
	}
	diffs = setup.Compare(diffs, "ack_wait", have.AckWait, want.AckWait)
	diffs = setup.Compare(diffs, "max_ack_pending", have.MaxAckPending, want.MaxAckPending)
	diffs = setup.Compare(diffs, "max_deliver", have.MaxDeliver, want.MaxDeliver)
	setup.WarnDiffs(log, js, fmt.Sprintf("consumer %s of stream %s", want.Durable, stream), diffs)
	return c, nil
}

// CheckConsumer reports the settings of a live coordinator consumer that
// would lose events, each a *eventlog.SettingError.
func CheckConsumer(stream string, have jetstream.ConsumerConfig) error {
	if have.AckPolicy == jetstream.AckExplicitPolicy {
		return nil
	}
	return &eventlog.SettingError{
		Resource: fmt.Sprintf("consumer %s of stream %s", have.Durable, stream), Setting: "ack_policy",
		Have: have.AckPolicy.String(), Want: jetstream.AckExplicitPolicy.String(),
		Fix: fmt.Sprintf("it cannot be changed on a live consumer: stop the coordinators, delete it ('nats consumer rm %s %s') and start them again", stream, have.Durable),
	}
}

func filters(cfg jetstream.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return append([]string{cfg.FilterSubject}, cfg.FilterSubjects...)
	}
	return cfg.FilterSubjects
}
