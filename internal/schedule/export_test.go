package schedule

import "time"

// SetReadTry bounds each try of a read of the buckets to d, until the
// returned func restores readTry.
func SetReadTry(d time.Duration) (restore func()) {
	shortTry.Store(int64(d))
	return func() { shortTry.Store(0) }
}
