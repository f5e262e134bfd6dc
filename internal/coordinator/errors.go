package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Errors are classified so that every run ends:
//
//   - Transient: NATS is slow or away (timeouts, no responders, a leader
//     election, a lost connection) or another coordinator decided first
//     (a conflict). The event is handed back and handled again after a
//     capped exponential back-off (backoff), for as long as it takes: the
//     run is not at fault.
//   - Permanent: a decision that can never be written (an event over the
//     server's size limit, an id that cannot be a subject token, an event
//     the store refuses as malformed). Deciding again from the same state
//     gives the same decision, so retrying is a loop: the run fails at
//     once, with an error event that says which event was being handled
//     and why (fail).
//   - Anything else is retried like a transient error, but at most
//     DefaultMaxDeliveries times (WithRedelivery); then the run fails the
//     same way.

// ErrBadSnapshot is a stored snapshot that does not decode, is not its
// run's, or is not the one the log attests; it is discarded.
var ErrBadSnapshot = errors.New("coordinator: snapshot not attested by the log")

// DefaultMaxDeliveries bounds the deliveries of one event whose handling
// fails for a reason that is neither transient nor known to be permanent
// (an event sealed under a key this coordinator lacks among them): with
// the default back-off, about two and a half minutes of tries.
const DefaultMaxDeliveries = 20

// Back-off of a failed event's redelivery by default: doubling from
// DefaultBackoffMin, at most DefaultBackoffMax.
const (
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
)

// WithRedelivery sets how often an event whose handling fails (neither
// transiently nor for good) is tried before its run fails, and the
// back-off between tries: doubling from first, at most most. Zero or less
// keeps a default (DefaultMaxDeliveries, DefaultBackoffMin,
// DefaultBackoffMax). A deployment that would rather fail such runs
// sooner (or tests of the end of the road) shortens them.
func WithRedelivery(tries int, first, most time.Duration) Option {
	return func(o *options) {
		if tries > 0 {
			o.maxDeliveries = tries
		}
		if first > 0 {
			o.backoffMin = first
		}
		if most > 0 {
			o.backoffMax = most
		}
		o.backoffMax = max(o.backoffMax, o.backoffMin)
	}
}

// FailureDecision is the failure type of a run whose next decision could
// not be written.
const FailureDecision = "DecisionFailed"

// permanent reports whether err can never go away by deciding again.
func permanent(err error) bool {
	return errors.Is(err, events.ErrPayloadTooLarge) || errors.Is(err, events.ErrInvalidID) ||
		errors.Is(err, events.ErrMisplaced) || errors.Is(err, events.ErrMalformedEvent) ||
		errors.Is(err, events.ErrDuplicateMismatch)
}

// transient reports whether err says NATS is slow or away, or the log
// moved on: worth waiting for however long it takes.
func transient(err error) bool {
	for _, t := range []error{
		events.ErrConflict, context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled, jetstream.ErrStreamNotFound,
	} {
		if errors.Is(err, t) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503
}

// backoff is the wait before the next delivery of an event that failed
// on its delivery n (1-based).
func (c *Coordinator) backoff(n uint64) time.Duration {
	d, most := c.opts.backoffMin, c.opts.backoffMax
	for i := uint64(1); i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// fail ends a run that cannot be decided: it folds the run afresh (the
// cached state holds the decision that failed) and appends a run-failed
// that names the event being handled and the error. A run that ended
// meanwhile is left as it is.
func (c *Coordinator) fail(ctx context.Context, e *events.Event, cause error) error {
	c.cache.del(e.RunID)
	// Lenient: what this coordinator cannot read is what it fails the
	// run for (keyMissing); the run's status and last decision it can.
	ent, _, err := c.readEntry(ctx, e, true, true)
	if err != nil {
		return err
	}
	defer c.cache.del(e.RunID)
	// A run whose start this coordinator cannot open is failed all the
	// same (its readers with the key see it fail, naming the key): left
	// pending, it would wait for ever.
	if ent.state.Status.Ended() || ent.state.Status == projection.RunPending && !ent.sealedStart {
		return nil
	}
	f := events.Failure{Type: FailureDecision, Message: fmt.Sprintf("deciding after event %d (%s) of run %s: %v", e.Seq, e.Type, e.RunID, cause)}
	if errors.Is(cause, events.ErrPayloadTooLarge) {
		f.Type = events.FailurePayloadTooLarge
	}
	ev, err := events.New(e.RunID, eventlog.DecisionID(e.RunID, events.RunFailed), c.opts.now(), &events.RunFailedData{Error: f, Node: e.NodeID})
	if err != nil {
		return err
	}
	telemetry.Inject(ctx, ev)
	if _, err := c.store.AppendDecisions(ctx, e.RunID, ent.lastDecision, ev); err != nil {
		return fmt.Errorf("failing run %s: %w", e.RunID, err)
	}
	c.noticeEnd(e.RunID, ev)
	c.n.failedRuns.Add(1)
	// Its timers go when the run-failed comes back through the consumer
	// and the ended run is handled (syncTimers).
	c.log.ErrorContext(ctx, "failed a run that cannot be decided", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type, logattr.Error, cause)
	return nil
}
