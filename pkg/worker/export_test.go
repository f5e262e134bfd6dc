package worker

import "time"

// SetUnknownTypeDelay shortens the hand-back delay of unserved node types
// for tests.
func SetUnknownTypeDelay(w *Worker, d time.Duration) { w.unknownDelay = d }
