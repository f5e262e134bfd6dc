package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
)

// The timeline marks the events the fold did not count, and says why.
func TestTimelineMarksStaleAndRefused(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	var evs []*events.Event
	add := func(p events.Payload) {
		t.Helper()
		seq := uint64(len(evs) + 1)
		e, err := events.New("r1", fmt.Sprint("e", seq), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.Stored = seq, t0.Add(time.Duration(seq)*time.Second)
		evs = append(evs, e)
	}
	a := events.NodeRef{Node: "a", Iteration: 1}
	add(&events.RunStartedData{GraphName: "g"})
	add(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	add(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A"})
	add(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B"})
	add(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A", Output: json.RawMessage(`1`)})
	evs = append(evs, &events.Event{ID: "junk", Type: events.NodeInvoked, RunID: "r1", Seq: 6, Stored: t0.Add(6 * time.Second),
		Refused: fmt.Errorf("%w: not a CloudEvent", events.ErrMalformedEvent)})
	add(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B", Output: json.RawMessage(`2`)})

	rows := timeline(evs)
	want := map[uint64]string{
		6: "refused: malformed event: not a CloudEvent",
		7: "stale: attempt 1 of a/1 is succeeded",
	}
	for _, r := range rows {
		if r.Fold != want[r.Seq] {
			t.Errorf("seq %d: fold note %q, want %q", r.Seq, r.Fold, want[r.Seq])
		}
		if r.Offset != time.Duration(r.Seq-1)*time.Second {
			t.Errorf("seq %d: offset %v, not from the stream's times", r.Seq, r.Offset)
		}
	}
	var out bytes.Buffer
	(&env{stdout: &out}).printTimeline(evs)
	lines := strings.Split(out.String(), "\n")
	if strings.Contains(lines[5], "[") {
		t.Errorf("the first outcome, of delivery 1, counts: %q", lines[5])
	}
	if !strings.Contains(lines[7], "[stale: attempt 1 of a/1 is succeeded] worker B") {
		t.Errorf("stale row: %q", lines[7])
	}
	if !strings.Contains(lines[6], "[refused: malformed event: not a CloudEvent]") {
		t.Errorf("refused row: %q", lines[6])
	}
}
