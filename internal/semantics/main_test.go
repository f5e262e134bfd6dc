package semantics_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
)

// TestMain runs the suite sealed when WEFT_ENCRYPT_KEYS holds a key ring,
// as every Weft process does: every event of every case is then written
// sealed and read back opened (internal/eventlog, seal.go), so the same
// semantics hold on an encrypted log:
//
//	WEFT_ENCRYPT_KEYS=k1:$(head -c32 /dev/urandom | base64) go test ./internal/semantics/
func TestMain(m *testing.M) {
	ring, err := events.LoadKeys("")
	if err == nil && ring != nil {
		err = events.UseKeys(ring)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
