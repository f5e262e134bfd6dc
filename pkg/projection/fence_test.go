package projection_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// run builds a run's history event by event and folds it as it goes.
type run struct {
	t     *testing.T
	s     *projection.State
	seq   uint64
	clock time.Time
}

var t0 = time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)

func newRun(t *testing.T) *run {
	t.Helper()
	r := &run{t: t, s: &projection.State{}, clock: t0}
	r.ok(&events.RunStartedData{GraphName: "g", Graph: testGraph})
	return r
}

// testGraph is the graph of newRun's runs: a worker node a, a human node
// h, human nodes n0…n19, and human nodes that declare what they accept
// (see signals_test.go).
var testGraph = func() json.RawMessage {
	nodes := []string{`{"id":"a","type":"echo"}`, `{"id":"h","type":"human"}`,
		`{"id":"approve","type":"human","outputSchema":{"type":"object","required":["approved"],"properties":{"approved":{"type":"boolean"},"amount":{"type":"number"}}},` +
			`"config":{"checks":[{"expr":"!output.approved || output.amount <= state.limit","message":"the amount is over the limit"}]}}`}
	for i := range 20 {
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","type":"human"}`, i))
	}
	return json.RawMessage(`{"name":"g","nodes":[` + strings.Join(nodes, ",") + `]}`)
}()

// event builds the next event of the run; its id is its sequence unless
// the payload is a signal given an id by apply.
func (r *run) event(p events.Payload) *events.Event {
	r.t.Helper()
	r.seq++
	r.clock = r.clock.Add(time.Second)
	e, err := events.New("run1", fmt.Sprintf("run1:%d", r.seq), r.clock, p)
	if err != nil {
		r.t.Fatal(err)
	}
	e.Seq = r.seq
	return e
}

func (r *run) apply(p events.Payload) error {
	r.t.Helper()
	return r.s.Apply(r.event(p))
}

// ok applies p and fails the test unless it counts.
func (r *run) ok(p events.Payload) {
	r.t.Helper()
	if err := r.apply(p); err != nil {
		r.t.Fatalf("%s: %v", p.EventType(), err)
	}
}

// stale applies p and fails the test unless it is stale and changes
// nothing but the counters; it returns the error.
func (r *run) stale(p events.Payload) error {
	r.t.Helper()
	before := r.s.Clone()
	err := r.apply(p)
	if !errors.Is(err, projection.ErrStale) {
		r.t.Fatalf("%s: got %v, want stale", p.EventType(), err)
	}
	r.sameBut(before, func(s *projection.State) { s.Stats.Stale++; s.Stats.Events++ })
	return err
}

// sameBut fails unless the state is before with what the event itself
// moves on (LastSeq, UpdatedAt, the history's size) and what counts does.
func (r *run) sameBut(before *projection.State, counts func(*projection.State)) {
	r.t.Helper()
	counts(before)
	before.LastSeq, before.UpdatedAt, before.Stats.Bytes = r.s.LastSeq, r.s.UpdatedAt, r.s.Stats.Bytes
	if got, want := string(r.s.Marshal()), string(before.Marshal()); got != want {
		r.t.Fatalf("state changed:\n got %s\nwant %s", got, want)
	}
}

func ref(node string, iter int) events.NodeRef { return events.NodeRef{Node: node, Iteration: iter} }

func itemRef(node string, iter, i int) events.NodeRef {
	return events.NodeRef{Node: node, Iteration: iter, Item: &i}
}

var boom = events.Failure{Type: "Boom", Message: "boom", Retryable: true}

