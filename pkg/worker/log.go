package worker

import "github.com/weft-dev/weft/internal/logattr"

// Log attribute keys: those of every Weft process (package logattr).
const (
	logRun      = logattr.RunID
	logNode     = logattr.NodeID
	logKey      = logattr.Ref
	logType     = logattr.NodeType
	logAttempt  = logattr.Attempt
	logDelivery = logattr.Delivery
	logQueue    = logattr.Queue
	logSubject  = logattr.Subject
	logWorker   = logattr.Worker
	logError    = logattr.Error
	logFailure  = logattr.Failure
	logCount    = logattr.Count
	logStep     = logattr.Step
)
