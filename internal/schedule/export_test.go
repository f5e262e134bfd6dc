package schedule

import "time"

// SetReadTimes bounds each try of a read of the buckets to try, and a
// read whose caller set no deadline to patience, until the returned func
// restores readTry and readPatience.
func SetReadTimes(try, patience time.Duration) (restore func()) {
	shortTry.Store(int64(try))
	shortPatience.Store(int64(patience))
	return func() { shortTry.Store(0); shortPatience.Store(0) }
}
