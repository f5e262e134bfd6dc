package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
)

// TestHasEnded checks the ended-run check on a real server: no ending,
// then a run-failed, counted on its terminal subject (eventlog.HasEnd).
func TestHasEnded(t *testing.T) {
	_, st := natstest.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	if ended, err := r.hasEnded(ctx, run); err != nil || ended || r.knownEnded(run) {
		t.Fatalf("no ending yet: hasEnded = %v, %v", ended, err)
	}
	ev, err := events.New(run, eventlog.DecisionID(run, events.RunFailed), time.Time{}, &events.RunFailedData{Error: events.Failure{Type: "x", Message: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, events.AnySeq, ev); err != nil {
		t.Fatal(err)
	}
	if ended, err := r.hasEnded(ctx, run); err != nil || !ended || !r.knownEnded(run) {
		t.Fatalf("hasEnded = %v, %v; known %v", ended, err, r.knownEnded(run))
	}
	other := events.NewRunID()
	if ended, err := r.hasEnded(ctx, other); err != nil || ended {
		t.Fatalf("a run with no ending: hasEnded = %v, %v", ended, err)
	}
}

// TestReadStart reads a run's start by its subject, and reports a run
// with none as errStartNotFound.
func TestReadStart(t *testing.T) {
	_, st := natstest.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := r.start(ctx, run); !errors.Is(err, errStartNotFound) {
		t.Fatalf("a run with no start: %v", err)
	}
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: "g", GraphDigest: "sha256:g",
		Graph:      json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"echo","config":{"k":1}}]}`),
		Invocation: json.RawMessage(`{"tenant":"t"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, ev); err != nil {
		t.Fatal(err)
	}
	s, err := r.start(ctx, run)
	if err != nil || string(s.nodes["a"].Config) != `{"k":1}` || string(s.invocation) != `{"tenant":"t"}` {
		t.Fatalf("start: %+v, %v", s, err)
	}
}
