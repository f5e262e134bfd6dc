package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// Regression tests of issue 9's bug classes against real JetStream, with
// faults injected at the store seam (testkit.FaultStore) or hostile
// messages published on a run's subjects.

const flakyGraph = `
name: flaky
nodes:
  - {id: a, type: fail, config: {failAttempts: 2}, retry: {maxAttempts: 4, initialInterval: 10ms, jitter: 0.01}}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

// startRun appends the run-started event of a run with a chosen id.
func startRun(t testing.TB, st events.Store, g *graph.Graph, run string, input string) {
	t.Helper()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), Input: json.RawMessage(input),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, 0, e); err != nil {
		t.Fatal(err)
	}
}

// attempts lists a run's attempts as the fold took them. A timer may fire
// twice (it was re-armed while firing); the fold takes the first.
func attempts(t testing.TB, st events.Store, run string) string {
	t.Helper()
	var out []string
	fired := map[int]bool{}
	for _, e := range readRun(t, st, run) {
		p, _ := e.Payload()
		switch d := p.(type) {
		case *events.NodeReadyData:
			out = append(out, fmt.Sprintf("ready %d", d.Attempt))
		case *events.NodeFailedData:
			out = append(out, fmt.Sprintf("failed %d", d.Attempt))
		case *events.RetryScheduledData:
			out = append(out, fmt.Sprintf("retry %d", d.Attempt))
		case *events.TimerFiredData:
			if !fired[d.Attempt] {
				fired[d.Attempt] = true
				out = append(out, fmt.Sprintf("timer %d", d.Attempt))
			}
		case *events.NodeInvokedData:
			out = append(out, fmt.Sprintf("invoked %d", d.Attempt))
		}
	}
	return strings.Join(out, ", ")
}

const wantFlaky = "ready 1, failed 1, retry 2, timer 2, ready 2, failed 2, retry 3, timer 3, ready 3, invoked 3"

// A retry timer whose schedule fails is armed again: the event is handed
// back, the run folded afresh, and every pending timer re-armed. Before,
// the timer was scheduled before its decision with a fixed id, and one
// failed schedule left the node retrying forever.
func TestRetryTimerSurvivesFailedSchedules(t *testing.T) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	var mu sync.Mutex
	failures := map[string]int{}
	st.Set(func(f *testkit.FaultStore) {
		f.BeforeSchedule = func(_ *events.Event, id string) error {
			mu.Lock()
			defer mu.Unlock()
			if failures[id] < 2 {
				failures[id]++
				return errors.New("injected: schedule failed")
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, base, "w1")
	runs := start(t, base, mustGraph(t, flakyGraph), 3)
	for _, s := range waitEnded(t, base, runs, 30*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %v", s.RunID, s.Status, s.Error)
		}
	}
	for _, run := range runs {
		if got := attempts(t, base, run); got != wantFlaky {
			t.Fatalf("run %s: %s\nwant %s", run, got, wantFlaky)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) == 0 {
		t.Fatal("no schedule was failed: the test injected nothing")
	}
}

// The decision that asks for a retry lands, and its acknowledgement is
// lost (as when the coordinator dies right after the append): the timer
// is armed from the state when the event is handled again.
func TestRetryTimerArmedAfterLostAck(t *testing.T) {
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	var mu sync.Mutex
	lost := map[string]bool{}
	st.Set(func(f *testkit.FaultStore) {
		f.AfterAppend = func(run string, evs []*events.Event) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range evs {
				if e.Type == events.RetryScheduled && !lost[e.ID] {
					lost[e.ID] = true
					return errors.New("injected: acknowledgement lost")
				}
			}
			return nil
		}
		// And appends slower than the back-off: the timer still follows
		// its decision.
		f.Delay = 20 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, base, "w1")
	runs := start(t, base, mustGraph(t, flakyGraph), 2)
	waitEnded(t, base, runs, 30*time.Second)
	for _, run := range runs {
		if got := attempts(t, base, run); got != wantFlaky {
			t.Fatalf("run %s: %s\nwant %s", run, got, wantFlaky)
		}
	}
	if len(lost) == 0 {
		t.Fatal("no acknowledgement was lost: the test injected nothing")
	}
}

// Junk bytes and an event of a type this version does not know (written
// by a newer Weft) on a run's decision subjects: the run goes on. Before,
// the concurrency check was computed from decodable events only, and every
// later decision conflicted forever.
func TestJunkOnDecisionSubjectsDoesNotStall(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	run := events.NewRunID()
	startRun(t, st, mustGraph(t, chain), run, `{}`)
	waitFor(t, st, run, events.NodeReady)
	base := strings.TrimSuffix(eventlog.DecisionFilter(run), ">")
	publish := func(subject string, hdr nats.Header, data string) {
		t.Helper()
		if _, err := eventlog.JetStream(st).PublishMsg(ctx, &nats.Msg{Subject: subject, Header: hdr, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(base+"routed", nil, "\x00\x01 not an event")
	publish(base+"future", nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"f1"}, "ce-source": {"weft-v9"},
		"ce-type": {"dev.weft.future.v9"}, "ce-runid": {run}, "content-type": {"application/json"}}, `{"x":1}`)
	runWorker(t, ctx, st, "w1") // after the junk: the run's next decision comes after it
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	checkExactlyOnce(t, st, []string{run}, 5)
	// The junk is not delivered to the coordinator (it consumes no
	// decisions but a start and a local work item: lanes.go); it moved
	// the run's decision subjects on, so the next decision was refused
	// and the run read again, junk and all.
	if got := c.Stats().Conflicts; got < 1 {
		t.Fatalf("%d decisions refused, want the one after the junk", got)
	}
}

// Someone publishes, on another run's subject, messages under the ids the
// engine will use next (a decision's and a worker outcome's). JetStream
// answers the real events as duplicates; the store confirms them against
// the stored messages, writes them under fresh ids, and the run ends.
func TestSquattedIDsDoNotStall(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	run, other := events.NewRunID(), events.NewRunID()
	for _, id := range []string{
		eventlog.DecisionID(run, events.RunCompleted),
		eventlog.DecisionID(run, events.NodeInvoked, "b/1", "1", "1"),
		eventlog.DecisionID(run, events.NodeReady, "c/1", "1"),
	} {
		squat := &nats.Msg{Subject: strings.TrimSuffix(eventlog.StartedSubject(other), "started") + "signal", Header: nats.Header{nats.MsgIdHdr: {id}}, Data: []byte("mine")}
		if _, err := eventlog.JetStream(st).PublishMsg(ctx, squat); err != nil {
			t.Fatal(err)
		}
	}
	startRun(t, st, mustGraph(t, chain), run, `{}`)
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	checkExactlyOnce(t, st, []string{run}, 5)
}

// A decision that can never be written (a work item over the server's
// message size) fails the run with an error that says why, instead of
// being retried every 500 ms forever.
func TestUnwritableDecisionFailsRun(t *testing.T) {
	// Offloading off: the decision that cannot be written is one over the
	// message size (with it on, one over the object limit).
	_, st := testkit.StoreOn(t, testkit.ServerWith(t, embedded.Config{MaxPayload: 256 << 10}), events.WithOffloadAt(0))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, `
