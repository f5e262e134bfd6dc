// Package logtest is the contract of Weft's log: one suite of tests that
// every implementation of eventlog.Store with the engine's appends
// (eventlog.Engine) must pass. The JetStream store (internal/eventlog) and
// the simulator's in-memory log (internal/sim) both run it, so that what
// the simulator proves about the engine holds over the real store:
// appends and reads, per-run optimistic concurrency over the decision
// subjects, de-duplication by event id with duplicate acknowledgements
// confirmed, run starts that are idempotent only for the same start, and
// facts' appends that refuse decisions.
//
// It is a testing room (internal/layers): only tests import it.
package logtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
)

// Open returns a fresh, empty log for one test.
type Open func(t *testing.T) eventlog.Store

// Run runs the contract against the logs open makes.
func Run(t *testing.T, open Open) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, st eventlog.Store)
	}{
		{"AppendAndRead", appendAndRead},
		{"ReadUpTo", readUpTo},
		{"StartIsIdempotentOnlyForTheSameStart", startIdempotent},
		{"FactsAreDeduplicatedByID", factsDeduplicated},
		{"ATakenIDIsWrittenUnderAFreshOne", takenID},
		{"AppendRefusesDecisions", appendRefusesDecisions},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func mustEvent(t *testing.T, run, id string, p eventlog.Payload) *eventlog.Event {
	t.Helper()
	e, err := eventlog.New(run, id, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func started(t *testing.T, run string) *eventlog.Event {
	return mustEvent(t, run, run, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`)})
}

func ready(t *testing.T, run, node string) *eventlog.Event {
	e := mustEvent(t, run, eventlog.DecisionID(run, eventlog.NodeReady, node), &eventlog.NodeReadyData{NodeRef: eventlog.NodeRef{Node: node, Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	eventlog.MarkDecision(e)
	return e
}

func invoking(t *testing.T, run, id, node string) *eventlog.Event {
	e := mustEvent(t, run, id, &eventlog.NodeInvokingData{NodeRef: eventlog.NodeRef{Node: node, Iteration: 1}, Attempt: 1, Delivery: 1, Worker: "w"})
	e.Queue = "default" // where a worker's outcome is written
	return e
}

// appendAndRead holds the store to its append rules (one start; decisions
// checked against the last decision, facts not; a chain whole; runs
// apart), then reads the run back.
func appendAndRead(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatalf("append started: %v", err)
	}
	// A second run-started for the same run is refused.
	other := mustEvent(t, run, "other-id", &eventlog.RunStartedData{GraphName: "g"})
	if _, err := eventlog.Append(ctx, st, run, 0, other); !errors.Is(err, eventlog.ErrRunExists) {
		t.Fatalf("second start: got %v, want ErrRunExists", err)
	}
	// The first decision expects no decision before it.
	seqA, err := eventlog.Append(ctx, st, run, 0, ready(t, run, "a"))
	if err != nil {
		t.Fatalf("first decision: %v", err)
	}
	// A decision taken from a state without it conflicts.
	if _, err := eventlog.Append(ctx, st, run, 0, ready(t, run, "x")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("stale decision: got %v, want ErrConflict", err)
	}
	// A worker's fact in between does not invalidate decisions.
	if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, invoking(t, run, "inv-a", "a")); err != nil {
		t.Fatalf("fact: %v", err)
	}
	// A chain on the last decision goes in whole.
	last, err := eventlog.Append(ctx, st, run, seqA, ready(t, run, "b"), ready(t, run, "c"))
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	// The same chain again, from the old decision, is refused.
	if _, err := eventlog.Append(ctx, st, run, seqA, ready(t, run, "y"), ready(t, run, "z")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("stale batch: got %v, want ErrConflict", err)
	}
	// Another run's decisions do not disturb this run's check.
	run2 := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run2, 0, started(t, run2)); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run2, 0, ready(t, run2, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, last, ready(t, run, "d")); err != nil {
		t.Fatalf("append after another run's event: %v", err)
	}
	readBack(t, st, run)
}

// readBack reads appendAndRead's run back: its events in order, the
// decisions flagged, a tail read, the last sequence; and a missing run.
func readBack(t *testing.T, st eventlog.Store, run string) {
	ctx := context.Background()
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, string(e.Type)+"/"+e.NodeID)
	}
	want := "dev.weft.run.started.v1/ dev.weft.node.ready.v1/a dev.weft.node.invoking.v1/a dev.weft.node.ready.v1/b dev.weft.node.ready.v1/c dev.weft.node.ready.v1/d"
	if strings.Join(got, " ") != want {
		t.Fatalf("read:\n got %v\nwant %v", got, want)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("sequences out of order: %d then %d", evs[i-1].Seq, evs[i].Seq)
		}
	}
	if !evs[1].IsDecision() || evs[2].IsDecision() {
		t.Fatalf("decision flags: ready %v invoking %v", evs[1].IsDecision(), evs[2].IsDecision())
	}
	tail, err := st.Read(ctx, run, evs[3].Seq, 0)
	if err != nil || len(tail) != 3 {
		t.Fatalf("tail read: %d events, err %v", len(tail), err)
	}
	if ls, err := st.LastSeq(ctx, run); err != nil || ls != evs[5].Seq {
		t.Fatalf("LastSeq = %d, %v; want %d", ls, err, evs[5].Seq)
	}
	if _, err := st.Read(ctx, "nope", 0, 0); !errors.Is(err, eventlog.ErrRunNotFound) {
		t.Fatalf("missing run: %v", err)
	}
	if _, err := st.LastSeq(ctx, "nope"); !errors.Is(err, eventlog.ErrRunNotFound) {
		t.Fatalf("missing run last seq: %v", err)
	}
}

func readUpTo(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	last, err := eventlog.Append(ctx, st, run, 0, ready(t, run, "a"), ready(t, run, "b"), ready(t, run, "c"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.Read(ctx, run, 0, last-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[len(evs)-1].Seq != last-1 {
		t.Fatalf("read up to %d: %d events", last-1, len(evs))
	}
}

func startIdempotent(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	first := started(t, run)
	seq, err := eventlog.Append(ctx, st, run, 0, first)
	if err != nil {
		t.Fatal(err)
	}
	// The same start again (a retried request) is fine, at its sequence.
	if again, err := eventlog.Append(ctx, st, run, 0, first); err != nil || again != seq {
		t.Fatalf("retried start: %d, %v; want %d", again, err, seq)
	}
	// Another start under the same id, within the de-duplication window, is not.
	other := mustEvent(t, run, run, &eventlog.RunStartedData{GraphName: "other", Graph: json.RawMessage(`{"name":"other"}`)})
	if _, err := eventlog.Append(ctx, st, run, 0, other); !errors.Is(err, eventlog.ErrRunExists) {
		t.Fatalf("second start: got %v, want ErrRunExists", err)
	}
	if evs, _ := st.Read(ctx, run, 0, 0); len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
}

func factsDeduplicated(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := st.Append(ctx, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	f := invoking(t, run, "inv-1", "a")
	seq, err := st.Append(ctx, run, eventlog.AnySeq, f)
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Append(ctx, run, eventlog.AnySeq, invoking(t, run, "inv-1", "a"))
	if err != nil || again != seq {
		t.Fatalf("the same fact again: %d, %v; want sequence %d", again, err, seq)
	}
	if evs, _ := st.Read(ctx, run, 0, 0); len(evs) != 2 {
		t.Fatalf("%d events, want 2 (the duplicate stored once)", len(evs))
	}
}

func takenID(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := st.Append(ctx, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	first, err := st.Append(ctx, run, eventlog.AnySeq, invoking(t, run, "taken", "a"))
	if err != nil {
		t.Fatal(err)
	}
	// Another event under an id already stored (someone took it first,
	// ErrDuplicateMismatch inside) is written under a fresh id, so that a
	// squatted id never stalls a run.
	e := invoking(t, run, "taken", "b")
	seq, err := st.Append(ctx, run, eventlog.AnySeq, e)
	if err != nil || seq <= first {
		t.Fatalf("another event under a taken id: %d, %v; want a new sequence after %d", seq, err, first)
	}
	if e.ID == "taken" || !strings.HasPrefix(e.ID, "taken~") {
		t.Fatalf("the event's id is %q, want a fresh one made from %q", e.ID, "taken")
	}
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil || len(evs) != 3 || evs[2].ID != e.ID || evs[2].NodeID != "b" {
		t.Fatalf("read: %d events, %v; want the second event stored under %q", len(evs), err, e.ID)
	}
}

func appendRefusesDecisions(t *testing.T, st eventlog.Store) {
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := st.Append(ctx, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	before, err := st.LastSeq(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	built, err := eventlog.New(run, "forged-ready", time.Time{}, &eventlog.NodeReadyData{NodeRef: eventlog.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ready(t, run, "b"))
	if err != nil {
		t.Fatal(err)
	}
	var decoded eventlog.Event
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	completed, err := eventlog.New(run, "forged-end", time.Time{}, &eventlog.RunCompletedData{})
	if err != nil {
		t.Fatal(err)
	}
	for name, batch := range map[string][]*eventlog.Event{
		"node-ready built with New": {built},
		"node-ready read from JSON": {&decoded},
		"run-completed":             {completed},
		"a fact, then a decision":   {invoking(t, run, "fact-1", "a"), built},
	} {
		_, err := st.Append(ctx, run, eventlog.AnySeq, batch...)
		if !errors.Is(err, eventlog.ErrMisplaced) || !strings.Contains(err.Error(), "coordinator decision") {
			t.Errorf("%s: Append = %v, want ErrMisplaced naming a coordinator decision", name, err)
		}
	}
	if after, err := st.LastSeq(ctx, run); err != nil || after != before {
		t.Errorf("the run's last sequence moved from %d to %d (%v): a refused append wrote", before, after, err)
	}
}
