package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Event is the one envelope every Weft event shares: the CloudEvents
// attributes Weft uses, the payload as JSON, and where the event was read
// from the store, its stream sequence.
type Event struct {
	ID      string
	Type    Type
	Source  string
	Time    time.Time
	RunID   string
	NodeID  string
	Attempt int
	// W3C trace context, carried as the CloudEvents distributed-tracing
	// extension.
	TraceParent string
	TraceState  string
	// Data is the payload's JSON: plain, also when it is sealed in the
	// log (seal.go).
	Data json.RawMessage
	// KeyID, on an event read from the log, names the key its data was
	// sealed with; empty when it was written plain.
	KeyID string

	// Queue is the task queue of a work item (node-ready) or of the work
	// item a worker's outcome answers; it is part of their subjects.
	Queue string
	// Checkpoint, on a decision, records the digest of a snapshot of the
	// run taken just before it (internal/coordinator): written as the
	// Weft-Checkpoint header, which only decision subjects carry, so that
	// a snapshot read from anywhere else can be checked against the log.
	Checkpoint string

	// Refused is set on an event read from the log that is not accepted:
	// junk bytes, an unknown (newer) type, or a type written on a subject
	// that does not accept it. Such an event keeps its place in the
	// history (Seq, and what could be read of ID and Type) and is passed
	// over by the fold.
	Refused error

	// Seq is the stream sequence, set when the event was read from the store.
	Seq uint64
	// Time is the writer's time; Stored is the stream's own timestamp of
	// the message, set when the event was read from the store. Durations
	// are measured on Stored: a writer cannot forge it.
	Stored time.Time
	// Restored is set on an event put back into the log from an archive
	// (HdrRestored): the stream's timestamp of its restore, while Stored
	// is the one it had when first written.
	Restored time.Time

	// subject is the subject the event was read from, if it was.
	subject string
	// decision: see IsDecision. Only the engine marks an event a
	// decision (MarkDecision, AppendDecisions); users cannot write one.
	decision bool

	payload Payload
}

// New builds an event of payload's type for a run. The id must be unique for
// what the event states: it is the de-duplication key, so a decision must get
// the same id whoever makes it (see the ID helpers). A zero time means now.
// A pointer payload is kept as the event's Payload, so that reading it back
// decodes nothing: do not change it after New.
func New(runID, id string, at time.Time, p Payload) (*Event, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding %s payload: %w", p.EventType(), err)
	}
	if at.IsZero() {
		at = time.Now()
	}
	e := &Event{
		ID:     id,
		Type:   p.EventType(),
		Source: Source,
		Time:   at.UTC(),
		RunID:  runID,
		Data:   data,
	}
	e.decision = e.Type.Decision()
	if ref, attempt, ok := nodeOf(p); ok {
		e.NodeID, e.Attempt = ref, attempt
	}
	if reflect.ValueOf(p).Kind() == reflect.Pointer {
		e.payload = p
	}
	return e, nil
}

// NewUnencoded is New for a pointer payload without its encoding: Data
// is left empty. It serves an event folded into a state before its
// payload is complete (the decider applies an activation, then attaches
// to it the routings that led to it, and builds the event it writes with
// New): the fold reads a decision's payload, never its Data. Such an
// event is never written.
func NewUnencoded(runID, id string, at time.Time, p Payload) *Event {
	if at.IsZero() {
		at = time.Now()
	}
	e := &Event{ID: id, Type: p.EventType(), Source: Source, Time: at.UTC(), RunID: runID, payload: p}
	e.decision = e.Type.Decision()
	if ref, attempt, ok := nodeOf(p); ok {
		e.NodeID, e.Attempt = ref, attempt
	}
	return e
}

// IsDecision reports whether the coordinator decided the event (as
// opposed to a fact reported by a client, a worker or a timer): for an
// event read from the log, whether it stands on a decision subject
// ("weft.r.<slot>.<run>.d.<kind>"), which only the coordinator's role may
// write; for one built with New, whether its type is always a decision.
func (e *Event) IsDecision() bool { return e.decision }

