package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// startRun appends a run-started event whose graph is nodes.
func startRun(t *testing.T, st events.Store, invocation string, nodes ...map[string]any) string {
	t.Helper()
	run := events.NewRunID()
	g := mustJSON(map[string]any{"name": "g", "nodes": nodes})
	p := &events.RunStartedData{GraphName: "g", GraphDigest: events.GraphDigest(g), Graph: g}
	if invocation != "" {
		p.Invocation = json.RawMessage(invocation)
	}
	ev, err := events.New(run, run, time.Time{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, 0, ev); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestWorkItemByReference: a work item without config, schemas or
// invocation state gets them from its run's start.
func TestWorkItemByReference(t *testing.T) {
	st := testStore(t)
	var mu sync.Mutex
	var seen []*worker.Input
	startWorker(t, st, map[string]worker.Node{"calc": worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		mu.Lock()
		seen = append(seen, in)
		mu.Unlock()
		return &worker.Result{Output: map[string]any{"n": in.State["n"]}}, nil
	})})
	node := map[string]any{"id": "add", "type": "calc", "config": map[string]any{"k": "v"},
		"inputSchema": map[string]any{"type": "object", "required": []string{"n"}}}
	run := startRun(t, st, `{"user":"ada"}`, node)
	publishReadyIn(t, st, run, "add", "calc", withInput(map[string]any{"n": 1}))
	waitOutcome(t, st, run, events.NodeInvoked)
	mu.Lock()
	in := seen[0]
	mu.Unlock()
	if string(in.Config) != `{"k":"v"}` || !reflect.DeepEqual(in.Invocation, map[string]any{"user": "ada"}) {
		t.Fatalf("input: config %s, invocation %v", in.Config, in.Invocation)
	}

	// The input schema, from the graph, is checked.
	run2 := startRun(t, st, "", node)
	publishReadyIn(t, st, run2, "add", "calc", withInput(map[string]any{"m": 1}))
	evs := waitOutcome(t, st, run2, events.NodeFailed)
	if f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error; f.Type != events.FailureValidation || f.Retryable {
		t.Fatalf("failure %+v, want a non-retryable ValidationError", f)
	}

	// An older, self-contained work item is used as it is.
	run3 := startRun(t, st, `{"user":"ada"}`, node)
	publishReadyIn(t, st, run3, "add", "calc", withInput(map[string]any{"n": 3}), withConfig(map[string]any{"inline": true}))
	waitOutcome(t, st, run3, events.NodeInvoked)
	mu.Lock()
	in = seen[len(seen)-1]
	mu.Unlock()
	if string(in.Config) != `{"inline":true}` || len(in.Invocation) != 0 {
		t.Fatalf("self-contained item: config %s, invocation %v", in.Config, in.Invocation)
	}
}

// TestWorkItemWithoutItsRun: a work item whose run has no start, or whose
// graph lacks the node, fails at once, not retryable, and says why.
func TestWorkItemWithoutItsRun(t *testing.T) {
	st := testStore(t)
	startWorker(t, st, map[string]worker.Node{"echo": echoNode})

	// No run-started at all: append the ready alone.
	run := events.NewRunID()
	ref := events.NodeRef{Node: "n1", Iteration: 1}
	ev, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), time.Time{},
		&events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: "echo", Queue: worker.DefaultQueue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, events.AnySeq, ev); err != nil {
		t.Fatal(err)
	}
	evs := waitOutcome(t, st, run, events.NodeFailed)
	if f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error; f.Type != worker.FailureRunNotFound || f.Retryable {
		t.Fatalf("failure %+v, want a non-retryable %s", f, worker.FailureRunNotFound)
	}

	run2 := startRun(t, st, "", map[string]any{"id": "other", "type": "echo"})
	publishReadyIn(t, st, run2, "n1", "echo")
	evs = waitOutcome(t, st, run2, events.NodeFailed)
	if f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error; f.Type != events.FailureInvalidGraph || f.Retryable {
		t.Fatalf("failure %+v, want a non-retryable %s", f, events.FailureInvalidGraph)
	}
}