name: grows
nodes:
  - {id: a, type: transform, config: {set: {t: "state.s + state.s"}, output: "1"}}
  - {id: b, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: END}
`)
	run := events.NewRunID()
	startRun(t, st, g, run, fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", 100_000)))
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailurePayloadTooLarge ||
		!strings.Contains(s.Error.Message, `node "b"`) {
		t.Fatalf("run %s: %+v, want a PayloadTooLarge failure naming node b", s.Status, s.Error)
	}
	if got := c.Stats().FailedRuns; got != 1 {
		t.Fatalf("%d runs failed by the coordinator, want 1", got)
	}
}

// A human node's deadline timer is dropped when the run ends: no schedule
// is left behind and no timer fires into the ended run.
func TestTimersDroppedWhenRunEnds(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(t, `
name: approve
nodes:
  - {id: ask, type: human, config: {timeout: 1h}}
edges:
  - {from: START, to: ask}
  - {from: ask, to: END}
`)
	run := events.NewRunID()
	startRun(t, st, g, run, `{}`)
	waitFor(t, st, run, events.NodeWaiting)
	// The deadline is scheduled once the decision is in the log: wait for
	// the schedule's message, then count.
	waitScheduled(t, st, run)
	if n := pendingSchedules(t, st, run); n != 1 {
		t.Fatalf("%d schedules pending while the node waits, want 1", n)
	}
	if err := client.New(st).Signal(ctx, run, "ask", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	// Waits for an absence: the schedule's removal is no event to wait
	// for, so the timers stream is polled until it holds none.
	deadline := time.Now().Add(10 * time.Second)
	for pendingSchedules(t, st, run) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deadline's schedule outlived the run")
		}
		// Polls: a schedule's removal from the timers stream sends no event.
		time.Sleep(20 * time.Millisecond)
	}
}

// waitScheduled waits for the first schedule of a run to reach the timers
// stream, through an ordered consumer on the run's schedule subjects.
func waitScheduled(t testing.TB, st events.Store, run string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := eventlog.JetStream(st).OrderedConsumer(ctx, eventlog.Must(st).TimerStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{eventlog.ScheduleFilter(run)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil {
		t.Fatalf("no schedule of run %s reached the timers stream: %v", run, err)
	}
}

func pendingSchedules(t testing.TB, st events.Store, run string) uint64 {
	t.Helper()
	s, err := eventlog.JetStream(st).Stream(context.Background(), eventlog.Must(st).TimerStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(eventlog.ScheduleFilter(run)))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// runHanging runs a graph of one node of type typ, configured by limits
// (its timeout or heartbeat), whose attempt 1 hangs ignoring its context
// after calling before, and returns its log once the run completed; it
// fails the test unless the coordinator recorded attempt 1 as timed out
// with a message that contains want.
func runHanging(t *testing.T, typ, limits, want string, before func(context.Context) error) []*events.Event {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	release := make(chan struct{})
	runCustomWorker(t, ctx, st, map[string]worker.Node{
		typ: worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			if err := before(ctx); err != nil {
				return nil, err
			}
			if in.Attempt == 1 {
				<-release // ignores its context
			}
			return &worker.Result{Output: "done"}, nil
		}),
	}, worker.WithDrainTimeout(time.Second))
	t.Cleanup(func() { close(release) }) // before the worker stops
	g := anyTypeGraph(t, fmt.Sprintf(`