// The bug of issue 9: attempt 1 is delivered to worker A, redelivered to
// worker B, which fails it; the retry is scheduled; A's late success for
// attempt 1 must not complete the node (it used to, and attempt 2 then ran
// the side effect again). Attempt 2 completes it.
func TestLateSuccessOfRedeliveredAttemptIsStale(t *testing.T) {
	r := newRun(t)
	a := ref("a", 1)
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B"})
	if n := r.s.Nodes["a"]; n.Delivery != 2 || n.Worker != "B" || n.Executions != 2 {
		t.Fatalf("after two deliveries: delivery %d worker %q executions %d", n.Delivery, n.Worker, n.Executions)
	}
	r.ok(&events.NodeFailedData{NodeRef: a, Attempt: 1, Delivery: 2, Error: boom, Worker: "B"})
	r.ok(&events.RetryScheduledData{NodeRef: a, Attempt: 2, At: r.clock.Add(time.Minute), TimerID: "retry-a-1-2", LastFailure: boom})
	err := r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A",
		Output: json.RawMessage(`"late"`), Updates: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
	t.Logf("late success: %v", err)
	if n := r.s.Nodes["a"]; n.Status != projection.NodeRetrying || n.Output != nil || len(r.s.Vars) != 0 || r.s.Stats.Stale != 1 {
		t.Fatalf("late success applied: status %s output %s vars %v", n.Status, n.Output, r.s.Vars)
	}
	// Nor does any outcome of attempt 1 once it failed: not one of the
	// delivery that failed it, not the coordinator's, retrying or due.
	r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B"})
	r.ok(&events.TimerFiredData{TimerID: "retry-a-1-2", Purpose: "retry", Ref: a, Attempt: 2})
	r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1})
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 2, Queue: "q"})
	if n := r.s.Nodes["a"]; n.Delivery != 0 {
		t.Fatalf("a new attempt keeps delivery %d", n.Delivery)
	}
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 2, Delivery: 1, Worker: "A"})
	r.ok(&events.NodeInvokedData{NodeRef: a, Attempt: 2, Delivery: 1, Worker: "A", Output: json.RawMessage(`"ok"`)})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeSucceeded || string(n.Output) != `"ok"` || n.Attempt != 2 {
		t.Fatalf("attempt 2: status %s output %s attempt %d", n.Status, n.Output, n.Attempt)
	}
}

// The first outcome of the live attempt stands, from whichever delivery:
// a late outcome of delivery 1 counts while delivery 2 runs, and delivery
// 2's outcome is then stale.
func TestFirstOutcomeOfAnyDeliveryStands(t *testing.T) {
	r := newRun(t)
	a := ref("a", 1)
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B"})
	// A late invoking of an earlier delivery is an execution, but does not
	// lower the recorded delivery.
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A"})
	if n := r.s.Nodes["a"]; n.Delivery != 2 || n.Worker != "B" || n.Executions != 3 {
		t.Fatalf("delivery %d worker %q executions %d", n.Delivery, n.Worker, n.Executions)
	}
	r.ok(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A", Output: json.RawMessage(`"a"`)})
	if n := r.s.Nodes["a"]; n.Status != projection.NodeSucceeded || string(n.Output) != `"a"` {
		t.Fatalf("status %s output %s", n.Status, n.Output)
	}
	r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "B", Output: json.RawMessage(`"b"`)})
	r.stale(&events.NodeFailedData{NodeRef: a, Attempt: 1, Delivery: 2, Error: boom})
	if r.s.Stats.Stale != 2 || r.s.Stats.Rejected != 0 {
		t.Fatalf("stats %+v", r.s.Stats)
	}
}

