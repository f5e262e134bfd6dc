package worker

import (
	"context"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
)

// TestAnyLast checks the batched direct get the ended-run check makes, on
// a real server: no message, then one on the second of three subjects.
func TestAnyLast(t *testing.T) {
	_, st := natstest.Store(t)
	r := newRunReader(st)
	ctx := context.Background()
	run := events.NewRunID()
	subjects := events.TerminalSubjects(run)
	if found, err := r.anyLast(ctx, subjects); err != nil || found {
		t.Fatalf("no ending yet: found %v, %v", found, err)
	}
	ev, err := events.New(run, events.DecisionID(run, events.RunFailed), time.Time{}, &events.RunFailedData{Error: events.Failure{Type: "x", Message: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, run, events.AnySeq, ev); err != nil {
		t.Fatal(err)
	}
	if found, err := r.anyLast(ctx, subjects); err != nil || !found {
		t.Fatalf("after run-failed: found %v, %v", found, err)
	}
	if ended, err := r.hasEnded(ctx, run); err != nil || !ended || !r.knownEnded(run) {
		t.Fatalf("hasEnded = %v, %v; known %v", ended, err, r.knownEnded(run))
	}
	other := events.NewRunID()
	if ended, err := r.hasEnded(ctx, other); err != nil || ended {
		t.Fatalf("a run with no ending: hasEnded = %v, %v", ended, err)
	}
}