name: %s
nodes:
  - {id: s, type: %s, %s, retry: {maxAttempts: 2, initialInterval: 10ms, jitter: 0.01}}
edges:
  - {from: START, to: s}
  - {from: s, to: END}
`, typ, typ, limits))
	run := events.NewRunID()
	startRun(t, st, g, run, `{}`)
	s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
	if s.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", s.Status, s.Error)
	}
	evs := readRun(t, st, run)
	for _, e := range evs {
		if p, _ := e.Payload(); p != nil {
			if f, ok := p.(*events.NodeFailedData); ok && e.IsDecision() && f.Attempt == 1 && f.Error.Type == events.FailureTimeout &&
				strings.Contains(f.Error.Message, want) {
				if got := attempts(t, st, run); got != "ready 1, timer 1, failed 1, retry 2, timer 2, ready 2, invoked 2" {
					t.Fatalf("attempts: %s", got)
				}
				return evs
			}
		}
	}
	t.Fatalf("no timeout of attempt 1 (%q) recorded by the coordinator: %s", want, attempts(t, st, run))
	return nil
}

// A node that ignores its context runs past its timeout: the coordinator's
// durable start-to-close timer fails the attempt as timed out, whatever the
// worker is doing, and the retry policy runs attempt 2.
func TestTimeoutEnforcedByCoordinator(t *testing.T) {
	runHanging(t, "stubborn", "timeout: 200ms", "longer than its timeout", func(context.Context) error { return nil })
}

// A node that reported progress once and then hangs: the coordinator's
// durable heartbeat timer fails the attempt when no Heartbeat event comes
// for HeartbeatMisses intervals, and attempt 2 runs.
func TestHeartbeatTimeoutEnforcedByCoordinator(t *testing.T) {
	runHanging(t, "silent", "heartbeat: 100ms", "no heartbeat", func(ctx context.Context) error {
		return worker.Heartbeat(ctx, map[string]int{"done": 1})
	})
}