// Which outcomes count, one case per rule of the package doc.
func TestOutcomeFencing(t *testing.T) {
	a := ref("a", 1)
	ready := func(r *run) { r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"}) }
	running := func(r *run) {
		ready(r)
		r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "A"})
	}
	failedFor := func(r *run) {
		running(r)
		r.ok(&events.NodeFailedData{NodeRef: a, Attempt: 1, Delivery: 1, Error: events.Failure{Type: "Bad", Message: "no"}})
	}
	retrying := func(r *run) {
		failedFor(r)
		r.ok(&events.RetryScheduledData{NodeRef: a, Attempt: 2, At: r.clock, TimerID: "t", LastFailure: boom})
	}
	retryDue := func(r *run) {
		retrying(r)
		r.ok(&events.TimerFiredData{TimerID: "t", Purpose: "retry", Ref: a, Attempt: 2})
	}
	invoked := func(attempt, delivery int) events.Payload {
		return &events.NodeInvokedData{NodeRef: a, Attempt: attempt, Delivery: delivery, Output: json.RawMessage(`1`)}
	}
	for _, tc := range []struct {
		name    string
		before  func(*run)
		outcome events.Payload
		wantErr error
	}{
		{"ready, no delivery known", ready, invoked(1, 3), nil},
		{"running, live delivery", running, invoked(1, 1), nil},
		{"running, coordinator's (delivery 0)", running, &events.NodeFailedData{NodeRef: a, Attempt: 1, Error: events.Failure{Type: events.FailureTimeout}}, nil},
		{"running, a delivery not reported invoking", running, invoked(1, 2), nil},
		{"running, other attempt", running, invoked(2, 1), projection.ErrStale},
		{"running, other iteration", running, &events.NodeInvokedData{NodeRef: ref("a", 2), Attempt: 1, Delivery: 1}, projection.ErrStale},
		{"unknown node", running, &events.NodeInvokedData{NodeRef: ref("zz", 1), Attempt: 1}, projection.ErrStale},
		{"failed for good", failedFor, invoked(1, 1), projection.ErrStale},
		{"failed, coordinator's fallback", failedFor, &events.NodeInvokedData{NodeRef: a, Attempt: 1, Fallback: true, Worker: "coordinator"}, nil},
		{"failed, a worker's late fallback", failedFor, &events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Fallback: true}, projection.ErrStale},
		{"retrying", retrying, invoked(1, 0), projection.ErrStale},
		{"retry due", retryDue, invoked(1, 1), projection.ErrStale},
		{"retry due, next attempt not readied", retryDue, invoked(2, 1), projection.ErrStale},
		{"heartbeat of the live attempt", running, &events.HeartbeatData{NodeRef: a, Attempt: 1}, nil},
		{"heartbeat of a retrying attempt", retrying, &events.HeartbeatData{NodeRef: a, Attempt: 1}, projection.ErrStale},
		{"step of the live attempt", running, &events.NodeStepData{NodeRef: a, Attempt: 1, Step: 1, Kind: "model"}, nil},
		{"step of a retrying attempt", retrying, &events.NodeStepData{NodeRef: a, Attempt: 1, Step: 2}, projection.ErrStale},
		{"step of another attempt", running, &events.NodeStepData{NodeRef: a, Attempt: 2, Step: 1}, projection.ErrStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			tc.before(r)
			before := r.s.Clone()
			err := r.apply(tc.outcome)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				r.sameBut(before, func(s *projection.State) { s.Stats.Stale++; s.Stats.Events++ })
			}
		})
	}
}

// Map items are fenced like nodes, each on its own attempt.
func TestItemFencing(t *testing.T) {
	r := newRun(t)
	r.ok(&events.NodeWaitingData{NodeRef: ref("m", 1), For: "map", Items: json.RawMessage(`["x","y"]`)})
	i0, i1 := itemRef("m", 1, 0), itemRef("m", 1, 1)
	r.ok(&events.NodeReadyData{NodeRef: i0, Attempt: 1, Queue: "q"})
	r.ok(&events.NodeReadyData{NodeRef: i1, Attempt: 1, Queue: "q"})
	r.stale(&events.NodeReadyData{NodeRef: i1, Attempt: 1, Queue: "q"}) // readied before
	r.ok(&events.NodeInvokingData{NodeRef: i0, Attempt: 1, Delivery: 1})
	r.ok(&events.NodeInvokingData{NodeRef: i0, Attempt: 1, Delivery: 2})
	r.ok(&events.NodeInvokingData{NodeRef: i1, Attempt: 1, Delivery: 1})
	r.ok(&events.NodeFailedData{NodeRef: i0, Attempt: 1, Delivery: 2, Error: boom})
	r.stale(&events.NodeInvokedData{NodeRef: i0, Attempt: 1, Delivery: 1, Output: json.RawMessage(`"late"`)})
	r.ok(&events.RetryScheduledData{NodeRef: i0, Attempt: 2, At: r.clock, TimerID: "t0", LastFailure: boom})
	r.stale(&events.NodeInvokedData{NodeRef: i0, Attempt: 1, Delivery: 2})
	r.ok(&events.NodeInvokedData{NodeRef: i1, Attempt: 1, Delivery: 1, Output: json.RawMessage(`"Y"`)})
	r.ok(&events.TimerFiredData{TimerID: "t0", Purpose: "retry", Ref: i0, Attempt: 2})
	r.ok(&events.NodeReadyData{NodeRef: i0, Attempt: 2, Queue: "q"})
	r.ok(&events.NodeInvokingData{NodeRef: i0, Attempt: 2, Delivery: 1})
	r.ok(&events.NodeInvokedData{NodeRef: i0, Attempt: 2, Delivery: 1, Output: json.RawMessage(`"X"`)})
	n := r.s.Nodes["m"]
	if n.Status != projection.NodeSucceeded || string(n.Output) != `["X","Y"]` {
		t.Fatalf("map: status %s output %s", n.Status, n.Output)
	}
	r.stale(&events.NodeReadyData{NodeRef: i0, Attempt: 3, Queue: "q"}) // the map ended
}

