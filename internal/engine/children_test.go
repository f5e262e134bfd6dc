package engine

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

func TestChildRunIDIsAlwaysAToken(t *testing.T) {
	short := ChildRunID("run1", events.NodeRef{Node: "sub", Iteration: 2})
	if short != "run1-sub-2" {
		t.Errorf("short child id = %q, want run1-sub-2", short)
	}
	long := strings.Repeat("r", eventlog.MaxTokenLen)
	seen := map[string]bool{}
	parent := long
	for depth := range 4 { // grandchildren and deeper grow the id each time
		for it := 1; it <= 3; it++ {
			id := ChildRunID(parent, events.NodeRef{Node: "n" + strings.Repeat("x", 61), Iteration: it})
			if !eventlog.ValidToken(id) {
				t.Fatalf("depth %d iteration %d: child id %q (%d characters) is not a subject token", depth, it, id, len(id))
			}
			if seen[id] {
				t.Fatalf("depth %d iteration %d: child id %q repeats", depth, it, id)
			}
			seen[id] = true
			if again := ChildRunID(parent, events.NodeRef{Node: "n" + strings.Repeat("x", 61), Iteration: it}); again != id {
				t.Fatalf("child id not deterministic: %q then %q", id, again)
			}
		}
		parent = ChildRunID(parent, events.NodeRef{Node: "sub", Iteration: 1})
	}
}
