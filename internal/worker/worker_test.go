package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestWorkerInvokes(t *testing.T) {
	st := testStore(t)
	var got atomic.Pointer[worker.Input]
	w, _ := startWorker(t, st, map[string]worker.Node{
		"calc": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			got.Store(in)
			return &worker.Result{
				Output:  map[string]any{"sum": in.State["a"].(float64) + in.State["b"].(float64)},
				Updates: map[string]any{"total": 3, "seen": []string{"x"}},
				Actions: []worker.Action{{Name: "done"}, {Name: "fork", Data: map[string]any{"item": 1}}},
			}, nil
		}),
	})
	run := events.NewRunID()
	item := 2
	ready := publishReadyIn(t, st, run, "add", "calc",
		withInput(map[string]any{"a": 1, "b": 2}),
		withConfig(map[string]any{"k": "v"}),
		func(d *events.NodeReadyData) {
			d.Local = mustJSON("branch")
			d.Invocation = mustJSON(map[string]any{"user": "ada"})
			d.Item = &item
		})

	evs := waitOutcome(t, st, run, events.NodeInvoked)
	if want := []events.Type{events.NodeReady, events.NodeInvoking, events.NodeInvoked}; !reflect.DeepEqual(types(evs), want) {
		t.Fatalf("log = %v, want %v", types(evs), want)
	}
	invoking := ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)[0]
	if invoking.Worker != w.Name() || invoking.Delivery != 1 || invoking.Attempt != 1 || invoking.Key() != ready.Key() {
		t.Errorf("invoking = %+v", invoking)
	}
	invoked := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
	if string(invoked.Output) != `{"sum":3}` {
		t.Errorf("output = %s", invoked.Output)
	}
	if string(invoked.Updates["total"]) != "3" || string(invoked.Updates["seen"]) != `["x"]` {
		t.Errorf("updates = %v", invoked.Updates)
	}
	if len(invoked.Actions) != 2 || invoked.Actions[0].Name != "done" || invoked.Actions[0].Data != nil ||
		invoked.Actions[1].Name != "fork" || string(invoked.Actions[1].Data) != `{"item":1}` {
		t.Errorf("actions = %+v", invoked.Actions)
	}
	if invoked.Worker != w.Name() || invoked.Key() != ready.Key() {
		t.Errorf("invoked = %+v", invoked)
	}

	in := got.Load()
	want := &worker.Input{
		RunID: run, NodeID: "add", Type: "calc", Iteration: 1, Attempt: 1, Delivery: 1, Item: &item,
		Config:         json.RawMessage(`{"k":"v"}`),
		State:          map[string]any{"a": 1.0, "b": 2.0},
		Local:          "branch",
		Invocation:     map[string]any{"user": "ada"},
		IdempotencyKey: ready.IdempotencyKey,
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("input = %+v\nwant    %+v", in, want)
	}
	waitUntil(t, "stats", func() bool { s := w.Stats(); return s.Received == 1 && s.Succeeded == 1 })
}

