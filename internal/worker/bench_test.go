package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// BenchmarkRoundTrip measures one work item from its node-ready append to
// its node-invoked event, one at a time: the worker's share of a hop.
func BenchmarkRoundTrip(b *testing.B) {
	st := testStoreB(b)
	w, err := worker.New(st, worker.WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	w.Handle("noop", worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) { return &worker.Result{}, nil }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	invoked := make(chan *nats.Msg, 1)
	sub, err := eventlog.JetStream(st).Conn().ChanSubscribe(eventlog.KindFilter(events.NodeInvoked), invoked)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The worker's first pull request is waiting on its queue.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := eventlog.JetStream(st).Consumer(ctx, st.StreamName(), workqueue.QueueConsumer(worker.DefaultQueue)); err == nil {
			if ci, err := c.Info(ctx); err == nil && ci.NumWaiting > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the worker made no pull request")
		}
		// No event says the worker's pull request is parked: the
		// consumer's state is polled.
		time.Sleep(5 * time.Millisecond)
	}

	run := events.NewRunID()
	ensureStarted(b, st, run, "n", "noop")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ref := events.NodeRef{Node: "n", Iteration: i + 1}
		ev, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), time.Time{}, &events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: "noop", Queue: worker.DefaultQueue})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := eventlog.Append(ctx, st, run, events.AnySeq, ev); err != nil {
			b.Fatal(err)
		}
		select {
		case <-invoked:
		case <-time.After(10 * time.Second):
			b.Fatal("no invoked event")
		}
	}
}
