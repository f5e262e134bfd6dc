package worker_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

func TestQueueConcurrencyLimit(t *testing.T) {
	st := testStore(t, worker.DefaultQueue, "other")
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
	}, worker.WithQueues(worker.DefaultQueue, "other"), worker.WithConcurrency(8), worker.WithQueueConcurrency(worker.DefaultQueue, 3))
	var runs []string
	for range 10 {
		runs = append(runs, publishReady(t, st, "slow"))
	}
	for _, run := range runs {
		waitOutcome(t, st, run, events.NodeInvoked)
	}
	if p := peak.Load(); p != 3 {
		t.Errorf("peak concurrency on the queue = %d, want 3", p)
	}
}

func TestQueueConcurrencyValidates(t *testing.T) {
	st := testStore(t)
	for _, opts := range [][]worker.Option{
		{worker.WithQueueConcurrency("nope", 2)},
		{worker.WithQueueConcurrency(worker.DefaultQueue, 0)},
		{worker.WithInvokingFilter("", nil)},
	} {
		if _, err := worker.New(st, opts...); err == nil {
			t.Errorf("New accepted %d bad options", len(opts))
		}
	}
}

// A running worker announces its queues and types; it withdraws the
// announcement when it stops.
func TestWorkerAnnounces(t *testing.T) {
	st := testStore(t)
	js := eventlog.JetStream(st)
	if live, err := worker.LiveWorkers(context.Background(), js); err != nil || len(live) != 0 {
		t.Fatalf("before any worker: %v, %v", live, err)
	}
	w, stop := startWorker(t, st, map[string]worker.Node{"a": worker.NodeFunc(nil), "b": worker.NodeFunc(nil)})
	var live []worker.Announcement
	waitUntil(t, "announcement", func() bool {
		live, _ = worker.LiveWorkers(context.Background(), js)
		return len(live) == 1
	})
	a := live[0]
	if a.Name != w.Name() || !slices.Equal(a.Types, []string{"a", "b"}) || !slices.Equal(a.Queues, []string{worker.DefaultQueue}) ||
		a.Started.IsZero() || a.Heartbeat.Before(a.Started) || !a.Serves(worker.DefaultQueue, "b") || a.Serves(worker.DefaultQueue, "c") {
		t.Errorf("announcement = %+v", a)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if live, err := worker.LiveWorkers(context.Background(), js); err != nil || len(live) != 0 {
		t.Errorf("after stop: %v, %v", live, err)
	}
}

// A worker that stops heartbeating (here: its connection is gone while the
// node hangs) loses its item: JetStream delivers it again after the ack wait
// and another worker records the outcome.
func TestStoppedHeartbeatRedelivers(t *testing.T) {
	srv, st := testkit.Store(t)
	if _, err := workqueue.EnsureQueue(context.Background(), eventlog.JetStream(st), st.StreamName(), worker.DefaultQueue, workqueue.QueueOptions{AckWait: time.Second}); err != nil {
		t.Fatal(err)
	}
	nc1, js1 := testkit.Connect(t, srv)
	st1, err := events.Open(context.Background(), js1)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	started := make(chan struct{}, 1)
	startWorker(t, st1, map[string]worker.Node{
		"hang": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			started <- struct{}{}
			<-release // ignores its context: a stuck process
			return nil, ctx.Err()
		}),
	}, worker.WithName("stuck"), worker.WithAckWait(time.Second), worker.WithDrainTimeout(time.Second))
	run := publishReady(t, st, "hang")
	<-started
	nc1.Close() // no more heartbeats from "stuck"
	// Its parked pull request goes with its connection; wait for that, or
	// the next worker's pull would replace it unseen in the count.
	waitUntil(t, "the closed worker's pull to go", func() bool { return numWaiting(st) == 0 })

	startWorker(t, st, map[string]worker.Node{
		"hang": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			return &worker.Result{Output: in.Delivery}, nil
		}),
	}, worker.WithName("healthy"), worker.WithAckWait(time.Second))
	evs := waitOutcome(t, st, run, events.NodeInvoked)
	inv := ofType[*events.NodeInvokedData](t, evs, events.NodeInvoked)[0]
	if inv.Worker != "healthy" || string(inv.Output) == "1" {
		t.Errorf("invoked = %+v, want healthy's on a later delivery", inv)
	}
}
