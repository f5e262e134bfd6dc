package eventlog_test

import (
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/eventlog/logtest"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestLogContract runs the log's contract (package logtest) against the
// JetStream store, as internal/sim runs it against its in-memory log.
func TestLogContract(t *testing.T) {
	logtest.Run(t, func(t *testing.T) eventlog.Store {
		_, st := testkit.Store(t)
		return st
	})
}
