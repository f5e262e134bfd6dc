package eventlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestTriggeredStartsAreTheEngines (deploy/SECURITY.md, gap 13): the run
// a schedule's fire or a trigger's message starts is the engine's, a
// decision on the run's decision subject naming the schedule or trigger;
// a start naming one on a client's subject is refused by every decoder
// with a TriggerClaimError (saying what it claimed), and the engine will
// not encode one; a start naming both a parent and a trigger is refused
// anywhere.
func TestTriggeredStartsAreTheEngines(t *testing.T) {
	graph := json.RawMessage(`{"name":"g"}`)
	ref := &eventlog.TriggerRef{Kind: eventlog.TriggerSchedule, Name: "nightly", FireTime: time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)}
	data := func(p *eventlog.ParentRef, tr *eventlog.TriggerRef) *eventlog.RunStartedData {
		return &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest(graph), Graph: graph, Parent: p, Trigger: tr}
	}
	encode := func(d *eventlog.RunStartedData, decision bool) (*nats.Msg, error) {
		e, err := eventlog.New("run1", "run1", time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC), d)
		if err != nil {
			t.Fatal(err)
		}
		if decision {
			eventlog.MarkDecision(e)
		}
		return eventlog.Encode(e)
	}
	// The engine's start encodes on the decision subject.
	fire, err := encode(data(nil, ref), true)
	if err != nil {
		t.Fatalf("the engine's start of a schedule's run: %v", err)
	}
	if fire.Subject != eventlog.ChildStartedSubject("run1") {
		t.Fatalf("the engine's start goes on %s, want %s", fire.Subject, eventlog.ChildStartedSubject("run1"))
	}
	// A client's start naming a schedule is not encoded.
	var tc *eventlog.TriggerClaimError
	if _, err := encode(data(nil, ref), false); !errors.As(err, &tc) || !errors.Is(err, eventlog.ErrMisplaced) {
		t.Fatalf("encoding a client's start naming a schedule: %v, want a TriggerClaimError", err)
	}
	parent := &eventlog.ParentRef{RunID: "victim1", Ref: eventlog.NodeRef{Node: "child", Iteration: 1}}
	if _, err := encode(data(parent, ref), true); !errors.Is(err, eventlog.ErrMisplaced) {
		t.Fatalf("encoding a start naming a parent and a schedule: %v, want ErrMisplaced", err)
	}
	// The attacker's bytes: a plain client start, its data replaced.
	claim, err := encode(data(nil, nil), false)
	if err != nil {
		t.Fatal(err)
	}
	claim.Data, _ = json.Marshal(data(nil, ref))
	both, err := encode(data(parent, nil), true)
	if err != nil {
		t.Fatal(err)
	}
	both.Data, _ = json.Marshal(data(parent, ref))
	for name, dec := range map[string]func(string, nats.Header, []byte) (*eventlog.Event, error){"fast": func(s string, h nats.Header, d []byte) (*eventlog.Event, error) {
		e, _, err := eventlog.DecodeFast(s, h, d)
		return e, err
	}, "sdk": eventlog.DecodeSDK, "decode": eventlog.Decode} {
		got, err := dec(fire.Subject, fire.Header, fire.Data)
		if err != nil || !got.IsDecision() || got.Type != eventlog.RunStarted {
			t.Fatalf("%s: the engine's start: %v %+v", name, err, got)
		}
		_, err = dec(claim.Subject, claim.Header, claim.Data)
		if !errors.As(err, &tc) || !errors.Is(err, eventlog.ErrMisplaced) || tc.Trigger.Name != "nightly" || tc.Trigger.Kind != eventlog.TriggerSchedule {
			t.Fatalf("%s: a client's start naming a schedule: %v, want a TriggerClaimError naming schedule nightly", name, err)
		}
		if !strings.Contains(err.Error(), `schedule "nightly"`) {
			t.Errorf("%s: the refusal does not say what was claimed: %v", name, err)
		}
		if _, err := dec(both.Subject, both.Header, both.Data); !errors.Is(err, eventlog.ErrMisplaced) {
			t.Fatalf("%s: a decision start naming a parent and a schedule: %v, want ErrMisplaced", name, err)
		}
	}
	e := eventlog.DecodeStored(claim.Subject, claim.Header, claim.Data, 7, time.Now())
	if !errors.As(e.Refused, &tc) || e.Seq != 7 {
		t.Fatalf("stored claim: %+v", e)
	}
}

// TestAppendRefusesTriggerClaim: Store.Append writes no start naming a
// schedule or trigger; the engine's (eventlog.Append of a decision) goes
// on the run's decision subject, and the same start again is the same
// append.
func TestAppendRefusesTriggerClaim(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	run := eventlog.NewRunID()
	ref := &eventlog.TriggerRef{Kind: eventlog.TriggerEvent, Name: "orders", Key: "m-1"}
	claim := mustEvent(t, run, run, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Trigger: ref})
	var tc *eventlog.TriggerClaimError
	if _, err := st.Append(ctx, run, 0, claim); !errors.As(err, &tc) {
		t.Fatalf("a client's start naming a trigger: Append = %v, want a TriggerClaimError", err)
	}
	if _, err := st.LastSeq(ctx, run); !errors.Is(err, eventlog.ErrRunNotFound) {
		t.Fatalf("the refused start was written: %v", err)
	}
	start := mustEvent(t, run, run, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Trigger: ref})
	eventlog.MarkDecision(start)
	seq, err := eventlog.Append(ctx, st, run, 0, start)
	if err != nil {
		t.Fatalf("the engine's start: %v", err)
	}
	if again, err := eventlog.Append(ctx, st, run, 0, start); err != nil || again != seq {
		t.Fatalf("the same start again: %d %v, want %d", again, err, seq)
	}
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Subject() != eventlog.ChildStartedSubject(run) || !evs[0].IsDecision() || evs[0].Refused != nil {
		t.Fatalf("the run's log: %v %+v", err, evs)
	}
}
