package events

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
)

// internals is the engine's way in (eventlog.Internals), typed by
// internal/eventstore: what only the engine may do with events, kept out
// of this package's surface.
type internals struct{}

func init() { eventlog.Internals = internals{} }

// MarkDecision marks an event built in memory a coordinator decision.
func (internals) MarkDecision(e *Event) { e.decision = true }

// Encode writes an event as the NATS message it is appended as.
func (internals) Encode(e *Event) (*nats.Msg, error) { return encode(e) }

// DecodeFired reads a fired timer as the event appended to its run.
func (internals) DecodeFired(subject string, hdr nats.Header, data []byte) (*Event, error) {
	return decodeFired(subject, hdr, data)
}

// StreamConfig is the events stream Open creates with opts.
func (internals) StreamConfig(opts ...Option) jetstream.StreamConfig { return streamConfig(opts...) }
