package projection_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// refused applies p and fails the test unless the fold refuses it, with
// an error that says want, and it changes nothing but the counters.
func (r *run) refused(p events.Payload, want string) {
	r.t.Helper()
	before := r.s.Clone()
	err := r.apply(p)
	if !errors.Is(err, projection.ErrRefused) || !strings.Contains(err.Error(), want) {
		r.t.Fatalf("%s: got %v, want refused with %q", p.EventType(), err, want)
	}
	r.sameBut(before, func(s *projection.State) { s.Stats.Refused++; s.UpdatedAt = before.UpdatedAt })
}

// Signals that mean nothing are refused by the fold and never move the
// run: to a node that is not a human node, to a node the graph lacks, to
// an activation that does not wait (the signal names the one it answers),
// and data the waiting node does not accept.
func TestSignalsRefusedByTheFold(t *testing.T) {
	r := newRun(t)
	r.refused(&events.SignalReceivedData{Node: "a", Data: json.RawMessage(`{}`)}, `node "a" is a "echo" node, and only human nodes wait for signals`)
	r.refused(&events.SignalReceivedData{Node: "ghost"}, `graph "g" has no node "ghost"`)
	r.refused(&events.SignalReceivedData{Node: "h", Iteration: 1}, `node "h" is not waiting for a signal (the run has not reached it)`)

	r.ok(&events.NodeReadyData{NodeRef: ref("a", 1), Attempt: 1, Queue: "default"})
	r.ok(&events.NodeInvokedData{NodeRef: ref("a", 1), Attempt: 1, Updates: map[string]json.RawMessage{"limit": json.RawMessage(`100`)}})
	r.ok(&events.NodeWaitingData{NodeRef: ref("approve", 1), For: "signal"})
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 1},
		`node "approve": the signal has no data, and its outputSchema requires "approved"`)
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"ok":true}`)},
		`does not fit its outputSchema: missing field "approved"`)
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":"yes"}`)},
		`/approved: got string, want boolean`)
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 2, Data: json.RawMessage(`{"approved":false}`)},
		`the signal answers its activation 2; activation 1 waits now`)
	if n := r.s.Nodes["approve"]; n.Status != projection.NodeWaiting {
		t.Fatalf("after refused signals the node is %s, want waiting", n.Status)
	}
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":true,"amount":500}`)},
		`the amount is over the limit (config.checks[0]: !output.approved || output.amount <= state.limit)`)
	if n := r.s.Nodes["approve"]; n.Status != projection.NodeWaiting {
		t.Fatalf("after refused signals the node is %s, want waiting", n.Status)
	}
	r.ok(&events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":true,"amount":50}`)})
	if n := r.s.Nodes["approve"]; n.Status != projection.NodeSucceeded || string(n.Output) != `{"approved":true,"amount":50}` {
		t.Fatalf("node %s output %s", n.Status, n.Output)
	}
	// Answered: a signal for that activation now comes too late.
	r.refused(&events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":true}`)},
		`its activation 1 succeeded`)
}

// Updates are signals whose sender waits for the verdict: the fold takes
// one only for the activation that waits now, of a human node that
// declares what it accepts, and its first verdict stands: the same update
// id again is stale, whether it was taken in or refused.
func TestUpdatesByTheFold(t *testing.T) {
	r := newRun(t)
	update := func(id string, d events.SignalReceivedData) error {
		t.Helper()
		d.Update = id
		e := r.event(&d)
		e.ID = "run1:u:" + id
		return r.s.Apply(e)
	}
	if err := update("u1", events.SignalReceivedData{Node: "h", Data: json.RawMessage(`{}`)}); !errors.Is(err, projection.ErrRefused) || !strings.Contains(err.Error(), `node "h" declares no input`) {
		t.Fatalf("update to a node that declares no input: %v", err)
	}
	if err := update("u2", events.SignalReceivedData{Node: "approve", Data: json.RawMessage(`{"approved":false}`)}); !errors.Is(err, projection.ErrRefused) || !strings.Contains(err.Error(), `node "approve" is not waiting for input (the run has not reached it)`) {
		t.Fatalf("update to a node not waiting: %v", err)
	}
	r.ok(&events.NodeWaitingData{NodeRef: ref("approve", 1), For: "signal"})
	// Not buffered: an update names the activation it answers.
	if err := update("u3", events.SignalReceivedData{Node: "approve", Data: json.RawMessage(`{"approved":false}`)}); !errors.Is(err, projection.ErrRefused) {
		t.Fatalf("update without an activation: %v", err)
	}
	if err := update("u4", events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":"no"}`)}); !errors.Is(err, projection.ErrRefused) {
		t.Fatalf("update that does not fit: %v", err)
	}
	// Refused before: the same id with data that fits is stale now.
	if err := update("u4", events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":false}`)}); !errors.Is(err, projection.ErrStale) {
		t.Fatalf("refused update id again: %v, want stale", err)
	}
	if n := r.s.Nodes["approve"]; n.Status != projection.NodeWaiting || r.s.Stats.Refused != 4 {
		t.Fatalf("after refused updates: approve %s, refused %d", n.Status, r.s.Stats.Refused)
	}
	if err := update("u5", events.SignalReceivedData{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"approved":false}`)}); err != nil {
		t.Fatal(err)
	}
	if n := r.s.Nodes["approve"]; n.Status != projection.NodeSucceeded || string(n.Output) != `{"approved":false}` {
		t.Fatalf("after the update: approve %s output %s", n.Status, n.Output)
	}
}
