package cli_test

import (
	"os"
	"testing"

	"github.com/weft-dev/weft/internal/testkit"
)

// TestMain removes the binaries testkit.Build made (the weft command the
// batch job's kill test runs as a process).
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}
