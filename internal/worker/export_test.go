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

// NoEndWatch keeps the worker from hearing runs' ended notices, so that
// its ended-run checks read the log, for tests of the read.
func NoEndWatch() Option { return func(o *options) { o.noEndWatch = true } }

// EndReads is how many times the worker read whether a run ended.
func EndReads(w *Worker) int64 { return w.runs.endReads.Load() }
