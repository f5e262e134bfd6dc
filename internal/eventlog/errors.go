package eventlog

import (
	"errors"
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