// A node that ended is never overwritten by a later decision for its
// activation; a new iteration is a new activation.
func TestEndedActivationIsNotOverwritten(t *testing.T) {
	r := newRun(t)
	a := ref("a", 1)
	r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	r.ok(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1})
	r.ok(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Output: json.RawMessage(`1`)})
	r.ok(&events.NodeRoutedData{NodeRef: a, Signals: []events.Signal{{Edge: 1, To: "a", Taken: true, Back: true}}})
	for _, p := range []events.Payload{
		&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"},
		&events.NodeReadyData{NodeRef: a, Attempt: 2, Queue: "q"},
		&events.NodeWaitingData{NodeRef: a, For: "signal"},
		&events.NodeSkippedData{NodeRef: a, Reason: "late"},
		&events.NodeRoutedData{NodeRef: a, Signals: []events.Signal{{Edge: 1, To: "a", Taken: true, Back: true}}},
		&events.RetryScheduledData{NodeRef: a, Attempt: 2, TimerID: "t"},
		&events.NodeInvokedData{NodeRef: a, Attempt: 1, Fallback: true},
	} {
		t.Logf("%s: %v", p.EventType(), r.stale(p))
	}
	if n := r.s.Nodes["a"]; n.Status != projection.NodeSucceeded || string(n.Output) != "1" {
		t.Fatalf("status %s output %s", n.Status, n.Output)
	}
	// The loop's next iteration is legitimate, consumes the back edge's
	// signal, and then the old iteration's decisions are stale.
	r.ok(&events.NodeReadyData{NodeRef: ref("a", 2), Attempt: 1, Queue: "q", Consumed: []int{1}})
	if n := r.s.Nodes["a"]; n.Iteration != 2 || n.Status != projection.NodeReady || len(r.s.Pending) != 0 {
		t.Fatalf("iteration %d status %s pending %v", n.Iteration, n.Status, r.s.Pending)
	}
	r.stale(&events.NodeReadyData{NodeRef: a, Attempt: 3, Queue: "q"})
	r.stale(&events.NodeSkippedData{NodeRef: ref("a", 2), Reason: "late"})
	r.stale(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1})
}

// Refused events and events of unknown (newer) types keep their place:
// they move LastSeq on, count in Stats.Refused and change nothing else.
func TestRefusedAndUnknownEventsPassOver(t *testing.T) {
	for name, evs := range histories(t) {
		t.Run(name, func(t *testing.T) {
			var with []*events.Event
			var seq uint64
			for i, e := range evs {
				c := *e
				seq += 2
				c.Seq = seq
				with = append(with, &c)
				if i == len(evs)-1 {
					break
				}
				bad := &events.Event{ID: fmt.Sprintf("bad-%d", i), RunID: c.RunID, Seq: seq + 1}
				if i%2 == 0 {
					bad.Type, bad.Refused = events.NodeInvoked, fmt.Errorf("%w: junk", events.ErrMalformedEvent)
				} else {
					bad.Type, bad.Data, bad.Time = "dev.weft.node.future.v9", json.RawMessage(`{}`), c.Time
				}
				with = append(with, bad)
			}
			// Some recorded histories hold refused events of their own
			// (signals the run did not take).
			recorded := map[string]bool{}
			plain := &projection.State{}
			for _, e := range evs {
				if errors.Is(plain.Apply(e), projection.ErrRefused) {
					recorded[e.ID] = true
				}
			}
			s := &projection.State{}
			refused := 0
			for _, e := range with {
				err := s.Apply(e)
				if (e.Refused != nil || !e.Type.Known() || recorded[e.ID]) != errors.Is(err, projection.ErrRefused) {
					t.Fatalf("seq %d (%s): %v", e.Seq, e.Type, err)
				}
				if errors.Is(err, projection.ErrRefused) {
					refused++
				}
				if s.LastSeq != e.Seq {
					t.Fatalf("seq %d: LastSeq %d", e.Seq, s.LastSeq)
				}
			}
			// Without the refused events and with the same sequences, the
			// fold is the same but for the counter and the history's size.
			want := projection.Fold(everyOther(with))
			if s.Stats.Refused != refused || refused != len(evs)-1+len(recorded) {
				t.Fatalf("refused %d, counted %d, want %d", refused, s.Stats.Refused, len(evs)-1+len(recorded))
			}
			s.Stats.Refused = want.Stats.Refused
			s.Stats.Bytes = want.Stats.Bytes
			if got := s.Marshal(); string(got) != string(want.Marshal()) {
				t.Fatalf("refused events changed the state:\n got %s\nwant %s", got, want.Marshal())
			}
		})
	}
}

