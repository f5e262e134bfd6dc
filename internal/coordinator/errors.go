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
//     maxDeliveries times; then the run fails the same way.

// ErrBadSnapshot is a stored snapshot that does not decode, is not its
// run's, or is not the one the log attests; it is discarded.
var ErrBadSnapshot = errors.New("coordinator: snapshot not attested by the log")

// maxDeliveries bounds the deliveries of one event whose handling fails
// for a reason that is neither transient nor known to be permanent.
const maxDeliveries = 20

// Back-off of a failed event's redelivery: doubling from backoffMin, at
// most backoffMax.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 10 * time.Second
)

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
func backoff(n uint64) time.Duration {
	d := backoffMin
	for i := uint64(1); i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
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
	if ent.state.Status.Ended() || ent.state.Status == projection.RunPending {
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
	c.n.failedRuns.Add(1)
	// Its timers go when the run-failed comes back through the consumer
	// and the ended run is handled (syncTimers).
	c.log.ErrorContext(ctx, "failed a run that cannot be decided", logattr.RunID, e.RunID, logattr.Seq, e.Seq, logattr.EventType, e.Type, logattr.Error, cause)
	return nil
}
