package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
)

// Event is the one envelope every event shares (a CloudEvent with Weft's
// extensions); see internal/eventlog/envelope.go for its fields.
type Event = eventlog.Event

// New builds an event of payload p's type for run runID, with id id
// (empty: a random one) and time at.
func New(runID, id string, at time.Time, p Payload) (*Event, error) {
	return eventlog.New(runID, id, at, p)
}

// Decode reads a NATS message as an event: the one decoder, which checks
// the event's type against its subject (ErrMisplaced).
func Decode(subject string, hdr nats.Header, data []byte) (*Event, error) {
	return eventlog.Decode(subject, hdr, data)
}

// DecodeStored reads a stored message as the event at stream sequence seq;
// it never fails: a message that is not a valid event keeps its place in
// a history, with Event.Refused set.
func DecodeStored(subject string, hdr nats.Header, data []byte, seq uint64, stored time.Time) *Event {
	return eventlog.DecodeStored(subject, hdr, data, seq, stored)
}

// Store is the log of runs as clients and workers read and append it.
type Store = eventlog.Store

// AnySeq, as an append's expected last sequence, skips the optimistic
// concurrency check.
const AnySeq = eventlog.AnySeq

// DefaultStream is the events stream's default name.
const DefaultStream = eventlog.DefaultStream

// LocalQueue is the queue of the nodes the coordinator runs itself.
const LocalQueue = eventlog.LocalQueue

// NewRunID returns a new run id, sortable by creation time.
func NewRunID() string { return eventlog.NewRunID() }

// NewNonce returns a random nonce for a run's start
// (RunStartedData.Nonce), from which the ids of its child runs are
// derived.
func NewNonce() string { return eventlog.NewNonce() }

// Option configures Open.
type Option = eventlog.Option

// Open sets up the events stream and returns the store (see
// internal/eventlog.Open: an existing stream is used with its own
// settings and never changed).
func Open(ctx context.Context, js jetstream.JetStream, opts ...Option) (Store, error) {
	return eventlog.Open(ctx, js, opts...)
}

// WithStream names the events stream (default "WEFT").
func WithStream(name string) Option { return eventlog.WithStream(name) }

// WithStorage chooses file (default) or memory storage, for a stream Open
// creates.
func WithStorage(s jetstream.StorageType) Option { return eventlog.WithStorage(s) }

// WithReplicas sets the replica count (default 1) of a stream Open creates.
func WithReplicas(n int) Option { return eventlog.WithReplicas(n) }

// WithDuplicates sets the de-duplication window (default 2 minutes) of a
// stream Open creates.
func WithDuplicates(d time.Duration) Option { return eventlog.WithDuplicates(d) }

// WithMaxAge sets how long events are kept (default forever) by a stream
// Open creates.
func WithMaxAge(d time.Duration) Option { return eventlog.WithMaxAge(d) }

// WithLogger sets where Open logs the settings of an existing stream that
// differ from the options (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return eventlog.WithLogger(l) }

// The errors callers check with errors.Is (internal/eventlog/errors.go
// says when each is returned).
var (
	ErrMalformedEvent    = eventlog.ErrMalformedEvent
	ErrUnknownType       = eventlog.ErrUnknownType
	ErrConflict          = eventlog.ErrConflict
	ErrRunExists         = eventlog.ErrRunExists
	ErrRunNotFound       = eventlog.ErrRunNotFound
	ErrPayloadTooLarge   = eventlog.ErrPayloadTooLarge
	ErrMisplaced         = eventlog.ErrMisplaced
	ErrDuplicateMismatch = eventlog.ErrDuplicateMismatch
	ErrInvalidID         = eventlog.ErrInvalidID
	ErrUnsafeSetting     = eventlog.ErrUnsafeSetting
)

// ParentClaimError is the refusal of a client's run-started that names a
// parent run: only a run's coordinator starts its child runs (it wraps
// ErrMisplaced; errors.As finds what it claimed).
type ParentClaimError = eventlog.ParentClaimError

// TriggerClaimError is the refusal of a client's run-started that names a
// schedule, event trigger or webhook: only the engine starts their runs,
// on the run's decision subject (it wraps ErrMisplaced).
type TriggerClaimError = eventlog.TriggerClaimError

// GraphDigestError is the refusal of a run-started whose graphDigest is
// not the digest of the graph it carries (it wraps ErrMalformedEvent):
// readers keep compiled graphs by digest, so the digest is checked
// against the graph's bytes before it is believed.
type GraphDigestError = eventlog.GraphDigestError

// GraphDigest is the digest a run-started records for a graph's canonical
// JSON ("sha256:<hex>", as pkg/graph's Graph.Digest).
func GraphDigest(graph []byte) string { return eventlog.GraphDigest(graph) }
