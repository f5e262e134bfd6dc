package eventlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// A local step: the outcome of a node the coordinator ran (on the local
// queue) and the decision made after it.
func localOutcome(t *testing.T, run, node string) *eventlog.Event {
	e := mustEvent(t, run, run+"-out-"+node, &eventlog.NodeInvokedData{NodeRef: eventlog.NodeRef{Node: node, Iteration: 1}, Attempt: 1, Worker: "coordinator"})
	e.Queue = eventlog.LocalQueue
	return e
}

// stepStore is a store with a started run, ready for a step.
func stepStore(t *testing.T) (context.Context, eventlog.Engine, string) {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	run := eventlog.NewRunID()
	if _, err := st.Append(ctx, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	return ctx, eventlog.Must(st), run
}

// order is the run's events as type@node, in log order.
func order(t *testing.T, ctx context.Context, st eventlog.Store, run string) []string {
	t.Helper()
	evs, err := st.Read(ctx, run, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type)+"@"+e.NodeID)
	}
	return out
}

func wantOrder(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("log %v, want %v", got, want)
		}
	}
}

func expectedLastMsgID(t *testing.T, ctx context.Context, st eventlog.Store, seq uint64) string {
	t.Helper()
	m, err := eventlog.LeaderSeq(ctx, st, seq)
	if err != nil || m == nil {
		t.Fatalf("reading sequence %d: %v", seq, err)
	}
	return m.Header.Get("Nats-Expected-Last-Msg-Id")
}

// The outcome and the decision go in pipelined, the decision conditioned
// on the outcome being the stream's last message.
func TestAppendStepPipelines(t *testing.T) {
	ctx, st, run := stepStore(t)
	out, next := localOutcome(t, run, "a"), ready(t, run, "b")
	last, err := st.AppendStep(ctx, run, 0, []*eventlog.Event{out}, []*eventlog.Event{next})
	if err != nil {
		t.Fatal(err)
	}
	if out.Seq != last-1 {
		t.Fatalf("outcome at %d, decision at %d: want them adjacent", out.Seq, last)
	}
	wantOrder(t, order(t, ctx, st, run), "dev.weft.run.started.v1@", "dev.weft.node.invoked.v1@a", "dev.weft.node.ready.v1@b")
	if got := expectedLastMsgID(t, ctx, st, last); got != out.ID {
		t.Fatalf("the decision was conditioned on %q, want the outcome's id %q", got, out.ID)
	}
	// The next decision is checked against this one.
	if _, err := st.AppendDecisions(ctx, run, last-1, ready(t, run, "c")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("a decision from before the step: %v, want ErrConflict", err)
	}
}

// The outcome is in the log already, not last (a retried step): the
// decision, refused for its condition, goes in after it, checked as usual.
func TestAppendStepFallsBackWhenOutcomeNotLast(t *testing.T) {
	ctx, st, run := stepStore(t)
	out := localOutcome(t, run, "a")
	first, err := st.Append(ctx, run, eventlog.AnySeq, out)
	if err != nil {
		t.Fatal(err)
	}
	other := eventlog.NewRunID()
	if _, err := st.Append(ctx, other, 0, started(t, other)); err != nil {
		t.Fatal(err)
	}
	again := localOutcome(t, run, "a")
	last, err := st.AppendStep(ctx, run, 0, []*eventlog.Event{again}, []*eventlog.Event{ready(t, run, "b")})
	if err != nil {
		t.Fatal(err)
	}
	if again.Seq != first {
		t.Fatalf("the outcome sent again is at %d, want its first append's %d", again.Seq, first)
	}
	wantOrder(t, order(t, ctx, st, run), "dev.weft.run.started.v1@", "dev.weft.node.invoked.v1@a", "dev.weft.node.ready.v1@b")
	if got := expectedLastMsgID(t, ctx, st, last); got != "" {
		t.Fatalf("the decision sent again still carries Nats-Expected-Last-Msg-Id %q", got)
	}
}

// A step decided from a stale state is refused (the outcome, a fact, may
// be in: a prefix, as Append then AppendDecisions leave).
func TestAppendStepConflict(t *testing.T) {
	ctx, st, run := stepStore(t)
	if _, err := st.AppendDecisions(ctx, run, 0, ready(t, run, "a")); err != nil {
		t.Fatal(err)
	}
	_, err := st.AppendStep(ctx, run, 0, []*eventlog.Event{localOutcome(t, run, "a")}, []*eventlog.Event{ready(t, run, "b")})
	if !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("a step from a stale state: %v, want ErrConflict", err)
	}
	wantOrder(t, order(t, ctx, st, run), "dev.weft.run.started.v1@", "dev.weft.node.ready.v1@a", "dev.weft.node.invoked.v1@a")
}

// Someone took the outcome's id with the stream's last message: the
// decision, conditioned on that id, lands, and the outcome goes in after
// it under a fresh id. The step says ErrConflict, so that the coordinator
// folds the run from the log rather than keep the order it applied; the
// log never holds the decision without the outcome.
func TestAppendStepOutcomeIDTaken(t *testing.T) {
	for _, last := range []bool{true, false} {
		ctx, st, run := stepStore(t)
		out := localOutcome(t, run, "a")
		other := eventlog.NewRunID()
		squat := started(t, other)
		squat.ID = out.ID
		if _, err := st.Append(ctx, other, 0, squat); err != nil {
			t.Fatal(err)
		}
		if !last {
			o2 := eventlog.NewRunID()
			if _, err := st.Append(ctx, o2, 0, started(t, o2)); err != nil {
				t.Fatal(err)
			}
		}
		taken := out.ID
		_, err := st.AppendStep(ctx, run, 0, []*eventlog.Event{out}, []*eventlog.Event{ready(t, run, "b")})
		if out.ID == taken {
			t.Fatalf("the outcome kept the id someone else took")
		}
		got := order(t, ctx, st, run)
		if last {
			if !errors.Is(err, eventlog.ErrConflict) {
				t.Fatalf("id taken by the last message: %v, want ErrConflict", err)
			}
			wantOrder(t, got, "dev.weft.run.started.v1@", "dev.weft.node.ready.v1@b", "dev.weft.node.invoked.v1@a")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		wantOrder(t, got, "dev.weft.run.started.v1@", "dev.weft.node.invoked.v1@a", "dev.weft.node.ready.v1@b")
	}
}

// A step with no decision, or no outcome, is the append of what it has.
func TestAppendStepHalves(t *testing.T) {
	ctx, st, run := stepStore(t)
	out := localOutcome(t, run, "a")
	seq, err := st.AppendStep(ctx, run, 0, []*eventlog.Event{out}, nil)
	if err != nil || out.Seq != seq {
		t.Fatalf("outcome alone: seq %d (outcome's %d), %v", seq, out.Seq, err)
	}
	if _, err := st.AppendStep(ctx, run, 0, nil, []*eventlog.Event{ready(t, run, "b")}); err != nil {
		t.Fatal(err)
	}
	wantOrder(t, order(t, ctx, st, run), "dev.weft.run.started.v1@", "dev.weft.node.invoked.v1@a", "dev.weft.node.ready.v1@b")
	d := ready(t, run, "c")
	eventlog.MarkDecision(d)
	if _, err := st.AppendStep(ctx, run, eventlog.AnySeq, []*eventlog.Event{d}, nil); !errors.Is(err, eventlog.ErrMisplaced) {
		t.Fatalf("a decision given as an outcome: %v, want ErrMisplaced", err)
	}
}
