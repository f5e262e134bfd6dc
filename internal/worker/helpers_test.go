package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// testStore starts a server and opens the store, with the default queue's
// consumer in place (as the coordinator ensures it).
func testStore(t *testing.T, queues ...string) events.Store { return testStoreB(t, queues...) }

func testStoreB(t testing.TB, queues ...string) events.Store {
	t.Helper()
	return testStoreWith(t, nil, queues...)
}

// testStoreWith is testStore with the store's options.
func testStoreWith(t testing.TB, opts []events.Option, queues ...string) events.Store {
	t.Helper()
	_, st := testkit.Store(t, opts...)
	if len(queues) == 0 {
		queues = []string{worker.DefaultQueue}
	}
	for _, q := range queues {
		if _, err := workqueue.EnsureQueue(context.Background(), eventlog.JetStream(st), st.StreamName(), q, workqueue.QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func quietLogger() *slog.Logger {
	if os.Getenv("WLOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startWorker runs a worker until the test ends (or stop is called) and
// returns it and stop, which returns Run's error.
func startWorker(t *testing.T, st events.Store, handlers map[string]worker.Node, opts ...worker.Option) (*worker.Worker, func() error) {
	t.Helper()
	opts = append([]worker.Option{worker.WithLogger(quietLogger()), worker.WithName(t.Name())}, opts...)
	w, err := worker.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for typ, n := range handlers {
		w.Handle(typ, n)
	}
	before := numWaiting(st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var runErr error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				t.Error("worker did not stop within 20s")
			}
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	// Wait until the worker's pull request is parked on the queue, so that
	// work published now reaches it.
	waitUntil(t, "worker pulling", func() bool { return numWaiting(st) > before })
	return w, stop
}

// numWaiting is the number of pull requests waiting on the default queue.
func numWaiting(st events.Store) int {
	c, err := eventlog.JetStream(st).Consumer(context.Background(), st.StreamName(), workqueue.QueueConsumer(worker.DefaultQueue))
	if err != nil {
		return 0
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.NumWaiting
}

type readyOpt func(*events.NodeReadyData)

func withInput(v any) readyOpt {
	return func(d *events.NodeReadyData) { d.Input = mustJSON(v) }
}

func withConfig(v any) readyOpt {
	return func(d *events.NodeReadyData) { d.Config = mustJSON(v) }
}

func withTimeout(d time.Duration) readyOpt {
	return func(r *events.NodeReadyData) { r.TimeoutMs = d.Milliseconds() }
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// publishReady appends a node-ready work item for node (of type typ) of a
// new run, and returns the run id.
func publishReady(t *testing.T, st events.Store, typ string, opts ...readyOpt) string {
	t.Helper()
	run := events.NewRunID()
	publishReadyIn(t, st, run, "n1", typ, opts...)
	return run
}

func publishReadyIn(t *testing.T, st events.Store, run, node, typ string, opts ...readyOpt) *events.NodeReadyData {
	t.Helper()
	ensureStarted(t, st, run, node, typ)
	ref := events.NodeRef{Node: node, Iteration: 1}
	d := &events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: typ, Queue: worker.DefaultQueue, IdempotencyKey: eventlog.IdempotencyKey(run, ref, 1)}
	for _, o := range opts {
		o(d)
	}
	ev, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), strconv.Itoa(d.Attempt)), time.Time{}, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, events.AnySeq, ev); err != nil {
		t.Fatalf("appending ready: %v", err)
	}
	return d
}

// runLog returns a run's events (nil if it has none yet).
func runLog(t *testing.T, st events.Store, run string) []*events.Event {
	t.Helper()
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil && !errors.Is(err, events.ErrRunNotFound) {
		t.Fatal(err)
	}
	return evs
}

// ofType returns the payloads of a run's events of type typ.
func ofType[P events.Payload](t *testing.T, evs []*events.Event, typ events.Type) []P {
	t.Helper()
	var out []P
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		p, err := e.Payload()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.(P))
	}
	return out
}

// waitOutcome waits for a run's log to hold an event of type typ and
// returns the log.
func waitOutcome(t *testing.T, st events.Store, run string, typ events.Type) []*events.Event {
	t.Helper()
	// The run's events are read through an ordered consumer as they are
	// stored: each checked as it comes, no polling. (Not client.Follow,
	// which stops at the run's end: a worker's outcome may come after.)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cons, err := eventlog.JetStream(st).OrderedConsumer(ctx, st.StreamName(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventlog.RunFilter(run)}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*events.Event
	for {
		wait, _ := ctx.Deadline()
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Until(wait)))
		if err != nil {
			t.Fatalf("run %s: no %s event (%v)", run, typ, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		e := events.DecodeStored(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
		evs = append(evs, e)
		if e.Type == typ {
			return evs
		}
	}
}

// waitUntil waits for a condition no event of a run announces (a worker's
// counters, a consumer's pull requests): it polls it.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		// Polls: cond reads state that changes without an event to wait for.
		time.Sleep(10 * time.Millisecond)
	}
}

// types lists the types of a run's events after its start (which
// ensureStarted writes for every test run).
func types(evs []*events.Event) []events.Type {
	out := make([]events.Type, 0, len(evs))
	for _, e := range evs {
		if e.Type != events.RunStarted {
			out = append(out, e.Type)
		}
	}
	return out
}

// ensureStarted appends a run-started event for run, once, whose graph has
// the node (and the other nodes the tests use) without config: work items
// refer to the run's start for the node's config and the invocation state.
func ensureStarted(t testing.TB, st events.Store, run, node, typ string) {
	t.Helper()
	if evs, _ := st.Read(context.Background(), run, 0, 0); len(evs) > 0 {
		return
	}
	nodes := []map[string]any{{"id": node, "type": typ}}
	for _, id := range []string{"n1", "n2", "add"} {
		if id != node {
			nodes = append(nodes, map[string]any{"id": id, "type": "echo"})
		}
	}
	g := mustJSON(map[string]any{"name": "t", "nodes": nodes})
	ev, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "t", Graph: g, Invocation: json.RawMessage(`{"tenant":"acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, 0, ev); err != nil {
		t.Fatalf("appending run-started: %v", err)
	}
}
