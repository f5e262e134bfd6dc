package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

var (
	// ErrAlreadyRunning is returned by Run when the worker runs already (or
	// ran: a Worker runs once).
	ErrAlreadyRunning = errors.New("worker already running")
	// ErrDrainTimeout is returned by Run when nodes were still running when
	// the drain timeout passed; their work items were handed back.
	ErrDrainTimeout = errors.New("drain timeout: nodes still running were handed back")
)

// Error is a node failure with a type, a message, whether the coordinator may
// retry it, and optional details (any JSON value) and cause. It is stored in
// the run's log as an events.Failure.
type Error struct {
	Type      string
	Message   string
	Retryable bool
	Details   any
	Cause     error
}

func (e *Error) Error() string {
	s := e.Type + ": " + e.Message
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// NonRetryable returns a failure of type typ that is not retried.
func NonRetryable(typ, msg string) error {
	return &Error{Type: typ, Message: msg}
}

// Retryable returns a failure of type typ that the coordinator may retry
// (within the node's retry policy).
func Retryable(typ, msg string) error {
	return &Error{Type: typ, Message: msg, Retryable: true}
}

// RateLimited returns the failure a node reports when the outside world
// said no for now (an HTTP 429, a quota): retryable, type
// events.FailureRateLimited, with {"retryAfterMs": n} in its details.
// When the node has a rate limit (rate: in its graph), the coordinator
// holds the limit's whole key back for retryAfter, so the other attempts
// of the key wait too instead of each meeting the same answer.
func RateLimited(msg string, retryAfter time.Duration) error {
	return &Error{Type: events.FailureRateLimited, Message: msg, Retryable: true,
		Details: map[string]any{"retryAfterMs": max(retryAfter, 0).Milliseconds()}}
}

// failureType is the type of failures from plain errors.
const failureType = "Error"

// failureOf maps an error returned by a node onto the failure stored in the
// log: a *Error gives its fields, any other error is a retryable "Error".
func failureOf(err error) events.Failure {
	var we *Error
	if !errors.As(err, &we) {
		return events.Failure{Type: failureType, Message: err.Error(), Retryable: true}
	}
	f := events.Failure{Type: we.Type, Message: we.Message, Retryable: we.Retryable}
	if f.Type == "" {
		f.Type = failureType
	}
	if we.Details != nil {
		if b, err := json.Marshal(we.Details); err == nil {
			f.Details = b
		} else {
			f.Details, _ = json.Marshal(fmt.Sprintf("details do not encode as JSON: %v", err))
		}
	}
	if we.Cause != nil {
		c := failureOf(we.Cause)
		f.Cause = &c
	}
	return f
}