func TestWorkerFailures(t *testing.T) {
	// Offloading off: "huge" is a result over the message size (with it
	// on, a 9 MB output is kept beside the log and succeeds).
	st := testStoreWith(t, []events.Option{events.WithOffloadAt(0)})
	blocker := worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	handlers := map[string]worker.Node{
		"plain": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return nil, errors.New("boom")
		}),
		"final": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return nil, fmt.Errorf("wrapped: %w", worker.NonRetryable("BadInput", "no such customer"))
		}),
		"detailed": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return nil, &worker.Error{Type: "Upstream", Message: "quota", Retryable: true, Details: map[string]int{"retryAfter": 3}, Cause: errors.New("429")}
		}),
		"timeout": blocker,
		"panic": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			panic("kaboom")
		}),
		"huge": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return &worker.Result{Output: strings.Repeat("x", 9<<20)}, nil
		}),
		"hugefailure": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return nil, &worker.Error{Type: "Upstream", Message: "it said", Details: strings.Repeat("y", 9<<20)}
		}),
		"badjson": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return &worker.Result{Output: make(chan int)}, nil
		}),
		"badinput": worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
			return &worker.Result{}, nil // never called: its input is not an object
		}),
	}
	w, _ := startWorker(t, st, handlers)

	tests := []struct {
		typ       string
		opts      []readyOpt
		wantType  string
		wantMsg   string
		retryable bool
		check     func(t *testing.T, f events.Failure)
	}{
		{typ: "plain", wantType: "Error", wantMsg: "boom", retryable: true},
		{typ: "final", wantType: "BadInput", wantMsg: "no such customer"},
		{typ: "detailed", wantType: "Upstream", wantMsg: "quota", retryable: true, check: func(t *testing.T, f events.Failure) {
			if string(f.Details) != `{"retryAfter":3}` || f.Cause == nil || f.Cause.Message != "429" {
				t.Errorf("details/cause = %s / %+v", f.Details, f.Cause)
			}
		}},
		{typ: "timeout", opts: []readyOpt{withTimeout(50 * time.Millisecond)}, wantType: events.FailureTimeout, wantMsg: "node timed out after 50ms", retryable: true},
		{typ: "panic", wantType: events.FailurePanic, wantMsg: "kaboom", check: func(t *testing.T, f events.Failure) {
			if !strings.Contains(string(f.Details), "worker_test") {
				t.Errorf("panic details lack the stack: %.200s", f.Details)
			}
		}},
		{typ: "huge", wantType: events.FailurePayloadTooLarge, wantMsg: "too large", check: func(t *testing.T, f events.Failure) {
			if !strings.Contains(f.Message, "bytes, the limit is") {
				t.Errorf("message does not say the size and limit: %s", f.Message)
			}
		}},
		{typ: "hugefailure", wantType: events.FailurePayloadTooLarge, wantMsg: `node "n1": its failure does not fit in an event (Upstream: it said)`, check: func(t *testing.T, f events.Failure) {
			if !strings.Contains(f.Message, "bytes, the limit is") || len(f.Details) > 0 {
				t.Errorf("failure does not say the size and limit, or keeps the details: %.300s", f.Message)
			}
		}},
		{typ: "badjson", wantType: events.FailureValidation, wantMsg: "encoding the node's output"},
		// With no invoking filters the input is decoded after
		// node.invoking's append: its failure still follows invoking.
		{typ: "badinput", opts: []readyOpt{withInput([]int{1, 2})}, wantType: events.FailureValidation, wantMsg: "work item input"},
	}
	runs := map[string]string{}
	for _, tt := range tests {
		runs[tt.typ] = publishReady(t, st, tt.typ, tt.opts...)
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			evs := waitOutcome(t, st, runs[tt.typ], events.NodeFailed)
			if want := []events.Type{events.NodeReady, events.NodeInvoking, events.NodeFailed}; !reflect.DeepEqual(types(evs), want) {
				t.Fatalf("log = %v, want %v", types(evs), want)
			}
			f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error
			if f.Type != tt.wantType || !strings.Contains(f.Message, tt.wantMsg) || f.Retryable != tt.retryable {
				t.Errorf("failure = %+v, want type %s, message containing %q, retryable %v", f, tt.wantType, tt.wantMsg, tt.retryable)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
	waitUntil(t, "stats", func() bool { return w.Stats().Failed == uint64(len(tests)) })
	// Every item was acknowledged: nothing is left pending.
	waitUntil(t, "acks", func() bool {
		c, err := eventlog.JetStream(st).Consumer(context.Background(), st.StreamName(), workqueue.QueueConsumer(worker.DefaultQueue))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

func TestWorkerSkipsMalformedWork(t *testing.T) {
	st := testStore(t)
	w, _ := startWorker(t, st, map[string]worker.Node{"echo": echoNode})
	js := eventlog.JetStream(st)
	ctx := context.Background()

	good, err := events.New("x", "x:ready:1", time.Time{}, &events.NodeReadyData{NodeRef: events.NodeRef{Node: "n", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	if err != nil {
		t.Fatal(err)
	}
	encoded := func(mutate func(m *nats.Msg)) *nats.Msg {
		m, err := eventlog.Encode(good)
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Del(nats.MsgIdHdr)
		mutate(m)
		return m
	}
	wrongType, err := events.New("x", "x:invoked", time.Time{}, &events.NodeInvokedData{NodeRef: events.NodeRef{Node: "n", Iteration: 1}, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	wrongType.Queue = "default"
	wrong, err := eventlog.Encode(wrongType)
	if err != nil {
		t.Fatal(err)
	}
	wrong.Subject = eventlog.ReadySubject("x", "default")

	bad := []*nats.Msg{
		{Subject: eventlog.ReadySubject("x", "default"), Data: []byte("not a cloudevent")},
		encoded(func(m *nats.Msg) { m.Data = []byte(`{"node": "n", broken`) }),
		encoded(func(m *nats.Msg) { m.Header.Set("ce-type", "dev.weft.nonsense.v1") }),
		wrong,
	}
	for _, m := range bad {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	run := publishReady(t, st, "echo", withInput(map[string]any{"ok": true}))
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	if out := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0].Output; string(out) != `{"ok":true}` {
		t.Errorf("output = %s", out)
	}
	waitUntil(t, "malformed count", func() bool { return w.Stats().Malformed == uint64(len(bad)) })
}

var echoNode = worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
	return &worker.Result{Output: in.State}, nil
})

func TestWorkerLeavesUnservedTypes(t *testing.T) {
	st := testStore(t)
	a, _ := startWorker(t, st, map[string]worker.Node{"echo": echoNode})
	worker.SetUnknownTypeDelay(a, 100*time.Millisecond)
	run := publishReady(t, st, "mystery")
	waitUntil(t, "worker A to see the item twice", func() bool { return a.Stats().Received >= 2 })
	if got := types(runLog(t, st, run)); !reflect.DeepEqual(got, []events.Type{events.NodeReady}) {
		t.Fatalf("log = %v: the unserved item must not be touched", got)
	}

	startWorker(t, st, map[string]worker.Node{"mystery": echoNode})
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	if n := len(ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)); n != 1 {
		t.Errorf("%d invoking events, want 1", n)
	}
}

func TestWorkerCancelsRun(t *testing.T) {
	st := testStore(t)
	started := make(chan struct{}, 1)
	w, _ := startWorker(t, st, map[string]worker.Node{
		"wait": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Second):
				return &worker.Result{}, nil
			}
		}),
	})
	run := publishReady(t, st, "wait")
	<-started
	req, err := events.New(run, eventlog.RandomID(), time.Time{}, &events.RunCancelRequestedData{By: "tester", Reason: "changed my mind"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, events.AnySeq, req); err != nil {
		t.Fatal(err)
	}
	evs := waitOutcome(t, st, run, events.NodeCanceled)
	c := ofType[*events.NodeCancelledData](t, evs, events.NodeCanceled)[0]
	if c.By != "tester" || c.Reason != "changed my mind" || c.Node != "n1" || c.Attempt != 1 {
		t.Errorf("cancelled = %+v", c)
	}

	// Work of a run the worker saw cancelled is not started.
	publishReadyIn(t, st, run, "n2", "wait")
	evs = waitUntilCancelled(t, st, run, "n2")
	for _, e := range evs {
		if e.Type == events.NodeInvoking && e.NodeID == "n2" {
			t.Error("work of a cancelled run was started")
		}
	}
	if s := w.Stats(); s.Cancelled != 2 || s.Failed != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func waitUntilCancelled(t *testing.T, st events.Store, run, node string) []*events.Event {
	t.Helper()
	var evs []*events.Event
	waitUntil(t, node+" cancelled", func() bool {
		evs = runLog(t, st, run)
		for _, e := range evs {
			if e.Type == events.NodeCanceled && e.NodeID == node {
				return true
			}
		}
		return false
	})
	return evs
}

func TestWorkerConcurrencyLimit(t *testing.T) {
	st := testStore(t)
	var cur, peak atomic.Int32
	startWorker(t, st, map[string]worker.Node{
		"slow": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			n := cur.Add(1)
			defer cur.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond) // the node's work: long enough for items to overlap
			return &worker.Result{}, nil
		}),
	}, worker.WithConcurrency(2))
	var runs []string
	for range 8 {
		runs = append(runs, publishReady(t, st, "slow"))
	}
	for _, run := range runs {
		waitOutcome(t, st, run, events.NodeInvoked)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency = %d, want 2", p)
	}
}

// A node that runs longer than the ack wait is kept by its heartbeats.
func TestWorkerHeartbeatKeepsLongNodes(t *testing.T) {
	st := testStore(t)
	w, _ := startWorker(t, st, map[string]worker.Node{
		"long": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			// The node's work, longer than the ack wait: the server's
			// redelivery timer is real time, so this is too.
			time.Sleep(2500 * time.Millisecond)
			return &worker.Result{}, nil
		}),
	}, worker.WithAckWait(time.Second))
	run := publishReady(t, st, "long")
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	if n := len(ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)); n != 1 {
		t.Errorf("%d invoking events, want 1 (the item was redelivered while it ran)", n)
	}
	if s := w.Stats(); s.Redelivered != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestWorkerDrains(t *testing.T) {
	st := testStore(t)
	started := make(chan struct{}, 1)
	_, stop := startWorker(t, st, map[string]worker.Node{
		"slow": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			started <- struct{}{}
			time.Sleep(300 * time.Millisecond) // the node's work, which the drain waits for
			return &worker.Result{Output: "done"}, nil
		}),
	})
	run := publishReady(t, st, "slow")
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after a clean drain", err)
	}
	evs := runLog(t, st, run)
	if got := types(evs); !reflect.DeepEqual(got, []events.Type{events.NodeReady, events.NodeInvoking, events.NodeInvoked}) {
		t.Fatalf("log = %v", got)
	}
}

