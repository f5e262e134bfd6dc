package worker

import "time"

// SetUnknownTypeDelay shortens the hand-back delay of unserved node types
// for tests.
func SetUnknownTypeDelay(w *Worker, d time.Duration) { w.unknownDelay = d }

// SetStaleAfter sets how long an item may wait in its queue before the
// worker checks that its run has not ended, for tests.
func SetStaleAfter(w *Worker, d time.Duration) { w.staleAfter = d }

// SetClock sets the clock of Heartbeat's rate limit, for tests.
func SetClock(w *Worker, now func() time.Time) { w.now = now }
