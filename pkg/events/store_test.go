package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/eventstore"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
)

func mustEvent(t *testing.T, run, id string, p events.Payload) *events.Event {
	t.Helper()
	e, err := events.New(run, id, time.Time{}, p)
	if err != nil {
		t.Fatal(err)
	}
	e.Queue = "default" // where a worker's outcome is written
	return e
}

func started(t *testing.T, run string) *events.Event {
	return mustEvent(t, run, run, &events.RunStartedData{GraphName: "g", GraphDigest: "sha256:x", Graph: json.RawMessage(`{"name":"g"}`)})
}

func ready(t *testing.T, run, node string) *events.Event {
	ref := events.NodeRef{Node: node, Iteration: 1}
	e := mustEvent(t, run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), &events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: "echo", Queue: "default"})
	eventstore.MarkDecision(e)
	return e
}

func TestStoreAppendAndRead(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	run := events.NewRunID()

	seq, err := eventstore.Append(ctx, st, run, 0, started(t, run))
	if err != nil {
		t.Fatalf("append started: %v", err)
	}
	// A second run-started for the same run is refused; the same one again
	// is de-duplicated.
	other := mustEvent(t, run, "other-id", &events.RunStartedData{GraphName: "g"})
	if _, err := eventstore.Append(ctx, st, run, 0, other); !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("second start: got %v, want ErrRunExists", err)
	}
	_ = seq
	// The first decision expects no decision before it.
	seqA, err := eventstore.Append(ctx, st, run, 0, ready(t, run, "a"))
	if err != nil {
		t.Fatalf("first decision: %v", err)
	}
	// A decision taken from a state without it conflicts.
	if _, err := eventstore.Append(ctx, st, run, 0, ready(t, run, "x")); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale decision: got %v, want ErrConflict", err)
	}
	// A worker's fact in between does not invalidate decisions.
	fact := mustEvent(t, run, "inv-a", &events.NodeInvokingData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Delivery: 1, Worker: "w"})
	if _, err := eventstore.Append(ctx, st, run, events.AnySeq, fact); err != nil {
		t.Fatalf("fact: %v", err)
	}
	// An atomic batch chained on the last decision goes in whole.
	last, err := eventstore.Append(ctx, st, run, seqA, ready(t, run, "b"), ready(t, run, "c"))
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if last != seqA+3 {
		t.Fatalf("batch last seq = %d, want %d", last, seqA+3)
	}
	// The same batch again, from the old decision, is refused whole.
	if _, err := eventstore.Append(ctx, st, run, seqA, ready(t, run, "y"), ready(t, run, "z")); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale batch: got %v, want ErrConflict", err)
	}
	// Another run's decisions do not disturb this run's check.
	run2 := events.NewRunID()
	if _, err := eventstore.Append(ctx, st, run2, 0, started(t, run2)); err != nil {
		t.Fatal(err)
	}
	if _, err := eventstore.Append(ctx, st, run2, 0, ready(t, run2, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := eventstore.Append(ctx, st, run, last, ready(t, run, "d")); err != nil {
		t.Fatalf("append after another run's event: %v", err)
	}

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
	if _, err := st.Read(ctx, "nope", 0, 0); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("missing run: %v", err)
	}
	if _, err := st.LastSeq(ctx, "nope"); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("missing run last seq: %v", err)
	}
}

// appendLongRun appends a run of 2501 events: its start, then 2500
// node-ready decisions (items 0 to 2499) in one append, more than one
// atomic batch and more than one read batch. It returns the run and the
// sequences of its first and last events.
func appendLongRun(t *testing.T, st events.Store) (run string, first, last uint64) {
	t.Helper()
	ctx := context.Background()
	run = events.NewRunID()
	first, err := eventstore.Append(ctx, st, run, 0, started(t, run))
	if err != nil {
		t.Fatal(err)
	}
	var evs []*events.Event
	for i := range 2500 {
		ref := events.NodeRef{Node: "m", Iteration: 1, Item: &i}
		e := mustEvent(t, run, eventlog.DecisionID(run, events.NodeReady, ref.Key()), &events.NodeReadyData{NodeRef: ref, Attempt: 1, Queue: "default"})
		eventstore.MarkDecision(e)
		evs = append(evs, e)
	}
	if last, err = eventstore.Append(ctx, st, run, 0, evs...); err != nil {
		t.Fatalf("2500-event append: %v", err)
	}
	return run, first, last
}

func TestStoreLargeBatchAndLongRead(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	run, seq, last := appendLongRun(t, st)
	if last != seq+2500 {
		t.Fatalf("last = %d, want %d", last, seq+2500)
	}
	all, err := st.Read(ctx, run, 0, 0)
	if err != nil || len(all) != 2501 {
		t.Fatalf("read %d events, err %v; want 2501", len(all), err)
	}
	for i, e := range all[1:] {
		p, _ := e.Payload()
		if got := *p.(*events.NodeReadyData).Item; got != i {
			t.Fatalf("event %d has item %d", i, got)
		}
	}
}

