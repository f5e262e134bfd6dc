package testkit

import (
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// A node whose retry waits for a slot again waits once per attempt: not a
// duplicate; the same attempt waiting twice is.
func TestDuplicateSlotWaits(t *testing.T) {
	wait := func(id string, attempt int) *events.Event {
		e, err := events.New("r", id, time.Time{}, &events.NodeWaitingData{NodeRef: events.NodeRef{Node: "b", Iteration: 1}, For: "slot", Attempt: attempt})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if d := DuplicateDecisions([]*events.Event{wait("w1", 1), wait("w2", 2)}); len(d) != 0 {
		t.Errorf("a retry's wait counted as a duplicate: %v", d)
	}
	if d := DuplicateDecisions([]*events.Event{wait("w1", 1), wait("w2", 1)}); len(d) != 1 {
		t.Errorf("one attempt waiting twice: %v, want one duplicate", d)
	}
}
