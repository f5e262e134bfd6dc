package projection_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/projection"
)

// TestStateDiff: the diff a person reads lists a node that appears field
// by field, and leaves the fold's bookkeeping out unless asked.
func TestStateDiff(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	a := &projection.State{RunID: "r", Status: projection.RunRunning, LastSeq: 4, UpdatedAt: &t0, Stats: projection.Stats{Events: 4, Bytes: 10},
		Vars:  map[string]json.RawMessage{"count": json.RawMessage(`1`)},
		Nodes: map[string]*projection.NodeState{"fetch": {Status: projection.NodeReady, Iteration: 1, Attempt: 1, ReadyAt: &t0}}}
	b := &projection.State{RunID: "r", Status: projection.RunRunning, LastSeq: 9, UpdatedAt: &t1, EndReached: true, Stats: projection.Stats{Events: 5, Executions: 1, Bytes: 30},
		Vars: map[string]json.RawMessage{"count": json.RawMessage(`2`), "doc": json.RawMessage(`{"title":"x"}`), "empty": json.RawMessage(`{}`)},
		Nodes: map[string]*projection.NodeState{
			"fetch": {Status: projection.NodeRunning, Iteration: 1, Attempt: 1, Delivery: 1, Executions: 1, Worker: "w1", ReadyAt: &t0, StartedAt: &t1},
			"next":  {Status: projection.NodeReady, Iteration: 1, Routed: 1, ReadyAt: &t1},
		}}
	paths := func(cs []projection.Change) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Path)
		}
		return out
	}
	want := []string{"/nodes/fetch/startedAt", "/nodes/fetch/status", "/nodes/fetch/worker", "/nodes/next/iteration", "/nodes/next/status",
		"/state/count", "/state/doc/title", "/state/empty"}
	if got := paths(projection.StateDiff(a, b, false)); !slices.Equal(got, want) {
		t.Errorf("StateDiff = %v\nwant %v", got, want)
	}
	all := paths(projection.StateDiff(a, b, true))
	for _, p := range []string{"/lastSeq", "/updatedAt", "/stats/bytes", "/endReached", "/nodes/fetch/delivery", "/nodes/next/readyAt", "/nodes/next/routed"} {
		if !slices.Contains(all, p) {
			t.Errorf("StateDiff all lacks %s: %v", p, all)
		}
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/lastSeq", true}, {"/stats/bytes", true}, {"/updatedAt", true}, {"/endReached", true}, {"/timers/retry-a-1-2", true},
		{"/nodes/a/executions", true}, {"/nodes/a/items/3/delivery", true}, {"/nodes/a/status", false}, {"/state/lastSeq", false},
		{"/status", false}, {"/statsx", false}, {"", false},
	} {
		if got := projection.IsBookkeeping(tc.path); got != tc.want {
			t.Errorf("IsBookkeeping(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
