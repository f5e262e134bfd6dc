package eventlog_test

// Appends, reads, concurrency, de-duplication and starts are the log's
// contract (contract_test.go, package logtest), which the simulator's
// in-memory log runs too; what is left here is the JetStream store's own.

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
	"github.com/weft-dev/weft/internal/testkit"
)

func mustEvent(t *testing.T, run, id string, p eventlog.Payload) *eventlog.Event {
	t.Helper()
	e, err := eventlog.New(run, id, time.Time{}, p)
	if err != nil {
		t.Fatal(err)
	}
	e.Queue = "default" // where a worker's outcome is written
	return e
}

func started(t *testing.T, run string) *eventlog.Event {
	return mustEvent(t, run, run, &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`)})
}

func ready(t *testing.T, run, node string) *eventlog.Event {
	ref := eventlog.NodeRef{Node: node, Iteration: 1}
	e := mustEvent(t, run, eventlog.DecisionID(run, eventlog.NodeReady, ref.Key(), "1"), &eventlog.NodeReadyData{NodeRef: ref, Attempt: 1, Type: "echo", Queue: "default"})
	eventlog.MarkDecision(e)
	return e
}

// appendLongRun appends a run of 2501 events: its start, then 2500
// node-ready decisions (items 0 to 2499) in one append, more than one
// atomic batch and more than one read batch. It returns the run and the
// sequences of its first and last events.
func appendLongRun(t *testing.T, st eventlog.Store) (run string, first, last uint64) {
	t.Helper()
	ctx := context.Background()
	run = eventlog.NewRunID()
	first, err := eventlog.Append(ctx, st, run, 0, started(t, run))
	if err != nil {
		t.Fatal(err)
	}
	var evs []*eventlog.Event
	for i := range 2500 {
		ref := eventlog.NodeRef{Node: "m", Iteration: 1, Item: &i}
		e := mustEvent(t, run, eventlog.DecisionID(run, eventlog.NodeReady, ref.Key()), &eventlog.NodeReadyData{NodeRef: ref, Attempt: 1, Queue: "default"})
		eventlog.MarkDecision(e)
		evs = append(evs, e)
	}
	if last, err = eventlog.Append(ctx, st, run, 0, evs...); err != nil {
		t.Fatalf("2500-event append: %v", err)
	}
	return run, first, last
}

func TestStoreLargeBatchAndLongRead(t *testing.T) {
	_, st := testkit.Store(t)
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
		if got := *p.(*eventlog.NodeReadyData).Item; got != i {
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
	srv, st := testkit.Store(t)
	ctx := context.Background()
	run, _, _ := appendLongRun(t, st)
	// Another run after it: the messages a larger batch would look through.
	other := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, other, 0, started(t, other)); err != nil {
		t.Fatal(err)
	}

	nc, _ := testkit.Connect(t, srv)
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

// TestStorePayloadTooLarge: with offloading off, an event that does not
// fit in one message is refused, naming the node (with it on, the limit
// is the object's: TestOffloadRefusals).
func TestStorePayloadTooLarge(t *testing.T) {
	_, st := testkit.Store(t, eventlog.WithOffloadAt(0))
	run := eventlog.NewRunID()
	big := strings.Repeat("x", st.MaxEventSize())
	e := mustEvent(t, run, "big", &eventlog.NodeInvokedData{NodeRef: eventlog.NodeRef{Node: "n", Iteration: 1}, Attempt: 1, Output: json.RawMessage(`"` + big + `"`)})
	_, err := eventlog.Append(context.Background(), st, run, eventlog.AnySeq, e)
	if !errors.Is(err, eventlog.ErrPayloadTooLarge) || !strings.Contains(err.Error(), `node "n"`) {
		t.Fatalf("got %v, want ErrPayloadTooLarge naming the node", err)
	}
}

func TestStoreSchedule(t *testing.T) {
	_, st := testkit.Store(t)
	if err := eventlog.EnsureTimers(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(1500 * time.Millisecond)
	timer := mustEvent(t, run, "t1", &eventlog.TimerFiredData{TimerID: "t1", Purpose: "retry", Ref: eventlog.NodeRef{Node: "a", Iteration: 1}, Attempt: 2})
	if err := eventlog.Must(st).Schedule(ctx, timer, "t1", at); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	// The timer fires in the timers stream, never in the events stream,
	// and reads back as the run's TimerFired (the coordinator relays it).
	ts, err := eventlog.JetStream(st).Stream(ctx, eventlog.Must(st).TimerStream())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, err := ts.GetLastMsgForSubject(ctx, eventlog.FiredSubject(run))
		if err != nil {
			// Polls: the scheduled message lands when the server's scheduler fires it, with no notice.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if time.Now().Before(at.Add(-time.Second)) {
			t.Fatalf("timer fired early")
		}
		e, err := eventlog.DecodeFired(m.Subject, m.Header, m.Data)
		if err != nil || e.Type != eventlog.TimerFired || e.NodeID != "a" || e.ID != timer.ID {
			t.Fatalf("fired timer read as %+v: %v", e, err)
		}
		if evs, _ := st.Read(ctx, run, 0, 0); len(evs) != 1 {
			t.Fatalf("the run has %d events: the timer fired into the events stream", len(evs))
		}
		// A fired copy on another run's subject, or fired by another
		// schedule, is refused.
		m.Header.Set("Nats-Scheduler", eventlog.ScheduleSubject(eventlog.NewRunID(), "t1"))
		if _, err := eventlog.DecodeFired(m.Subject, m.Header, m.Data); !errors.Is(err, eventlog.ErrMisplaced) {
			t.Fatalf("a timer fired by another run's schedule: %v", err)
		}
		return
	}
	t.Fatal("scheduled timer never fired")
}

func TestOpenLeavesAGoodStreamAlone(t *testing.T) {
	srv, st := testkit.Store(t)
	_, js := testkit.Connect(t, srv)
	s, err := js.Stream(context.Background(), st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	before := s.CachedInfo().Created
	if _, err := eventlog.Open(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	s, _ = js.Stream(context.Background(), st.StreamName())
	if !s.CachedInfo().Created.Equal(before) {
		t.Fatal("stream was recreated")
	}
}

// TestAppendRefusesParentClaim: Append writes no run-started that names a
// parent run (only the engine starts child runs, as decisions); a child's
// start appended as a decision goes on the child's decision subject, and
// a second one, even for the same parent, is ErrRunExists unless it is
// the very same start.
func TestAppendRefusesParentClaim(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	child := eventlog.NewRunID()
	parent := &eventlog.ParentRef{RunID: "victim1", Ref: eventlog.NodeRef{Node: "child", Iteration: 1}}
	claim := mustEvent(t, child, child, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent})
	var pc *eventlog.ParentClaimError
	if _, err := st.Append(ctx, child, 0, claim); !errors.As(err, &pc) || !errors.Is(err, eventlog.ErrMisplaced) {
		t.Fatalf("a client's start naming a parent: Append = %v, want a ParentClaimError", err)
	}
	if _, err := st.LastSeq(ctx, child); !errors.Is(err, eventlog.ErrRunNotFound) {
		t.Fatalf("the refused start was written: %v", err)
	}
	start := mustEvent(t, child, child, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent})
	eventlog.MarkDecision(start)
	seq, err := eventlog.Append(ctx, st, child, 0, start)
	if err != nil {
		t.Fatalf("the coordinator's child start: %v", err)
	}
	if again, err := eventlog.Append(ctx, st, child, 0, start); err != nil || again != seq {
		t.Fatalf("the same child start again: %d %v, want %d", again, err, seq)
	}
	other := mustEvent(t, child, child, &eventlog.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"name":"g"}`), Parent: parent, Input: json.RawMessage(`{"x":1}`)})
	eventlog.MarkDecision(other)
	if _, err := eventlog.Append(ctx, st, child, 0, other); !errors.Is(err, eventlog.ErrRunExists) {
		t.Fatalf("another child start: %v, want ErrRunExists", err)
	}
	evs, err := st.Read(ctx, child, 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Subject() != eventlog.ChildStartedSubject(child) || !evs[0].IsDecision() {
		t.Fatalf("child run's log: %v %+v", err, evs)
	}
	m, err := eventlog.LeaderFirst(ctx, st, eventlog.ChildStartedSubject(child))
	if err != nil || m == nil || m.Sequence != seq {
		t.Fatalf("LeaderFirst: %v %+v, want the start at %d", err, m, seq)
	}
}