// TestNoWorkForEndedRun: work of a run that has ended is not started; the
// worker records it cancelled, saying why, and acks it.
func TestNoWorkForEndedRun(t *testing.T) {
	st := testStore(t)
	var ran atomic.Int32
	w, _ := startWorker(t, st, map[string]worker.Node{"echo": worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		ran.Add(1)
		return &worker.Result{}, nil
	})}, worker.NoEndWatch())
	// Check every item, as if each had waited long in its queue; and read
	// the log for each (no ended notices are heard, and these runs' ends
	// were appended here, with none).
	worker.SetStaleAfter(w, 0)

	for _, end := range []events.Payload{&events.RunCompletedData{}, &events.RunFailedData{Error: events.Failure{Type: "x", Message: "y"}}, &events.RunCancelledData{By: "tester"}} {
		t.Run(string(end.EventType()), func(t *testing.T) {
			run := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
			ended, err := events.New(run, eventlog.DecisionID(run, end.EventType()), time.Time{}, end)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := eventlog.Append(context.Background(), st, run, 0, ended); err != nil {
				t.Fatal(err)
			}
			publishReadyIn(t, st, run, "n1", "echo")
			evs := waitOutcome(t, st, run, events.NodeCanceled)
			c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]
			if c.Reason != "run ended before the work started" || c.By != "worker" {
				t.Errorf("cancelled %+v", c)
			}
			if n := len(ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)); n != 0 {
				t.Errorf("%d invoking events for work of an ended run", n)
			}
		})
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the node ran %d times for ended runs", n)
	}
	// A run that goes on still gets its work done.
	run := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	publishReadyIn(t, st, run, "n1", "echo")
	waitOutcome(t, st, run, events.NodeInvoked)
	waitUntil(t, "the work item acked", func() bool { return w.Stats().Cancelled == 3 && w.Stats().Succeeded == 1 })
}

// TestHeartbeatWithDetails: a node reports progress; the work item stays
// its worker's and the run's log holds the details, rate-limited.
func TestHeartbeatWithDetails(t *testing.T) {
	st := testStore(t)
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var errs []error
	w, _ := startWorker(t, st, map[string]worker.Node{"long": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		for i := 1; i <= 6; i++ {
			if i == 4 {
				mu.Lock()
				clock = clock.Add(worker.HeartbeatEventInterval)
				mu.Unlock()
			}
			if err := worker.Heartbeat(ctx, map[string]any{"done": i}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
		return &worker.Result{}, nil
	})})
	worker.SetClock(w, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })

	run := publishReady(t, st, "long")
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("heartbeat errors: %v", errs)
	}
	beats := ofType[*events.HeartbeatData](t, evs, events.Heartbeat)
	var got []string
	for _, b := range beats {
		got = append(got, string(b.Details))
	}
	// Calls 1-3 fall in one interval, 4-6 in the next: one event each.
	if want := []string{`{"done":1}`, `{"done":4}`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("heartbeat details %v, want %v", got, want)
	}
	for _, b := range beats {
		if b.Node != "n1" || b.Attempt != 1 {
			t.Errorf("heartbeat %+v", b)
		}
	}
	if want := []events.Type{events.NodeReady, events.NodeInvoking, events.Heartbeat, events.Heartbeat, events.NodeInvoked}; !reflect.DeepEqual(types(evs), want) {
		t.Fatalf("log %v, want %v", types(evs), want)
	}

	if err := worker.Heartbeat(context.Background(), nil); !errors.Is(err, worker.ErrNoWorkItem) {
		t.Fatalf("Heartbeat outside a node: %v, want ErrNoWorkItem", err)
	}
}

// TestNoWorkForEndedRunOnRedelivery: an item delivered again is checked
// whatever its age: here it was handed back by a worker that does not
// serve its type, and the run ended meanwhile.
func TestNoWorkForEndedRunOnRedelivery(t *testing.T) {
	st := testStore(t)
	a, _ := startWorker(t, st, map[string]worker.Node{"other": echoNode})
	worker.SetUnknownTypeDelay(a, 50*time.Millisecond)
	run := startRun(t, st, "", map[string]any{"id": "n1", "type": "late"})
	publishReadyIn(t, st, run, "n1", "late")
	waitUntil(t, "the item handed back", func() bool { return a.Stats().Received >= 1 })
	ended, err := events.New(run, eventlog.DecisionID(run, events.RunCancelled), time.Time{}, &events.RunCancelledData{By: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, events.AnySeq, ended); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	startWorker(t, st, map[string]worker.Node{"late": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		ran.Add(1)
		return &worker.Result{}, nil
	})})
	evs := waitOutcome(t, st, run, events.NodeCanceled)
	c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]
	if c.Delivery < 2 || c.Reason != "run ended before the work started" {
		t.Fatalf("cancelled %+v, want a redelivery cancelled because the run ended", c)
	}
	if ran.Load() != 0 {
		t.Fatal("the node ran for an ended run")
	}
}

