package decider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const runLimited = `
name: rl
concurrency: {max: 2, key: "invocation.tenant + '/' + input.region", strategy: %s}
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

// A run over its graph's run limit (queue) waits before its first node,
// in the log (START waiting for its slot) and as a waiting run; granted,
// START is routed and its wait ends.
func TestRunSlotWaitThenStart(t *testing.T) {
	sm := newSim(t, strings.Replace(runLimited, "%s", "queue", 1), `{"region":"eu"}`, `{"tenant":"acme"}`, nil)
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
	want := events.SlotRef{Limit: "rl", Key: "acme/eu", Max: 2}
	if w.Node != "START" || w.For != "slot" || w.Slot == nil || *w.Slot != want || w.Attempt != 1 {
		t.Fatalf("waiting %+v, want START for slot %+v attempt 1", w, want)
	}
	if !sm.s.Waiting() || len(sm.s.Waits()) != 1 || sm.s.Waits()[0].For != "slot" {
		t.Fatalf("the run does not show as waiting for its slot: waiting %v, waits %+v", sm.s.Waiting(), sm.s.Waits())
	}
	if evs := sm.decideWith(deny); len(evs) != 0 {
		t.Fatalf("deciding again while the key is full decided %s", sm.types())
	}
	evs = sm.decideWith(grant)
	if len(evs) != 1 || evs[0].Type != events.NodeReady {
		t.Fatalf("granted: decided %s", sm.types())
	}
	if ns := sm.s.Nodes["START"]; ns.Status != projection.NodeSucceeded || sm.s.Waiting() {
		t.Fatalf("START %s after its routing, run waiting %v", ns.Status, sm.s.Waiting())
	}
	r := mustPayload(t, evs[0]).(*events.NodeReadyData)
	sm.append(sm.event("ok", &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: 1, Delivery: 1, Output: json.RawMessage(`{}`)}))
	sm.decideWith(grant)
	if sm.s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %s", sm.s.Status, sm.types())
	}
	for _, a := range asked {
		if a.Ref.Node != "START" || a.Attempt != 1 || a.Slot != want || a.Strategy != "queue" {
			t.Fatalf("asked %+v", a)
		}
	}
}

// cancel-newest: a run that finds its key full is cancelled at once,
// the reason naming the limit and the key.
func TestRunSlotFullCancelsNewest(t *testing.T) {
	sm := newSim(t, strings.Replace(runLimited, "%s", "cancel-newest", 1), `{"region":"eu"}`, `{"tenant":"acme"}`, nil)
	evs := sm.decideWith(func(r decider.AdmitRequest) decider.Admission { return decider.Admission{Full: true} })
	if len(evs) != 1 || evs[0].Type != events.RunCancelled || sm.s.Status != projection.RunCancelled {
		t.Fatalf("decided %s, run %s: want run.cancelled", sm.types(), sm.s.Status)
	}
	c := mustPayload(t, evs[0]).(*events.RunCancelledData)
	if c.By != "flow" || !strings.Contains(c.Reason, `concurrency limit "rl" is full for key "acme/eu" (max 2 runs; strategy cancel-newest)`) {
		t.Fatalf("cancelled %+v", c)
	}
}

// A key that is not a string fails the run, naming the run limit.
func TestRunSlotBadKeyFails(t *testing.T) {
	sm := newSim(t, strings.Replace(runLimited, "%s", "queue", 1), `{"region":7}`, `{"tenant":"acme"}`, nil)
	sm.decideWith(func(decider.AdmitRequest) decider.Admission { return decider.Admission{Granted: true} })
	if sm.s.Status != projection.RunFailed || sm.s.Error.Type != events.FailureFlowLimit || !strings.Contains(sm.s.Error.Message, "run limit's key") {
		t.Fatalf("run %s %+v, want failed for its run limit's key", sm.s.Status, sm.s.Error)
	}
}

// A continuation queues for its slot whatever the strategy: it is never
// refused (cancel-newest) nor evicts (cancel-oldest).
func TestRunSlotContinuationQueues(t *testing.T) {
	for _, strategy := range []string{"cancel-newest", "cancel-oldest"} {
		sm := newSim(t, strings.Replace(runLimited, "%s", strategy, 1), `{"region":"eu"}`, `{"tenant":"acme"}`, nil)
		sm.s.Chain = &events.ChainRef{ID: "run0", Link: 2, Previous: "run0"}
		var asked []decider.AdmitRequest
		evs := sm.decideWith(func(r decider.AdmitRequest) decider.Admission { asked = append(asked, r); return decider.Admission{} })
		if len(asked) != 1 || asked[0].Strategy != "queue" || len(evs) != 1 || evs[0].Type != events.NodeWaiting {
			t.Fatalf("%s: asked %+v, decided %s; want a queued wait", strategy, asked, sm.types())
		}
	}
}
