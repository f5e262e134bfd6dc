package decider_test

import (
	"encoding/json"
	"testing"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const limited = `
name: lim
nodes:
  - {id: a, type: echo, concurrency: {max: 1, key: "invocation.tenant"}, retry: {maxAttempts: 2, initialInterval: 1ms, jitter: 0}}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

// decideWith decides once with admit and appends what it decided.
func (sm *sim) decideWith(admit func(decider.AdmitRequest) decider.Admission) []*events.Event {
	sm.t.Helper()
	d := decider.DecideWith(sm.g, sm.s.Clone(), sm.clock, decider.Options{Admit: admit})
	for _, e := range d.Events {
		sm.append(e)
	}
	for _, tm := range d.Timers {
		sm.append(tm.Event)
	}
	return d.Events
}

func TestSlotWaitThenReady(t *testing.T) {
	sm := newSim(t, limited, "", `{"tenant":"acme"}`, nil)
	var asked []decider.AdmitRequest
	deny := func(r decider.AdmitRequest) decider.Admission { asked = append(asked, r); return decider.Admission{} }
	grant := func(r decider.AdmitRequest) decider.Admission {
		asked = append(asked, r)
		return decider.Admission{Granted: true}
	}

	evs := sm.decideWith(deny)
	if len(evs) != 1 || evs[0].Type != events.NodeWaiting {
		t.Fatalf("decided %s, want one node.waiting", sm.types())
	}
	w := mustPayload(t, evs[0]).(*events.NodeWaitingData)
	want := events.SlotRef{Limit: "lim/a", Key: "acme", Max: 1}
	if w.For != "slot" || w.Slot == nil || *w.Slot != want || w.Attempt != 1 {
		t.Fatalf("waiting %+v, want for slot %+v attempt 1", w, want)
	}
	if ns := sm.s.Nodes["a"]; ns.Status != projection.NodeWaiting || ns.WaitingFor != "slot" {
		t.Fatalf("node %s waiting for %q", ns.Status, ns.WaitingFor)
	}
	if evs := sm.decideWith(deny); len(evs) != 0 {
		t.Fatalf("deciding again while the slot is taken decided %d events", len(evs))
	}
	evs = sm.decideWith(grant)
	if len(evs) != 1 || evs[0].Type != events.NodeReady {
		t.Fatalf("granted: decided %v", evs)
	}
	r := mustPayload(t, evs[0]).(*events.NodeReadyData)
	if r.Attempt != 1 || r.Slot == nil || *r.Slot != want {
		t.Fatalf("ready %+v", r)
	}
	// Attempt 1 fails; its retry waits for the slot again, as attempt 2.
	sm.append(sm.event("f1", &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: 1, Delivery: 1, Error: events.Failure{Type: "X", Message: "x", Retryable: true}}))
	sm.decideWith(deny) // the retry's timer
	evs = sm.decideWith(deny)
	if len(evs) != 1 || evs[0].Type != events.NodeWaiting {
		t.Fatalf("retry: %s", sm.types())
	}
	if w := mustPayload(t, evs[0]).(*events.NodeWaitingData); w.Attempt != 2 {
		t.Fatalf("retry waits as attempt %d, want 2", w.Attempt)
	}
	evs = sm.decideWith(grant)
	if len(evs) != 1 || mustPayload(t, evs[0]).(*events.NodeReadyData).Attempt != 2 {
		t.Fatalf("retry granted: %s", sm.types())
	}
	sm.append(sm.event("ok", &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: 2, Delivery: 1, Output: json.RawMessage(`{}`)}))
	sm.decideWith(grant)
	if sm.s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s", sm.s.Status, sm.types())
	}
	for _, a := range asked {
		if a.Run != "run1" || a.Ref.Node != "a" || a.Slot != want {
			t.Fatalf("asked %+v", a)
		}
	}
}

func TestSlotBoundFailsRun(t *testing.T) {
	sm := newSim(t, limited, "", `{"tenant":"acme"}`, nil)
	full := func(decider.AdmitRequest) decider.Admission {
		return decider.Admission{Failure: &events.Failure{Type: events.FailureFlowLimit, Message: "queue full"}}
	}
	sm.decideWith(full)
	if sm.s.Status != projection.RunFailed || sm.s.Error == nil || sm.s.Error.Type != events.FailureFlowLimit {
		t.Fatalf("run %s %+v", sm.s.Status, sm.s.Error)
	}
	// A key that is not a string fails the run, naming the node.
	sm = newSim(t, limited, "", `{"tenant":7}`, nil)
	sm.decideWith(nil)
	if sm.s.Status != projection.RunFailed || sm.s.Error.Type != events.FailureFlowLimit {
		t.Fatalf("run %s %+v", sm.s.Status, sm.s.Error)
	}
}

// A routing written with a retry's wait for a slot (the wait is the first
// activation of the decision, so the routing rides on it) counts when
// the run is folded from the log: deciding again from the fold does not
// route the node a second time. (Found by the 1,000-run chaos test: the
// fold dropped a within-activation wait's routings, and the next
// decision after a coordinator read the run wrote "routed" again.)
func TestRoutingOnARetrysSlotWaitCounts(t *testing.T) {
	const src = `
name: lim2
nodes:
  - {id: b, type: echo}
  - {id: a, type: echo, concurrency: {max: 1, key: "invocation.tenant"}, retry: {maxAttempts: 3, initialInterval: 1ms, jitter: 0}}
edges:
  - {from: START, to: b}
  - {from: START, to: a}
  - {from: a, to: END}
  - {from: b, to: END}
`
	sm := newSim(t, src, "", `{"tenant":"acme"}`, nil)
	grant := func(decider.AdmitRequest) decider.Admission { return decider.Admission{Granted: true} }
	deny := func(decider.AdmitRequest) decider.Admission { return decider.Admission{} }
	evs := sm.decideWith(grant)
	var a, b *events.NodeReadyData
	for _, e := range evs {
		if r, ok := mustPayload(t, e).(*events.NodeReadyData); ok {
			if r.Node == "a" {
				a = r
			} else {
				b = r
			}
		}
	}
	if a == nil || b == nil {
		t.Fatalf("first decision: %s, want a and b ready", sm.types())
	}
	sm.append(sm.event("fa", &events.NodeFailedData{NodeRef: a.NodeRef, Attempt: 1, Delivery: 1, Error: events.Failure{Type: "X", Message: "x", Retryable: true}}))
	sm.decideWith(deny) // a's retry and its timer, fired
	sm.append(sm.event("ob", &events.NodeInvokedData{NodeRef: b.NodeRef, Attempt: 1, Delivery: 1, Output: json.RawMessage(`{}`)}))
	evs = sm.decideWith(deny) // a's retry waits for the slot; b's routing rides on it
	var rode bool
	for _, e := range evs {
		if w, ok := mustPayload(t, e).(*events.NodeWaitingData); ok && w.Node == "a" && w.Attempt == 2 && len(w.Routed) > 0 {
			rode = true
		}
	}
	if !rode {
		t.Fatalf("b's routing did not ride on a's wait for the slot (%s): the test does not reach the case", sm.types())
	}
	if ns := sm.s.Nodes["b"]; ns.Routed != 1 {
		t.Fatalf("folded from the log, b's routing is at iteration %d, want 1", ns.Routed)
	}
	for _, e := range sm.decideWith(grant) {
		if r, ok := mustPayload(t, e).(*events.NodeRoutedData); ok && r.Node == "b" {
			t.Fatal("b was routed a second time")
		}
		if r, ok := mustPayload(t, e).(*events.NodeReadyData); ok && len(r.Routed) > 0 {
			t.Fatalf("a's ready carries routings %v again", r.Routed)
		}
	}
}
