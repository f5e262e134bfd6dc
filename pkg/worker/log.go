package worker

// Log attribute keys.
const (
	logRun      = "run"
	logNode     = "node"
	logKey      = "ref"
	logType     = "type"
	logAttempt  = "attempt"
	logDelivery = "delivery"
	logQueue    = "queue"
	logSubject  = "subject"
	logWorker   = "worker"
	logError    = "error"
	logFailure  = "failure"
	logCount    = "count"
)
