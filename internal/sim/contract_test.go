package sim

import (
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/eventlog/logtest"
)

// TestLogContract runs the log's contract (package logtest) against the
// simulator's in-memory log, as internal/eventlog runs it against the
// JetStream store.
func TestLogContract(t *testing.T) {
	logtest.Run(t, func(t *testing.T) eventlog.Store {
		c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		return &memStore{log: newMemLog(c, 2*time.Minute)}
	})
}
