package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
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

// Each row describes its own event: the routing an activation carries is a
// row of its own, about its own node; deadlines are durations and
// wall-clock times; a time that goes back says why; gaps in the stream's
// sequence are explained.
func TestTimelineRowsDescribeTheirOwnEvent(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	var evs []*events.Event
	add := func(seq uint64, stored time.Time, p events.Payload) {
		t.Helper()
		e, err := events.New("r1", fmt.Sprint("e", seq), stored, p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = seq
		evs = append(evs, e)
	}
	a := events.NodeRef{Node: "a", Iteration: 1}
	b := events.NodeRef{Node: "b", Iteration: 1}
	add(3, t0, &events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"nodes":[{"id":"a"},{"id":"b"}]}`)})
	add(7, t0.Add(time.Second), &events.NodeReadyData{NodeRef: a, Attempt: 1, Type: "echo", Queue: "q"})
	add(8, t0.Add(2*time.Second), &events.NodeInvokedData{NodeRef: a, Attempt: 1, Worker: "w"})
	deadline := t0.Add(2*time.Second + 24*time.Hour)
	add(9, t0.Add(2*time.Second), &events.NodeWaitingData{NodeRef: b, For: "signal", Deadline: &deadline,
		Routed: []events.NodeRoutedData{{NodeRef: a, Signals: []events.Signal{{Edge: 1, To: "b", Taken: true}}}}})
	add(10, t0.Add(time.Second), &events.SignalReceivedData{Node: "b", By: "me"}) // a writer's clock behind

	rows := timeline(evs)
	if rows[1].Position != 2 || rows[1].Seq != 7 {
		t.Errorf("row 2: position %d seq %d", rows[1].Position, rows[1].Seq)
	}
	w := rows[3]
	if strings.Contains(w.Summary, "a ->") || len(w.Routed) != 1 || w.Routed[0].Node != "a" || w.Routed[0].Summary != "-> b" {
		t.Errorf("waiting row: summary %q, routed %+v; want b's own summary and a's routing apart", w.Summary, w.Routed)
	}
	if !strings.Contains(w.Summary, "in 24h0m0s (") || strings.Contains(w.Summary, "+86") {
		t.Errorf("deadline printed as %q, want a duration and a wall-clock time", w.Summary)
	}
	if rows[4].Clock != "1s before an earlier event: its writer's clock" {
		t.Errorf("clock note %q", rows[4].Clock)
	}
	for i := range 4 {
		if rows[i].Clock != "" {
			t.Errorf("row %d has a clock note %q though times run forward", i+1, rows[i].Clock)
		}
	}

	var out bytes.Buffer
	(&env{stdout: &out}).printTimeline(evs)
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "POS") {
		t.Errorf("header %q", lines[0])
	}
	routedLine, waitingLine := lines[4], lines[5]
	if !strings.Contains(routedLine, "node.routed") || !strings.Contains(routedLine, " a ") || !strings.Contains(routedLine, "-> b (with the next event)") {
		t.Errorf("routing row: %q", routedLine)
	}
	if !strings.HasPrefix(waitingLine, "4 ") || strings.Contains(waitingLine, "-> b") {
		t.Errorf("waiting row: %q", waitingLine)
	}
	if !strings.Contains(lines[6], "(1s before an earlier event: its writer's clock)") {
		t.Errorf("signal row: %q", lines[6])
	}
	if !strings.Contains(out.String(), "it skips the events of other runs") {
		t.Errorf("no note on the gaps in SEQ:\n%s", out.String())
	}
}

// A retry's time is a duration from its own event, not an offset from the
// run's start.
func TestRetryPrintsADuration(t *testing.T) {
	at := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	s := summary(&events.RetryScheduledData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 2, At: at.Add(1500 * time.Millisecond),
		LastFailure: events.Failure{Type: "E", Message: "boom"}}, at)
	if !strings.HasPrefix(s, "attempt 2 in 1.5s (") || !strings.Contains(s, "after E: boom") {
		t.Errorf("retry summary %q", s)
	}
}

func TestProgress(t *testing.T) {
	st := &projection.State{
		Graph: json.RawMessage(`{"nodes":[{"id":"a"},{"id":"b"},{"id":"c"}]}`),
		Nodes: map[string]*projection.NodeState{"a": {Status: projection.NodeSucceeded}, "b": {Status: projection.NodeRunning}},
	}
	if got := progress(st); got != "1 of 3 nodes done; b running" {
		t.Errorf("progress = %q", got)
	}
}
