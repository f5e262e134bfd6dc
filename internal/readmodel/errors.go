package readmodel

import "errors"

var (
	// ErrNoReadModel says the read model's bucket does not exist: no
	// coordinator has run yet, or it was removed ('weft admin reindex'
	// makes it again).
	ErrNoReadModel = errors.New("no read model of runs")
	// ErrNotFound says the read model has no entry for a run.
	ErrNotFound = errors.New("run not in the read model")
	// ErrNotArchived says an archive has no such run.
	ErrNotArchived = errors.New("run not archived")
	// ErrNotEnded says a run that has not ended was to be removed.
	ErrNotEnded = errors.New("run has not ended")
	// ErrLive says a run to be restored is in the log already.
	ErrLive = errors.New("run is live")
)