// Payload returns the event's payload, decoding Data on first use.
func (e *Event) Payload() (Payload, error) {
	if e.payload != nil {
		return e.payload, nil
	}
	p, ok := NewPayload(e.Type)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, e.Type)
	}
	if err := json.Unmarshal(e.Data, p); err != nil {
		return nil, fmt.Errorf("%w: %s data: %v", ErrMalformedEvent, e.Type, err)
	}
	e.payload = p
	return p, nil
}

// Subject is the NATS subject the event is (or was) published on; empty
// for an event that has no place in the layout (see subjects.go).
func (e *Event) Subject() string {
	s, _ := e.subjectOf()
	return s
}

func (e *Event) subjectOf() (string, error) {
	if e.subject != "" {
		return e.subject, nil
	}
	queue := e.Queue
	if e.Type == NodeReady {
		if p, err := e.Payload(); err == nil {
			queue = p.(*NodeReadyData).Queue
		}
	}
	if e.Type == NodeStep {
		if e.decision {
			return "", fmt.Errorf("%w: %s is not a decision", ErrMisplaced, e.Type)
		}
		p, err := e.Payload()
		if err != nil {
			return "", err
		}
		if !ValidQueue(queue) {
			return "", fmt.Errorf("%w: a %s event needs the queue of its work item, got %q", ErrInvalidID, e.Type, queue)
		}
		return StepSubject(e.RunID, queue, p.(*NodeStepData).Key()), nil
	}
	return subjectFor(e.RunID, e.Type, e.decision, queue)
}

// CloudEvent returns the event as a CloudEvents SDK event.
func (e *Event) CloudEvent() cloudevents.Event {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(e.ID)
	ce.SetType(string(e.Type))
	ce.SetSource(e.Source)
	ce.SetTime(e.Time)
	ce.SetSubject(e.NodeID)
	ce.SetExtension(ExtRunID, e.RunID)
	if e.NodeID != "" {
		ce.SetExtension(ExtNodeID, e.NodeID)
	}
	if e.Attempt > 0 {
		ce.SetExtension(ExtAttempt, int32(e.Attempt))
	}
	if e.TraceParent != "" {
		ce.SetExtension(ExtTraceParent, e.TraceParent)
		if e.TraceState != "" {
			ce.SetExtension(ExtTraceState, e.TraceState)
		}
	}
	// Set the encoded data directly: SetData marks []byte as base64, and the
	// data is JSON.
	ce.SetDataContentType(cloudevents.ApplicationJSON)
	ce.DataEncoded = []byte(e.Data)
	return ce
}

// fromCloudEvent maps a validated SDK event onto the envelope.
func fromCloudEvent(ce *cloudevents.Event) (*Event, error) {
	e := &Event{
		ID:     ce.ID(),
		Type:   Type(ce.Type()),
		Source: ce.Source(),
		Time:   ce.Time().UTC(),
		Data:   json.RawMessage(ce.Data()),
	}
	ext := ce.Extensions()
	var err error
	if e.RunID, err = stringExt(ext, ExtRunID); err != nil {
		return nil, err
	}
	if e.RunID == "" {
		return nil, fmt.Errorf("%w: missing extension %q", ErrMalformedEvent, ExtRunID)
	}
	if e.NodeID, err = stringExt(ext, ExtNodeID); err != nil {
		return nil, err
	}
	if e.TraceParent, err = stringExt(ext, ExtTraceParent); err != nil {
		return nil, err
	}
	if e.TraceState, err = stringExt(ext, ExtTraceState); err != nil {
		return nil, err
	}
	if v, ok := ext[ExtAttempt]; ok {
		n, err := types.ToInteger(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: extension %q: %v", ErrMalformedEvent, ExtAttempt, v)
		}
		e.Attempt = int(n)
	}
	return e, nil
}

func stringExt(ext map[string]any, name string) (string, error) {
	v, ok := ext[name]
	if !ok {
		return "", nil
	}
	s, err := types.ToString(v)
	if err != nil {
		return "", fmt.Errorf("%w: extension %q: %v", ErrMalformedEvent, name, err)
	}
	return s, nil
}

// headerPrefix is the CloudEvents binary-mode attribute prefix on NATS.
const headerPrefix = "ce-"

