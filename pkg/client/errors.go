package client

import (
	"errors"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/readmodel"
)

var (
	// ErrInvalidInput means a run's input or invocation state is not a JSON
	// object, or a signal's data is not JSON.
	ErrInvalidInput = errors.New("invalid input")
	// ErrRunEnded means a signal or cancel request was sent to a run that
	// has already completed, failed or been cancelled.
	ErrRunEnded = errors.New("run already ended")
	// ErrSignalRefused means a signal was not sent because the run would
	// refuse it: its node is not a human node, or does not wait for a
	// signal now, or does not accept the signal's data (its outputSchema
	// and config.checks). The error says which, naming the field.
	ErrSignalRefused = errors.New("signal refused")
	// ErrNoSuchPosition means a position outside a run's events was asked
	// for (StateAt, Fork, Reset); the error states the valid range.
	ErrNoSuchPosition = errors.New("no event at that position")
	// ErrNoSuchSeq means StateAtSeq was asked for a sequence before the run's
	// first event.
	ErrNoSuchSeq = errors.New("sequence before the run's start")
	// ErrNoReadModel means the read model of runs (the KV bucket
	// "weft-runs") does not exist: no coordinator has run yet, or it was
	// removed ('weft admin reindex' makes it again).
	ErrNoReadModel = readmodel.ErrNoReadModel
	// ErrNotInReadModel means the read model has no entry for a run.
	ErrNotInReadModel = readmodel.ErrNotFound
	// ErrNotArchived means an Archive has no such run.
	ErrNotArchived = readmodel.ErrNotArchived
	// ErrAdmission means a start, fork, signal or cancel request was
	// over its namespace's admission limit (runs started, or signals and
	// cancel requests sent, per second): the error names the limit.
	// Nothing was written; trying again later may succeed.
	ErrAdmission = admission.ErrLimit
	// ErrQuota means the namespace's events stream (or its account's
	// storage) is too full to take the write: nothing was written.
	ErrQuota = admission.ErrQuota
)
