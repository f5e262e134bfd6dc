package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestPendingOf: a retrying node gives its next attempt's time and why the
// last failed; a map node's unfinished items are listed after it; a
// human node gets the command that answers it, its data shaped by its
// outputSchema; finished nodes and ended runs have nothing pending.
func TestPendingOf(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	one := 1
	graphJSON := json.RawMessage(`{"nodes":[{"id":"charge"},{"id":"pages"},{"id":"ok"},
		{"id":"approve","outputSchema":{"type":"object","required":["approved","note"],"properties":{"approved":{"type":"boolean"},"note":{"type":"string"},"level":{"enum":["low","high"]}}}}]}`)
	st := &projection.State{RunID: "r1", Status: projection.RunRunning, Graph: graphJSON,
		Nodes: map[string]*projection.NodeState{
			"charge": {Status: projection.NodeRetrying, Iteration: 1, Attempt: 2, EndedAt: at(time.Second),
				Error: &events.Failure{Type: "card", Message: "card declined", Retryable: true}},
			"pages": {Status: projection.NodeWaiting, WaitingFor: "map", Iteration: 1, StartedAt: at(0), Items: []*projection.ItemState{
				{Status: projection.NodeSucceeded, Attempt: 1}, {Status: projection.NodeRunning, Attempt: 1, HeartbeatAt: at(3 * time.Second)}}},
			"ok":      {Status: projection.NodeSucceeded, Iteration: 1},
			"approve": {Status: projection.NodeWaiting, WaitingFor: "signal", Iteration: 1, StartedAt: at(0), Deadline: at(24 * time.Hour)},
		},
		Timers: map[string]projection.Timer{
			"retry-charge-1-3":    {Purpose: "retry", Ref: events.NodeRef{Node: "charge", Iteration: 1}, Attempt: 3, At: t0.Add(time.Minute)},
			"timeout-pages-1-1-1": {Purpose: projection.PurposeTimeout, Ref: events.NodeRef{Node: "pages", Iteration: 1, Item: &one}, Attempt: 1, At: t0.Add(time.Hour)},
		}}
	got := client.PendingOf(st, nil)
	if len(got) != 4 {
		t.Fatalf("pending = %+v, want charge, pages, pages[1], approve", got)
	}
	charge, pages, item, approve := got[0], got[1], got[2], got[3]
	if charge.Node != "charge" || charge.RetryAt == nil || !charge.RetryAt.Equal(t0.Add(time.Minute)) || charge.LastError == nil || charge.Since == nil {
		t.Errorf("charge = %+v", charge)
	}
	if pages.Node != "pages" || pages.Item != nil || pages.WaitingFor != "map" {
		t.Errorf("pages = %+v", pages)
	}
	if item.Node != "pages" || item.Item == nil || *item.Item != 1 || item.TimeoutAt == nil || item.HeartbeatAt == nil {
		t.Errorf("pages[1] = %+v", item)
	}
	if want := `weft signal r1 approve -data '{"approved":true,"note":""}'`; approve.Answer != want || approve.Deadline == nil {
		t.Errorf("approve = %+v, want answer %s and a deadline", approve, want)
	}
	st.Status = projection.RunCompleted
	if got := client.PendingOf(st, nil); got != nil {
		t.Errorf("an ended run has pending %+v", got)
	}
}