func TestWorkerDrainTimeoutHandsWorkBack(t *testing.T) {
	st := testStore(t)
	started := make(chan struct{}, 1)
	stubborn := worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, stop := startWorker(t, st, map[string]worker.Node{"stubborn": stubborn}, worker.WithDrainTimeout(200*time.Millisecond))
	run := publishReady(t, st, "stubborn")
	<-started
	if err := stop(); !errors.Is(err, worker.ErrDrainTimeout) {
		t.Fatalf("Run = %v, want ErrDrainTimeout", err)
	}
	if got := types(runLog(t, st, run)); !reflect.DeepEqual(got, []events.Type{events.NodeReady, events.NodeInvoking}) {
		t.Fatalf("log = %v: a node given up at shutdown must not be failed", got)
	}
	// The item was handed back: the next worker gets it at once.
	startWorker(t, st, map[string]worker.Node{"stubborn": echoNode})
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	inv := ofType[*events.NodeInvokingData](t, evs, events.NodeInvoking)
	if len(inv) != 2 || inv[1].Delivery != 2 {
		t.Errorf("invoking = %+v, want a second with delivery 2", inv)
	}
}

func TestRunTwice(t *testing.T) {
	st := testStore(t)
	w, _ := startWorker(t, st, nil)
	if err := w.Run(context.Background()); !errors.Is(err, worker.ErrAlreadyRunning) {
		t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestNewValidates(t *testing.T) {
	st := testStore(t)
	tests := []struct {
		name    string
		opts    []worker.Option
		wantErr string
	}{
		{name: "defaults"},
		{name: "bad queue", opts: []worker.Option{worker.WithQueues("a.b")}, wantErr: `queue "a.b"`},
		{name: "no queues", opts: []worker.Option{worker.WithQueues()}, wantErr: "no queues"},
		{name: "zero concurrency", opts: []worker.Option{worker.WithConcurrency(0)}, wantErr: "concurrency"},
		{name: "short ack wait", opts: []worker.Option{worker.WithAckWait(time.Millisecond)}, wantErr: "ack wait"},
		{name: "heartbeat too long", opts: []worker.Option{worker.WithAckWait(2 * time.Second), worker.WithHeartbeat(3 * time.Second)}, wantErr: "heartbeat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := worker.New(st, tt.opts...)
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := worker.New(st, worker.WithQueues("a.b")); !errors.Is(err, events.ErrInvalidID) {
		t.Errorf("bad queue: %v, want ErrInvalidID", err)
	}
}