var ceSpecs = spec.WithPrefix(headerPrefix)

// encode writes the event as a NATS message in CloudEvents binary content
// mode on its subject, with the id as Nats-Msg-Id. It writes the "ce-*"
// headers directly (codec.go); encodeSDK, the same through the CloudEvents
// SDK's binding, is what tests hold it to.
// With a key ring in use (UseKeys), the data is sealed (seal.go).
func encode(e *Event) (*nats.Msg, error) { return encodeFast(e, active.Load()) }

// encodeSDK is encode through the CloudEvents SDK's binding.
func encodeSDK(e *Event) (*nats.Msg, error) {
	ce := e.CloudEvent()
	if err := ce.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	subject, err := e.subjectOf()
	if err == nil {
		err = startPlaced(e)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s event of run %q: %w", e.Type, e.RunID, err)
	}
	msg := nats.NewMsg(subject)
	w := &headerWriter{msg: msg}
	if _, err := binding.Write(context.Background(), binding.ToMessage(&ce), nil, w); err != nil {
		return nil, fmt.Errorf("encoding %s event: %w", e.Type, err)
	}
	msg.Header.Set(nats.MsgIdHdr, e.ID)
	if e.TraceParent != "" {
		// Plain W3C headers too, for NATS-native propagators.
		msg.Header.Set("traceparent", e.TraceParent)
		if e.TraceState != "" {
			msg.Header.Set("tracestate", e.TraceState)
		}
	}
	return msg, nil
}

// headerWriter is a binding.BinaryWriter onto NATS headers.
type headerWriter struct{ msg *nats.Msg }

func (w *headerWriter) Start(context.Context) error { return nil }
func (w *headerWriter) End(context.Context) error   { return nil }

func (w *headerWriter) SetData(r io.Reader) error {
	b, err := io.ReadAll(r)
	w.msg.Data = b
	return err
}

func (w *headerWriter) SetAttribute(a spec.Attribute, v any) error {
	if v == nil {
		return nil
	}
	s, err := types.Format(v)
	if err != nil {
		return err
	}
	if a.Kind() == spec.DataContentType {
		w.msg.Header.Set("content-type", s)
		return nil
	}
	w.msg.Header.Set(headerPrefix+a.Name(), s)
	return nil
}

func (w *headerWriter) SetExtension(name string, v any) error {
	if v == nil {
		return nil
	}
	s, err := types.Format(v)
	if err != nil {
		return err
	}
	w.msg.Header.Set(headerPrefix+name, s)
	return nil
}

// natsMessage reads a NATS message in binary content mode as a CloudEvents
// binding.Message, so that the SDK builds and validates the event.
type natsMessage struct {
	hdr  nats.Header
	data []byte
}

