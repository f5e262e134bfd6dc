package projection

import "errors"

var (
	// ErrStale is wrapped by the error Apply returns for an event that is
	// well formed and of this run but comes too late to count: an outcome
	// of an attempt or delivery that is not live, a decision about an
	// activation that already ended, a signal applied before, anything
	// after the run ended. The event changes nothing but Stats.Stale (and
	// LastSeq, Stats.Events, UpdatedAt); the error says why.
	ErrStale = errors.New("stale")
	// ErrRefused is wrapped by the error Apply returns for an event the
	// fold does not take in: one the store refused (Event.Refused), one of
	// a type this version does not know (written by a newer Weft), or a
	// signal over the buffering limits. It changes nothing but
	// Stats.Refused and LastSeq.
	ErrRefused = errors.New("refused")
)
