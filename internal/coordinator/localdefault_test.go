package coordinator_test

import (
	"slices"
	"testing"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/graphrt"
)

// TestDefaultLocalTypesAgree: a graph compiled without WithLocalTypes (a
// replay, a client) marks local the types a stock coordinator runs
// itself, so that it decides as the coordinator did.
func TestDefaultLocalTypesAgree(t *testing.T) {
	want := slices.Sorted(slices.Values(graphrt.DefaultLocalTypes))
	if got := coordinator.DefaultLocalTypes(); !slices.Equal(got, want) {
		t.Errorf("the coordinator's default local types %v, graphrt.DefaultLocalTypes %v", got, want)
	}
}