func (m *natsMessage) ReadEncoding() binding.Encoding {
	if m.hdr.Get(ceSpecs.PrefixedSpecVersionName()) != "" {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m *natsMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *natsMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	version := ceSpecs.Version(m.hdr.Get(ceSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return binding.ErrUnknownEncoding
	}
	for name, vals := range m.hdr {
		if len(vals) == 0 {
			continue
		}
		lname := strings.ToLower(name)
		switch {
		case lname == "content-type":
			if err := w.SetAttribute(version.AttributeFromKind(spec.DataContentType), vals[0]); err != nil {
				return err
			}
		case strings.HasPrefix(lname, headerPrefix):
			if a := version.Attribute(lname); a != nil {
				if err := w.SetAttribute(a, vals[0]); err != nil {
					return err
				}
			} else if err := w.SetExtension(strings.TrimPrefix(lname, headerPrefix), vals[0]); err != nil {
				return err
			}
		}
	}
	if len(m.data) > 0 {
		return w.SetData(bytes.NewReader(m.data))
	}
	return nil
}

func (m *natsMessage) Finish(error) error { return nil }

// GetAttribute and GetExtension make natsMessage a
// binding.MessageMetadataReader, as the SDK requires of binary messages.
func (m *natsMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	version := ceSpecs.Version(m.hdr.Get(ceSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return nil, nil
	}
	a := version.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		if v := m.hdr.Get("content-type"); v != "" {
			return a, v
		}
		return a, nil
	}
	if v := m.hdr.Get(headerPrefix + a.Name()); v != "" {
		return a, v
	}
	return a, nil
}

func (m *natsMessage) GetExtension(name string) any {
	if v := m.hdr.Get(headerPrefix + name); v != "" {
		return v
	}
	return nil
}

// Decode reads an event from a NATS message's subject, headers and body. It
// checks everything a reader relies on: a valid CloudEvent, a known type, a
// run id that matches the subject, a type the subject accepts, and data
// that decodes as the type's payload. Every failure wraps
// ErrMalformedEvent, ErrUnknownType or ErrMisplaced.
func Decode(subject string, hdr nats.Header, data []byte) (*Event, error) {
	if err := checkServerHeaders(subject, hdr); err != nil {
		return nil, err
	}
	s := active.Load()
	if e, ok, err := decodeFast(subject, hdr, data, s); ok {
		return e, err
	}
	return decodeSDK(subject, hdr, data, s)
}

// decodeSDK is Decode through the CloudEvents SDK's binding: the path for
// messages with attributes the fast decoder does not know, and what tests
// hold the fast decoder to.
func decodeSDK(subject string, hdr nats.Header, data []byte, s *sealer) (*Event, error) {
	m := &natsMessage{hdr: hdr, data: data}
	if m.ReadEncoding() != binding.EncodingBinary {
		return nil, fmt.Errorf("%w: %s: not a CloudEvent in binary mode (no %s header)", ErrMalformedEvent, subject, ceSpecs.PrefixedSpecVersionName())
	}
	ce, err := binding.ToEvent(context.Background(), m)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedEvent, subject, err)
	}
	if err := ce.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedEvent, subject, err)
	}
	e, err := fromCloudEvent(ce)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	keyID, err := stringExt(ce.Extensions(), ExtKeyID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if err := unseal(subject, e, ce.DataContentType(), keyID, s); err != nil {
		return nil, err
	}
	return placed(subject, e)
}

