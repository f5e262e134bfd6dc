package eventlog

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Admission: the subjects and streams of a namespace whose client writes
// pass the engine's admission (internal/admission). There the client role
// may not publish on runs' subjects at all; it asks, with a core NATS
// request, and the coordinators answer: they take a ticket, then append
// the client's event themselves.
//
//	weft.admit.start           a request to start a run (a run-started event)
//	weft.admit.signal          a request to signal or cancel a run (a
//	                           signal-received or cancel-requested event)
//	weft.tickets.starts        a ticket per start admitted, in the stream
//	                           <stream>_ADMIT_STARTS
//	weft.tickets.signals       a ticket per signal or cancel admitted, in
//	                           <stream>_ADMIT_SIGNALS
//
// A tickets stream keeps its tickets for one second (max_age) and at most
// the namespace's limit of them (max_msgs), discarding new ones: the
// server itself refuses a ticket over the limit, so the limit holds across
// every coordinator without a counter in any process's memory.
const (
	AdmitStart  = "weft.admit.start"
	AdmitSignal = "weft.admit.signal"
	// AdmitAll is the filter of both requests.
	AdmitAll = "weft.admit.*"
	// AdmitQueue is the queue group of the coordinators that answer them.
	AdmitQueue = "weft-admission"

	TicketStarts  = "weft.tickets.starts"
	TicketSignals = "weft.tickets.signals"
	// AllTickets is the filter of both tickets.
	AllTickets = "weft.tickets.*"

	// AdmitStartsSuffix and AdmitSignalsSuffix name the tickets streams
	// after the events stream ("WEFT_ADMIT_STARTS").
	AdmitStartsSuffix  = "_ADMIT_STARTS"
	AdmitSignalsSuffix = "_ADMIT_SIGNALS"

	// MetaAdmission is the events stream's metadata key that turns
	// admission on: its value is "on". Only the admin may update a
	// stream, so only the admin turns admission on or off.
	MetaAdmission = "weft.admission"
	// MetaNamespace is the events stream's metadata key naming its
	// namespace, for messages.
	MetaNamespace = "weft.namespace"

	// TicketWindow is how long a ticket counts.
	TicketWindow = time.Second
)

// AdmissionOn reports whether an events stream's configuration turns
// admission on.
func AdmissionOn(cfg jetstream.StreamConfig) bool { return cfg.Metadata[MetaAdmission] == "on" }

// TicketStreamConfig is the tickets stream of one limit: at most perSecond
// tickets on subject within any TicketWindow, discarding new ones.
func TicketStreamConfig(name, subject string, perSecond int, storage jetstream.StorageType, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: "Weft admission tickets: at most max_msgs within max_age",
		Subjects:    []string{subject},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     int64(perSecond),
		MaxAge:      TicketWindow,
		Duplicates:  TicketWindow,
		Storage:     storage,
		Replicas:    replicas,
	}
}