// TestCheckBesideARunningNode: the reads and checks before a node starts
// hold no slot. With one slot, held by a node that blocks, an item of an
// ended run is still taken, checked (every item is, as if each had waited
// long in its queue) and recorded cancelled while the node runs; and work
// of a run that goes on waits for the slot, then runs.
func TestCheckBesideARunningNode(t *testing.T) {
	st := testStore(t)
	release := make(chan struct{})
	var running atomic.Int32
	w, _ := startWorker(t, st, map[string]worker.Node{
		"block": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			running.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &worker.Result{}, nil
		}),
		"echo": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) { return &worker.Result{}, nil }),
	}, worker.WithConcurrency(1), worker.NoEndWatch())
	worker.SetStaleAfter(w, 0)

	blocked := startRun(t, st, "", map[string]any{"id": "n1", "type": "block"})
	publishReadyIn(t, st, blocked, "n1", "block")
	waitOutcome(t, st, blocked, events.NodeInvoking)

	ended := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	end, err := events.New(ended, eventlog.DecisionID(ended, events.RunCancelled), time.Time{}, &events.RunCancelledData{By: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, ended, 0, end); err != nil {
		t.Fatal(err)
	}
	publishReadyIn(t, st, ended, "n1", "echo")
	goesOn := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	publishReadyIn(t, st, goesOn, "n1", "echo")

	evs := waitOutcome(t, st, ended, events.NodeCanceled)
	if c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]; c.Reason != "run ended before the work started" {
		t.Fatalf("cancelled %+v", c)
	}
	if n := len(ofType[*events.NodeInvokedData](t, runLog(t, st, blocked), events.NodeInvoked)); n != 0 || running.Load() != 1 {
		t.Fatalf("the blocking node finished (%d invoked, %d running) before the ended run's item was checked; the check should not wait for the slot", n, running.Load())
	}
	if n := len(ofType[*events.NodeInvokingData](t, runLog(t, st, goesOn), events.NodeInvoking)); n != 0 {
		t.Fatalf("a second node started with one slot, held by the blocking node")
	}
	close(release)
	waitOutcome(t, st, blocked, events.NodeInvoked)
	waitOutcome(t, st, goesOn, events.NodeInvoked)
}

// TestEndedNoticeSparesTheRead: a worker hears the coordinators' ended
// notices (eventlog.EndedNotice). Every item is checked, as if each had
// waited long in its queue: an item of a run noticed ended is recorded
// cancelled, and one of a run not noticed ended, stored after the worker
// began to listen, runs, neither with a read of the log; an item stored
// within the clock margin of that is read for (its run's end, appended
// with no notice, is found so).
func TestEndedNoticeSparesTheRead(t *testing.T) {
	st := testStore(t)
	endRun := func(run string) {
		t.Helper()
		end, err := events.New(run, eventlog.DecisionID(run, events.RunCompleted), time.Time{}, &events.RunCompletedData{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eventlog.Append(context.Background(), st, run, 0, end); err != nil {
			t.Fatal(err)
		}
	}
	var ran atomic.Int32
	echo := worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		ran.Add(1)
		return &worker.Result{}, nil
	})
	w, _ := startWorker(t, st, map[string]worker.Node{"echo": echo})
	worker.SetStaleAfter(w, 0)
	// Stored within the watch's clock margin of its start: its run
	// ended, with no notice.
	before := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	endRun(before)
	publishReadyIn(t, st, before, "n1", "echo")
	stored := time.Now()
	evs := waitOutcome(t, st, before, events.NodeCanceled)
	if n := len(ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)); n != 0 || worker.EndReads(w) != 1 {
		t.Fatalf("an item stored within the margin of the watch's start: %d invoking, %d reads; want it read for and cancelled", n, worker.EndReads(w))
	}

	// Items stored after the watch began (past its clock margin).
	waitUntil(t, "the watch's clock margin to pass", func() bool { return time.Since(stored) > 1500*time.Millisecond })
	noticed := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	endRun(noticed)
	nc := eventlog.JetStream(st).Conn()
	if err := nc.Publish(eventlog.EndedNotice(noticed), nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	live := startRun(t, st, "", map[string]any{"id": "n1", "type": "echo"})
	publishReadyIn(t, st, live, "n1", "echo")
	waitOutcome(t, st, live, events.NodeInvoked)
	publishReadyIn(t, st, noticed, "n1", "echo")
	evs = waitOutcome(t, st, noticed, events.NodeCanceled)
	if c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]; c.Reason != "run ended before the work started" {
		t.Fatalf("cancelled %+v", c)
	}
	if n := worker.EndReads(w); n != 1 {
		t.Fatalf("%d reads of whether a run ended; want only the first item's", n)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the node ran %d times; want once, for the live run", n)
	}
}
