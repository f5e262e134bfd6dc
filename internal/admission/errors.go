package admission

import "errors"

var (
	// ErrLimit says a request was over the namespace's admission limit:
	// its message names the limit ("admission: run starts over 100 per
	// second in namespace a"). Nothing was written; trying again later
	// may succeed.
	ErrLimit = errors.New("admission")
	// ErrQuota says the namespace's events stream is too full to take
	// the request (or its account's storage is): nothing was written.
	ErrQuota = errors.New("quota")
	// ErrInvalid says a request was not one a client may make: not a
	// client's event, or not of the request's kind. Nothing was written.
	ErrInvalid = errors.New("admission: invalid request")
	// ErrUnavailable says no coordinator answered, or one could not take
	// a ticket: nothing was written, or the request may be retried.
	ErrUnavailable = errors.New("admission: unavailable")
)

// Error kinds in a refusal's header (HdrError), so that the client can
// say which error it is.
const (
	kindLimit       = "limit"
	kindQuota       = "quota"
	kindInvalid     = "invalid"
	kindExists      = "exists"
	kindNotFound    = "notfound"
	kindConflict    = "conflict"
	kindUnavailable = "unavailable"
	kindFailed      = "failed"
)
