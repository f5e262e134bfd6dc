package eventlog

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformedEvent is wrapped by every error about an event that is not
	// a valid Weft CloudEvent: not binary mode, invalid attributes, broken
	// JSON data, a run id that does not match its subject.
	ErrMalformedEvent = errors.New("malformed event")
	// ErrUnknownType is wrapped when an event's type is not in the catalogue.
	ErrUnknownType = errors.New("unknown event type")
	// ErrConflict means the run's log moved on since the state an append was
	// decided from: re-read the run and decide again.
	ErrConflict = errors.New("run log changed (optimistic concurrency conflict)")
	// ErrRunExists means a run-started event was appended for a run id that
	// already has a history.
	ErrRunExists = errors.New("run already exists")
	// ErrRunNotFound means a run has no
	ErrRunNotFound = errors.New("run not found")
	// ErrPayloadTooLarge means an event does not fit in one message.
	ErrPayloadTooLarge = errors.New("event too large for one message")
	// ErrMisplaced means an event's type is not accepted on its subject:
	// a writer passing one type off as another (see subjects.go).
	ErrMisplaced = errors.New("event type not accepted on its subject")
	// ErrDuplicateMismatch means JetStream answered an append as a
	// duplicate, and the message stored under the event's id is not the
	// event: someone took its id first.
	ErrDuplicateMismatch = errors.New("another message holds the event's id")
	// ErrInvalidID means a run id, node id or queue is not a valid subject token.
	ErrInvalidID = errors.New("invalid id")
	// ErrUnsafeSetting is wrapped by Open's error when the live events
	// stream lacks a setting Weft relies on, and by the worker's and the
	// coordinator's about their consumers (see SettingError): the error
	// names the setting and the command that fixes it.
	ErrUnsafeSetting = errors.New("unsafe setting")
)

// ParentClaimError is the refusal of a run-started that names a parent run
// and is not the coordinator's: written on a client's subject (or appended
// through Store.Append). Only the parent's coordinator starts a child run,
// on the child's decision subject, which NATS permissions keep every other
// role out of; a start anywhere else that claims a parent is an attempt to
// pass a run off as another run's child, and is never believed. It wraps
// ErrMisplaced. Parent is what the start claimed, so that the engine can
// tell that parent's node, if it waits for a child under this id, that the
// child is not its own.
type ParentClaimError struct {
	Subject string
	Parent  ParentRef
}

func (e *ParentClaimError) Error() string {
	return fmt.Sprintf("%s: %s: a run-started naming parent run %s (node %s) is not the coordinator's; only a run's coordinator starts its child runs", ErrMisplaced, e.Subject, e.Parent.RunID, e.Parent.Ref.Key())
}

// Unwrap returns ErrMisplaced.
func (e *ParentClaimError) Unwrap() error { return ErrMisplaced }

// TriggerClaimError is the refusal of a run-started that names a
// schedule, event trigger or webhook (RunStartedData.Trigger) and is not
// the coordinator's: written on a client's subject (or appended through
// Store.Append). The runs of schedules and triggers are started by the
// coordinators, on the run's decision subject, which NATS permissions keep
// every other role out of; a start anywhere else that claims one is a run
// passed off as that schedule's or trigger's ('weft list -schedule'), and
// is never believed. It wraps ErrMisplaced.
type TriggerClaimError struct {
	Subject string
	Trigger TriggerRef
}

func (e *TriggerClaimError) Error() string {
	return fmt.Sprintf("%s: %s: a run-started naming %s %q is not the coordinator's; only the engine starts the runs of schedules and triggers", ErrMisplaced, e.Subject, e.Trigger.Kind, e.Trigger.Name)
}

// Unwrap returns ErrMisplaced.
func (e *TriggerClaimError) Unwrap() error { return ErrMisplaced }

// GraphDigestError is the refusal of a run-started whose graphDigest is
// not the digest of the graph it carries ("sha256:" and the hex SHA-256 of
// the graph's bytes, as pkg/graph computes it over the canonical JSON).
// Coordinators and workers keep compiled graphs by digest, so a start
// whose digest names another graph would otherwise put its own graph in
// that graph's place (or run under that graph) for every run of that
// digest: the digest is checked against the bytes before anything
// believes it. It wraps ErrMalformedEvent.
type GraphDigestError struct {
	Subject string
	Claimed string // the start's graphDigest
	Actual  string // the digest of the start's graph
}

func (e *GraphDigestError) Error() string {
	return fmt.Sprintf("%s: %s: graph digest mismatch: the run-started claims graphDigest %q, its graph's digest is %s", ErrMalformedEvent, e.Subject, e.Claimed, e.Actual)
}

// Unwrap returns ErrMalformedEvent.
func (e *GraphDigestError) Unwrap() error { return ErrMalformedEvent }
