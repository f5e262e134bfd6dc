package flow

import "errors"

var (
	// ErrQueueFull says a key has MaxWaiters waiters already.
	ErrQueueFull = errors.New("flow: too many attempts wait for the key")
	// ErrTooManyKeys says a limit has MaxKeys keys in use already.
	ErrTooManyKeys = errors.New("flow: too many keys in use for the limit")
	// ErrContended says a compare-and-set lost casRetries times in a row.
	ErrContended = errors.New("flow: the key changed under every attempt to update it")
	// ErrConflict is a compare-and-set that lost: the key's revision was
	// not the one given (KV.Put).
	ErrConflict = errors.New("flow: the key changed")
	// ErrNoBucket says the flow bucket does not exist (yet).
	ErrNoBucket = errors.New("flow: no flow bucket")
)

// Final reports whether err ends the attempt's wait (a bound was passed)
// rather than being a failure to reach the bucket.
func Final(err error) bool {
	return errors.Is(err, ErrQueueFull) || errors.Is(err, ErrTooManyKeys)
}
