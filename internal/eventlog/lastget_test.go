package eventlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

func TestLastOn(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	run := eventlog.NewRunID()
	if m, err := eventlog.LastOn(ctx, st, eventlog.StartedSubject(run)); err != nil || m != nil {
		t.Fatalf("before the start: %v, %v", m, err)
	}
	seq, err := eventlog.Append(ctx, st, run, 0, started(t, run))
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.LastOn(ctx, st, eventlog.StartedSubject(run))
	if err != nil || m == nil || m.Sequence != seq || m.Subject != eventlog.StartedSubject(run) {
		t.Fatalf("the start: %+v, %v", m, err)
	}
	if e, err := eventlog.Decode(m.Subject, m.Header, m.Data); err != nil || e.Type != eventlog.RunStarted || e.ID != run {
		t.Fatalf("decoding what LastOn read: %+v, %v", e, err)
	}
	for _, bad := range []string{"", eventlog.RunFilter(run), "weft.r.*.*.c.started", "a b"} {
		if _, err := eventlog.LastOn(ctx, st, bad); !errors.Is(err, eventlog.ErrInvalidID) {
			t.Errorf("LastOn(%q): %v, want ErrInvalidID", bad, err)
		}
	}
	if eventlog.Replicas(st) != 1 {
		t.Fatalf("replicas %d", eventlog.Replicas(st))
	}
}

// invokedOf is a worker's outcome for node of run, on queue "default".
func invokedOf(t *testing.T, run, node string) *eventlog.Event {
	ref := eventlog.NodeRef{Node: node, Iteration: 1}
	return mustEvent(t, run, eventlog.DecisionID(run, eventlog.NodeInvoked, ref.Key(), "1", "1"), &eventlog.NodeInvokedData{NodeRef: ref, Attempt: 1, Worker: "w"})
}

// TestWorkerDuplicateConfirmedBySubject: a worker's outcome that JetStream
// answers as a duplicate is confirmed by the last message on its own
// subject (what the worker's role may read), not by its sequence.
func TestWorkerDuplicateConfirmedBySubject(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("retry of the same outcome", func(t *testing.T) {
		run := eventlog.NewRunID()
		first, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, invokedOf(t, run, "a"))
		if err != nil {
			t.Fatal(err)
		}
		again := invokedOf(t, run, "a")
		seq, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, again)
		if err != nil || seq != first || again.ID != invokedOf(t, run, "a").ID {
			t.Fatalf("the same outcome again: seq %d (first %d), id %q, %v", seq, first, again.ID, err)
		}
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("history: %d events, %v", len(evs), err)
		}
	})

	t.Run("id taken on another subject", func(t *testing.T) {
		run := eventlog.NewRunID()
		ev := invokedOf(t, run, "a")
		squat := nats.NewMsg(eventlog.StartedSubject(run))
		squat.Header.Set(nats.MsgIdHdr, ev.ID)
		squat.Data = []byte(`{}`)
		if _, err := eventlog.JetStream(st).PublishMsg(ctx, squat); err != nil {
			t.Fatal(err)
		}
		want := ev.ID
		seq, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, ev)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID == want || !strings.HasPrefix(ev.ID, want+"~") {
			t.Fatalf("the outcome kept the squatted id %q", ev.ID)
		}
		m, err := eventlog.LastOn(ctx, st, "weft.r."+eventlog.Slot(run)+"."+run+".w.default.invoked")
		if err != nil || m == nil || m.Sequence != seq || m.Header.Get(nats.MsgIdHdr) != ev.ID {
			t.Fatalf("the outcome under its fresh id: %+v, %v", m, err)
		}
	})

	t.Run("id taken on the same subject with other data", func(t *testing.T) {
		run := eventlog.NewRunID()
		ev := invokedOf(t, run, "a")
		m, err := eventlog.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		m.Data = []byte(`{"node":"a","iteration":1,"attempt":1,"output":"forged"}`)
		if _, err := eventlog.JetStream(st).PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		want := ev.ID
		if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == want {
			t.Fatal("the outcome was taken as the forged message under its id")
		}
	})

	t.Run("a later outcome on the subject", func(t *testing.T) {
		// The message at the duplicate's sequence is no longer the last on
		// the subject and cannot be read back: the outcome is written again
		// under a fresh id, and the history holds both (the fold counts
		// one per attempt).
		run := eventlog.NewRunID()
		first, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, invokedOf(t, run, "a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, invokedOf(t, run, "b")); err != nil {
			t.Fatal(err)
		}
		again := invokedOf(t, run, "a")
		seq, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, again)
		if err != nil || seq == first || !strings.HasPrefix(again.ID, invokedOf(t, run, "a").ID+"~") {
			t.Fatalf("retry after a later outcome: seq %d (first %d), id %q, %v", seq, first, again.ID, err)
		}
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil || len(evs) != 3 {
			t.Fatalf("history: %d events, %v", len(evs), err)
		}
	})
}

func TestHasEnd(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	run := eventlog.NewRunID()
	if ended, err := eventlog.HasEnd(ctx, st, run); err != nil || ended {
		t.Fatalf("no run: %v, %v", ended, err)
	}
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	seq, err := eventlog.Append(ctx, st, run, 0, ready(t, run, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if ended, err := eventlog.HasEnd(ctx, st, run); err != nil || ended {
		t.Fatalf("a run under way: %v, %v", ended, err)
	}
	// Another run's end is not this run's.
	other := eventlog.NewRunID()
	end := func(run string) *eventlog.Event {
		return mustEvent(t, run, eventlog.DecisionID(run, eventlog.RunCancelled), &eventlog.RunCancelledData{Reason: "test"})
	}
	if _, err := eventlog.Append(ctx, st, other, eventlog.AnySeq, end(other)); err != nil {
		t.Fatal(err)
	}
	if ended, err := eventlog.HasEnd(ctx, st, run); err != nil || ended {
		t.Fatalf("another run ended: %v, %v", ended, err)
	}
	if _, err := eventlog.Append(ctx, st, run, seq, end(run)); err != nil {
		t.Fatal(err)
	}
	if ended, err := eventlog.HasEnd(ctx, st, run); err != nil || !ended {
		t.Fatalf("a cancelled run: %v, %v", ended, err)
	}
	if _, err := eventlog.HasEnd(ctx, st, "no.such"); !errors.Is(err, eventlog.ErrInvalidID) {
		t.Fatalf("a bad run id: %v", err)
	}
}