// placed checks a decoded envelope against its subject and decodes its
// payload: a known type, on a subject that accepts it, of the subject's
// run, with data that decodes as the type's payload.
func placed(subject string, e *Event) (*Event, error) {
	if !e.Type.Known() {
		return nil, fmt.Errorf("%w: %s: %q", ErrUnknownType, subject, e.Type)
	}
	p, ok := Parse(subject)
	if !ok {
		return nil, fmt.Errorf("%w: %s: not a run event subject", ErrMisplaced, subject)
	}
	if p.Run != e.RunID {
		return nil, fmt.Errorf("%w: %s: runid %q does not match the subject", ErrMalformedEvent, subject, e.RunID)
	}
	if err := checkPlace(e.Type, p); err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	e.decision = p.Class == ClassCoordinator
	e.Queue = p.Queue
	e.subject = subject
	pl, err := e.Payload()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if s, ok := pl.(*NodeStepData); ok != (p.Node != "") || (ok && p.Node != StepToken(s.Key())) {
		return nil, fmt.Errorf("%w: %s: a step is accepted on its node's step subject only", ErrMisplaced, subject)
	}
	if r, ok := pl.(*NodeReadyData); ok && r.Queue != p.Queue {
		return nil, fmt.Errorf("%w: %s: a work item of queue %q", ErrMisplaced, subject, r.Queue)
	}
	if r, ok := pl.(*RunStartedData); ok {
		if err := checkStart(subject, p, r); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// DecodeStored reads a message of a run's history as Decode does, but never
// fails: a message that Decode refuses comes back as an event with Refused
// set, carrying what could be read of it (its id, type and node), its
// subject and its sequence, so that it keeps its place in the history and
// is passed over, not lost. Refused events are never applied.
func DecodeStored(subject string, hdr nats.Header, data []byte, seq uint64, stored time.Time) *Event {
	e, err := Decode(subject, hdr, data)
	if err != nil {
		run, _ := RunOf(subject)
		e = &Event{
			ID:      hdr.Get(headerPrefix + "id"),
			Type:    Type(hdr.Get(headerPrefix + "type")),
			RunID:   run,
			NodeID:  hdr.Get(headerPrefix + ExtNodeID),
			Refused: err,
			subject: subject,
		}
		e.decision = strings.HasPrefix(subject, RunBase(run)+ClassCoordinator+".")
	}
	e.Seq, e.Stored = seq, stored.UTC()
	if v := hdr.Get(HdrRestored); v != "" {
		// The original stamp of a restored message. A header is the
		// writer's, so it may only make the event older than the stream
		// says, never newer: a writer can backdate only its own event's
		// times, which decide nothing (timeouts are timers, order is
		// the log's).
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil && !t.After(stored) {
			e.Restored, e.Stored = e.Stored, t.UTC()
		}
	}
	return e
}

// nodeScoped is implemented by payloads that concern one node.
type nodeScoped interface{ nodeAttempt() (string, int) }

// nodeOf returns the node id and attempt an event concerns, if any.
func nodeOf(p Payload) (string, int, bool) {
	if n, ok := p.(nodeScoped); ok {
		node, attempt := n.nodeAttempt()
		return node, attempt, node != ""
	}
	return "", 0, false
}

func itoa(n int) string { return strconv.Itoa(n) }

// JetStream headers that make the server write or remove messages on a
// writer's behalf, which NATS permissions (on subjects only) do not see.
const (
	hdrScheduler   = "Nats-Scheduler"
	hdrMsgTTL      = "Nats-TTL"
	hdrScheduleHdr = "Nats-Schedule"
)

// checkServerHeaders refuses events the server wrote or will remove on a
// writer's behalf: a message with a per-message TTL (its writer would make
// it vanish from the history after the coordinator acted on it), a message
// that is itself a schedule, and a fired schedule that is not one of the
// coordinator's timers of the run, firing onto the run's timer subject (a
// writer who may publish a schedule on its own subject could otherwise
// have the server write any event, a decision included, anywhere).
func checkServerHeaders(subject string, hdr nats.Header) error {
	if hdr == nil {
		return nil
	}
	if hdr.Get(hdrMsgTTL) != "" {
		return fmt.Errorf("%w: %s: an event with a %s header", ErrMisplaced, subject, hdrMsgTTL)
	}
	if hdr.Get(hdrScheduleHdr) != "" {
		return fmt.Errorf("%w: %s: a schedule, not an event", ErrMisplaced, subject)
	}
	by := hdr.Get(hdrScheduler)
	if by == "" {
		return nil
	}
	p, ok := Parse(subject)
	if !ok || RunBase(p.Run)+p.Class+"."+p.Kind != FiredTarget(p.Run) || !strings.HasPrefix(by, strings.TrimSuffix(ScheduleFilter(p.Run), ">")) {
		return fmt.Errorf("%w: %s: written by the schedule %s, which is not one of the run's timers", ErrMisplaced, subject, by)
	}
	return nil
}

// decodeFired reads a timer that fired in the timers stream (on
// FiredSubject(run)) as the TimerFired event the coordinator appends to
// the run: only the coordinator writes the timers stream, and the server
// stamps the fired copy with the schedule it came from (Nats-Scheduler),
// which must be one of the run's timers.
func decodeFired(subject string, hdr nats.Header, data []byte) (*Event, error) {
	run, ok := FiredRun(subject)
	if !ok {
		return nil, fmt.Errorf("%w: %s: not a fired timer's subject", ErrMisplaced, subject)
	}
	if by := hdr.Get(hdrScheduler); !strings.HasPrefix(by, strings.TrimSuffix(ScheduleFilter(run), ">")) {
		return nil, fmt.Errorf("%w: %s: fired by %q, not one of the run's timers", ErrMisplaced, subject, by)
	}
	target := FiredTarget(run)
	e, err := Decode(target, hdr, data)
	if err != nil {
		return nil, err
	}
	if e.Type != TimerFired {
		return nil, fmt.Errorf("%w: %s: a %s fired as a timer", ErrMisplaced, subject, e.Type)
	}
	e.subject = "" // appended anew to the run
	return e, nil
}