// TestReadAsksForWhatIsPending: a read asks the server for exactly the
// messages the run has left, never a batch larger than them. A larger
// batch makes the server look for more matches through every block after
// the run's last message (its subject index cannot skip them for a
// wildcard filter over 64k subjects), which is what made retention's
// sweep load the whole stream. A read from the start counts first with a
// batch of one; a read from further on does not know the count and asks
// for a full batch first.
func TestReadAsksForWhatIsPending(t *testing.T) {
	srv, st := natstest.Store(t)
	ctx := context.Background()
	run, _, _ := appendLongRun(t, st)
	// Another run after it: the messages a larger batch would look through.
	other := events.NewRunID()
	if _, err := eventstore.Append(ctx, st, other, 0, started(t, other)); err != nil {
		t.Fatal(err)
	}

	nc, _ := natstest.Connect(t, srv)
	var mu sync.Mutex
	var batches []int
	var seqs []uint64
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET."+eventlog.DefaultStream, func(m *nats.Msg) {
		var req struct {
			Seq   uint64 `json:"seq"`
			Batch int    `json:"batch"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Errorf("direct get request %q: %v", m.Data, err)
		}
		mu.Lock()
		defer mu.Unlock()
		batches, seqs = append(batches, req.Batch), append(seqs, req.Seq)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	requests := func() ([]int, []uint64) {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		b, s := batches, seqs
		batches, seqs = nil, nil
		return b, s
	}

	all, err := st.Read(ctx, run, 0, 0)
	if err != nil || len(all) != 2501 {
		t.Fatalf("read %d events, err %v; want 2501", len(all), err)
	}
	b, s := requests()
	if want := []int{1, 1000, 1000, 501}; !slices.Equal(b, want) {
		t.Errorf("a read from the start asked for batches %v, want %v (a count, then exactly what is pending)", b, want)
	}
	if s[0] != 1 || s[1] != 1 {
		t.Errorf("the count and the first batch start at %v, want 1 and 1 (the subject index counts from the stream's start)", s[:2])
	}

	// From the middle: a full batch first (the count is not known), then
	// exactly what the first batch left pending.
	mid := all[1200].Seq
	rest, err := st.Read(ctx, run, mid, 0)
	if err != nil || len(rest) != 1301 {
		t.Fatalf("read %d events from %d, err %v; want 1301", len(rest), mid, err)
	}
	if b, _ := requests(); !slices.Equal(b, []int{1000, 301}) {
		t.Errorf("a read from the middle asked for batches %v, want [1000 301]", b)
	}
	_ = sub.Unsubscribe()
}

func TestStorePayloadTooLarge(t *testing.T) {
	_, st := natstest.Store(t)
	run := events.NewRunID()
	big := strings.Repeat("x", st.MaxEventSize())
	e := mustEvent(t, run, "big", &events.NodeInvokedData{NodeRef: events.NodeRef{Node: "n", Iteration: 1}, Attempt: 1, Output: json.RawMessage(`"` + big + `"`)})
	_, err := eventstore.Append(context.Background(), st, run, events.AnySeq, e)
	if !errors.Is(err, events.ErrPayloadTooLarge) || !strings.Contains(err.Error(), `node "n"`) {
		t.Fatalf("got %v, want ErrPayloadTooLarge naming the node", err)
	}
}

func TestStoreSchedule(t *testing.T) {
	_, st := natstest.Store(t)
	if err := eventstore.EnsureTimers(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := eventstore.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(1500 * time.Millisecond)
	timer := mustEvent(t, run, "t1", &events.TimerFiredData{TimerID: "t1", Purpose: "retry", Ref: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 2})
	if err := eventstore.Must(st).Schedule(ctx, timer, "t1", at); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	// The timer fires in the timers stream, never in the events stream,
	// and reads back as the run's TimerFired (the coordinator relays it).
	ts, err := eventstore.JetStream(st).Stream(ctx, eventstore.Must(st).TimerStream())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, err := ts.GetLastMsgForSubject(ctx, eventlog.FiredSubject(run))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if time.Now().Before(at.Add(-time.Second)) {
			t.Fatalf("timer fired early")
		}
		e, err := eventstore.DecodeFired(m.Subject, m.Header, m.Data)
		if err != nil || e.Type != events.TimerFired || e.NodeID != "a" || e.ID != timer.ID {
			t.Fatalf("fired timer read as %+v: %v", e, err)
		}
		if evs, _ := st.Read(ctx, run, 0, 0); len(evs) != 1 {
			t.Fatalf("the run has %d events: the timer fired into the events stream", len(evs))
		}
		// A fired copy on another run's subject, or fired by another
		// schedule, is refused.
		m.Header.Set("Nats-Scheduler", eventlog.ScheduleSubject(events.NewRunID(), "t1"))
		if _, err := eventstore.DecodeFired(m.Subject, m.Header, m.Data); !errors.Is(err, events.ErrMisplaced) {
			t.Fatalf("a timer fired by another run's schedule: %v", err)
		}
		return
	}
	t.Fatal("scheduled timer never fired")
}

func TestStoreReadUpTo(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := eventstore.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	last, err := eventstore.Append(ctx, st, run, 0, ready(t, run, "a"), ready(t, run, "b"), ready(t, run, "c"))
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

func TestStoreStartIsIdempotentOnlyForTheSameStart(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	run := events.NewRunID()
	first := started(t, run)
	if _, err := eventstore.Append(ctx, st, run, 0, first); err != nil {
		t.Fatal(err)
	}
	// The same start again (a retried request) is fine.
	if _, err := eventstore.Append(ctx, st, run, 0, first); err != nil {
		t.Fatalf("retried start: %v", err)
	}
	// Another start under the same id, within the de-duplication window, is not.
	other := mustEvent(t, run, run, &events.RunStartedData{GraphName: "other", Graph: json.RawMessage(`{"name":"other"}`)})
	if _, err := eventstore.Append(ctx, st, run, 0, other); !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("second start: got %v, want ErrRunExists", err)
	}
	evs, _ := st.Read(ctx, run, 0, 0)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
}

func TestOpenLeavesAGoodStreamAlone(t *testing.T) {
	srv, st := natstest.Store(t)
	_, js := natstest.Connect(t, srv)
	s, err := js.Stream(context.Background(), st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	before := s.CachedInfo().Created
	if _, err := events.Open(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	s, _ = js.Stream(context.Background(), st.StreamName())
	if !s.CachedInfo().Created.Equal(before) {
		t.Fatal("stream was recreated")
	}
}

// TestAppendRefusesDecisions: the public Append writes no coordinator
// decision, whether built with New or read back from JSON that says it is
// one, alone or in a batch; nothing reaches the stream.
func TestAppendRefusesDecisions(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := st.Append(ctx, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	js := eventstore.JetStream(st)
	lastSeq := func() uint64 {
		s, err := js.Stream(ctx, st.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := lastSeq()
	built, err := events.New(run, "forged-ready", time.Time{}, &events.NodeReadyData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ready(t, run, "b"))
	if err != nil {
		t.Fatal(err)
	}
	var decoded events.Event
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	fact := mustEvent(t, run, "fact-1", &events.NodeInvokingData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Worker: "w"})
	completed, err := events.New(run, "forged-end", time.Time{}, &events.RunCompletedData{})
	if err != nil {
		t.Fatal(err)
	}
	for name, batch := range map[string][]*events.Event{
		"node-ready built with New": {built},
		"node-ready read from JSON": {&decoded},
		"run-completed":             {completed},
		"a fact, then a decision":   {fact, built},
	} {
		_, err := st.Append(ctx, run, events.AnySeq, batch...)
		if !errors.Is(err, events.ErrMisplaced) || !strings.Contains(err.Error(), "coordinator decision") {
			t.Errorf("%s: Append = %v, want ErrMisplaced naming a coordinator decision", name, err)
		}
	}
	if after := lastSeq(); after != before {
		t.Errorf("the stream moved from %d to %d: a refused append wrote", before, after)
	}
}

// TestAppendRefusesParentClaim: Append writes no run-started that names a
// parent run (only the engine starts child runs, as decisions); a child's
// start appended as a decision goes on the child's decision subject, and
// a second one, even for the same parent, is ErrRunExists unless it is
// the very same start.
func TestAppendRefusesParentClaim(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	child := events.NewRunID()
	parent := &events.ParentRef{RunID: "victim1", Ref: events.NodeRef{Node: "child", Iteration: 1}}
	claim := mustEvent(t, child, child, &events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent})
	var pc *events.ParentClaimError
	if _, err := st.Append(ctx, child, 0, claim); !errors.As(err, &pc) || !errors.Is(err, events.ErrMisplaced) {
		t.Fatalf("a client's start naming a parent: Append = %v, want a ParentClaimError", err)
	}
	if _, err := st.LastSeq(ctx, child); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("the refused start was written: %v", err)
	}
	start := mustEvent(t, child, child, &events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent})
	eventstore.MarkDecision(start)
	seq, err := eventstore.Append(ctx, st, child, 0, start)
	if err != nil {
		t.Fatalf("the coordinator's child start: %v", err)
	}
	if again, err := eventstore.Append(ctx, st, child, 0, start); err != nil || again != seq {
		t.Fatalf("the same child start again: %d %v, want %d", again, err, seq)
	}
	other := mustEvent(t, child, child, &events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent, Input: json.RawMessage(`{"x":1}`)})
	eventstore.MarkDecision(other)
	if _, err := eventstore.Append(ctx, st, child, 0, other); !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("another child start: %v, want ErrRunExists", err)
	}
	evs, err := st.Read(ctx, child, 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Subject() != eventlog.ChildStartedSubject(child) || !evs[0].IsDecision() {
		t.Fatalf("child run's log: %v %+v", err, evs)
	}
	m, err := eventstore.LeaderFirst(ctx, st, eventlog.ChildStartedSubject(child))
	if err != nil || m == nil || m.Sequence != seq {
		t.Fatalf("LeaderFirst: %v %+v, want the start at %d", err, m, seq)
	}
}
