package graph

import (
	"strconv"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
)

// TestTokenLimitsMatchEvents keeps this package's subject token rules in
// step with the events package's, which it does not import.
func TestTokenLimitsMatchEvents(t *testing.T) {
	if maxTokenLen != eventlog.MaxTokenLen {
		t.Fatalf("graph.maxTokenLen = %d, eventlog.MaxTokenLen = %d", maxTokenLen, eventlog.MaxTokenLen)
	}
	for _, s := range []string{"a", "default", "io-fast_2", strings.Repeat("q", MaxQueueLen), strings.Repeat("q", MaxQueueLen+1), "a.b", "a b", "*", ">", "-a", ""} {
		ok := tokenPattern.MatchString(s) && len(s) <= MaxQueueLen
		if ok != eventlog.ValidToken(s) {
			t.Errorf("queue %q: graph accepts it: %v, eventlog.ValidToken: %v", s, ok, eventlog.ValidToken(s))
		}
	}
	// The longest node id gives timer ids that are still tokens, with
	// every number at its largest.
	id := "n" + strings.Repeat("x", MaxNodeIDLen-1)
	big := strconv.Itoa(int(^uint64(0) >> 1))
	for _, timer := range []string{
		"retry-" + id + "-" + big + "-" + big + "-" + big,
		"deadline-" + id + "-" + big,
	} {
		if !eventlog.ValidToken(timer) {
			t.Errorf("timer id %q (%d characters) is not a subject token", timer, len(timer))
		}
	}
}
