package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// The coordinators' consumer. The first coordinator creates it with its
// own settings; later ones use it as it is, logging once the settings that
// differ from theirs (an ack wait too short for one coordinator would make
// every coordinator's events redeliver). 'weft admin apply' changes them on
// purpose. A consumer that would lose events (no explicit acks, a filter
// that leaves run events out) is refused.

// DefaultAckWait is the coordinators' consumer's ack wait when created.
const DefaultAckWait = 10 * time.Second

// ConsumerConfig is the coordinators' durable consumer as created.
func ConsumerConfig(durable string, ackWait time.Duration) jetstream.ConsumerConfig {
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	return jetstream.ConsumerConfig{
		Durable:     durable,
		Description: "Weft coordinators: every run event, in log order",
		// No filter: the whole stream is the fast path on the server;
		// pending schedules (weft.t.>) are passed over.
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: 20000,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// EnsureConsumer returns the coordinators' consumer on stream, creating it
// with want when it is missing. An existing consumer is used as it is: its
// ack wait, max ack pending and max deliver, where they differ from want,
// are logged once. It fails with an error wrapping events.ErrUnsafeSetting
// when the consumer does not acknowledge explicitly or filters out run
// events.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig, log *slog.Logger) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		c, err = js.CreateConsumer(ctx, stream, want)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = js.Consumer(ctx, stream, want.Durable)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("setting up coordinator consumer %q: %w", want.Durable, err)
	}
	have := c.CachedInfo().Config
	if err := CheckConsumer(stream, have); err != nil {
		return nil, err
	}
	resource := fmt.Sprintf("consumer %s of stream %s", want.Durable, stream)
	var diffs []setup.Diff
	diffs = setup.Compare(diffs, "ack_wait", have.AckWait, want.AckWait)
	diffs = setup.Compare(diffs, "max_ack_pending", have.MaxAckPending, want.MaxAckPending)
	diffs = setup.Compare(diffs, "max_deliver", have.MaxDeliver, want.MaxDeliver)
	setup.WarnDiffs(log, js, resource, diffs)
	return c, nil
}

// CheckConsumer reports the settings of a live coordinators' consumer that
// would lose events, each a *events.SettingError.
func CheckConsumer(stream string, have jetstream.ConsumerConfig) error {
	resource := fmt.Sprintf("consumer %s of stream %s", have.Durable, stream)
	fix := fmt.Sprintf("it cannot be changed on a live consumer: stop the coordinators, delete it ('nats consumer rm %s %s') and start them again", stream, have.Durable)
	var errs []error
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		errs = append(errs, &events.SettingError{Resource: resource, Setting: "ack_policy", Have: have.AckPolicy.String(), Want: jetstream.AckExplicitPolicy.String(), Fix: fix})
	}
	filters := have.FilterSubjects
	if have.FilterSubject != "" {
		filters = append(filters, have.FilterSubject)
	}
	if len(filters) > 0 && !events.SubjectsCover(filters, events.AllEvents) {
		errs = append(errs, &events.SettingError{Resource: resource, Setting: "filter_subjects", Have: fmt.Sprintf("%q", filters), Want: "none, or one covering " + events.AllEvents, Fix: fix})
	}
	return errors.Join(errs...)
}