func everyOther(evs []*events.Event) []*events.Event {
	var out []*events.Event
	for i := 0; i < len(evs); i += 2 {
		out = append(out, evs[i])
	}
	return out
}

// With the stream's own timestamps, the fold records them, whatever time
// the writers put in their events.
// Clients' and workers' times are forged (year 1, year 9999); decisions
// carry the coordinator's own time, which only the coordinator role can
// write, a few milliseconds before the stream stamps them.
func TestServerTimes(t *testing.T) {
	forged := []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}
	s := &projection.State{}
	var seq uint64
	stored := func(p events.Payload) time.Time {
		t.Helper()
		seq++
		stamp := t0.Add(time.Duration(seq) * time.Second)
		at := forged[seq%2]
		if p.EventType().Decision() {
			at = stamp.Add(-3 * time.Millisecond)
		}
		e, err := events.New("run1", fmt.Sprint(seq), at, p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.Stored = seq, stamp
		if err := s.Apply(e); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		if e.IsDecision() {
			return at
		}
		return e.Stored
	}
	a := ref("a", 1)
	started := stored(&events.RunStartedData{GraphName: "g"})
	ready := stored(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	invoking := stored(&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1})
	beat := stored(&events.HeartbeatData{NodeRef: a, Attempt: 1})
	invoked := stored(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1})
	cancel := stored(&events.RunCancelRequestedData{By: "me"})
	ended := stored(&events.RunCancelledData{By: "me"})
	n := s.Nodes["a"]
	for _, c := range []struct {
		name      string
		got, want time.Time
	}{
		{"run started", *s.StartedAt, started},
		{"ready", *n.ReadyAt, ready},
		{"node started", *n.StartedAt, invoking},
		{"heartbeat", *n.HeartbeatAt, beat},
		{"node ended", *n.EndedAt, invoked},
		{"cancel", s.Cancel.At, cancel},
		{"run ended", *s.EndedAt, ended},
		{"updated", *s.UpdatedAt, ended},
	} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s at %v, want %v", c.name, c.got, c.want)
		}
	}
	if d := s.EndedAt.Sub(*s.StartedAt); d != 6*time.Second-3*time.Millisecond {
		t.Errorf("run took %v", d)
	}
}

// A signal is applied once: sent again (the same event id), it neither
// ends the next wait of a human node in a loop nor is buffered.
func TestSignalAppliedOnce(t *testing.T) {
	r := newRun(t)
	signal := func(id string) *events.Event {
		e := r.event(&events.SignalReceivedData{Node: "h", Data: json.RawMessage(`"yes"`)})
		e.ID = id
		return e
	}
	r.ok(&events.NodeWaitingData{NodeRef: ref("h", 1), For: "signal"})
	if err := r.s.Apply(signal("sig-1")); err != nil {
		t.Fatal(err)
	}
	if n := r.s.Nodes["h"]; n.Status != projection.NodeSucceeded {
		t.Fatalf("status %s", n.Status)
	}
	if err := r.s.Apply(signal("sig-1")); !errors.Is(err, projection.ErrStale) {
		t.Fatalf("second signal while not waiting: %v", err)
	}
	r.ok(&events.NodeWaitingData{NodeRef: ref("h", 2), For: "signal"})
	if err := r.s.Apply(signal("sig-1")); !errors.Is(err, projection.ErrStale) {
		t.Fatalf("second signal on the next wait: %v", err)
	}
	if n := r.s.Nodes["h"]; n.Status != projection.NodeWaiting || len(r.s.Signals) != 0 {
		t.Fatalf("status %s, buffered %v", n.Status, r.s.Signals)
	}
	if err := r.s.Apply(signal("sig-2")); err != nil || r.s.Nodes["h"].Status != projection.NodeSucceeded {
		t.Fatalf("a new signal: %v, status %s", err, r.s.Nodes["h"].Status)
	}
}

// Signals for a node that is not waiting are buffered up to the limit;
// more are refused, and a buffered one is used by the next wait.
func TestBufferedSignalsAreBounded(t *testing.T) {
	r := newRun(t)
	for i := range projection.MaxBufferedSignals {
		r.ok(&events.SignalReceivedData{Node: "h", Data: json.RawMessage(fmt.Sprint(i))})
	}
	before := r.s.Clone()
	err := r.apply(&events.SignalReceivedData{Node: "h"})
	if !errors.Is(err, projection.ErrRefused) {
		t.Fatalf("signal over the limit: %v", err)
	}
	r.sameBut(before, func(s *projection.State) { s.Stats.Refused++; s.UpdatedAt = before.UpdatedAt })
	r.ok(&events.NodeWaitingData{NodeRef: ref("h", 1), For: "signal"})
	if n := r.s.Nodes["h"]; n.Status != projection.NodeSucceeded || string(n.Output) != "0" || len(r.s.Signals["h"]) != projection.MaxBufferedSignals-1 {
		t.Fatalf("status %s output %s buffered %d", n.Status, n.Output, len(r.s.Signals["h"]))
	}
	// The run's limit holds over all nodes.
	for i := range 2 * projection.MaxBufferedSignalsPerRun {
		if err := r.apply(&events.SignalReceivedData{Node: fmt.Sprint("n", i%20)}); errors.Is(err, projection.ErrRefused) {
			total := 0
			for _, b := range r.s.Signals {
				total += len(b)
			}
			if total != projection.MaxBufferedSignalsPerRun {
				t.Fatalf("refused at %d buffered signals", total)
			}
			return
		}
	}
	t.Fatal("the run's limit was never reached")
}

// Every pending timer goes when the run ends; a timer that is not pending
// fires into nothing.
func TestTimersEndWithTheRun(t *testing.T) {
	for _, end := range []events.Payload{
		&events.RunCompletedData{},
		&events.RunFailedData{Error: boom},
		&events.RunCancelledData{By: "me"},
	} {
		t.Run(string(end.EventType()), func(t *testing.T) {
			r := newRun(t)
			late := t0.Add(time.Hour)
			r.ok(&events.NodeWaitingData{NodeRef: ref("h", 1), For: "signal", Deadline: &late})
			r.ok(&events.NodeWaitingData{NodeRef: ref("g", 1), For: "signal", Deadline: &late})
			a := ref("a", 1)
			r.ok(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
			r.ok(&events.NodeFailedData{NodeRef: a, Attempt: 1, Error: boom})
			r.ok(&events.RetryScheduledData{NodeRef: a, Attempt: 2, At: t0.Add(time.Minute), TimerID: "retry-a-1-2"})
			ids := slices.Sorted(maps.Keys(r.s.Timers))
			if got, want := fmt.Sprint(ids), "[deadline-g-1 deadline-h-1 retry-a-1-2]"; got != want {
				t.Fatalf("pending timers %s, want %s", got, want)
			}
			before := r.s.Clone()
			r.ok(&events.TimerFiredData{TimerID: "nope", Purpose: "retry", Ref: a})
			r.sameBut(before, func(s *projection.State) { s.Stats.Events++ })
			r.ok(end)
			if len(r.s.Timers) != 0 {
				t.Fatalf("timers after the end: %v", r.s.Timers)
			}
			r.stale(&events.TimerFiredData{TimerID: "deadline-h-1", Purpose: "deadline", Ref: ref("h", 1)})
		})
	}
}
