package coordinator_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// One run whose decision append hangs for several of the consumer's ack
// waits holds up only itself: the other runs of its partition complete
// meanwhile, and its event, held all that time, is not delivered again
// (it gets in-progress acknowledgements), nor are the others' events.
func TestSlowRunHoldsUpOnlyItself(t *testing.T) {
	_, st := testkit.Store(t)
	fs := testkit.NewFaultStore(st)
	g := mustGraph(t, chain)
	slow := events.NewRunID()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	blocked := make(chan struct{})
	var blockedOnce sync.Once
	fs.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(run string, evs []*events.Event) error {
			if run == slow {
				blockedOnce.Do(func() { close(blocked) })
				<-release
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The partition's consumer was made before, with an ack wait far
	// shorter than the coordinator's own (10s): the in-progress
	// acknowledgements follow the consumer's.
	const ackWait = time.Second
	if _, err := eventlog.JetStream(st).CreateConsumer(ctx, st.StreamName(), partitionConsumer(coordinator.ConsumerName("coordinator", 0), ackWait)); err != nil {
		t.Fatal(err)
	}
	c := runCoordinator(t, ctx, fs, coordinator.WithLogger(quiet()))
	t.Cleanup(unblock) // before the coordinator's cleanup waits for its handlers
	runWorker(t, ctx, st, "w1")

	startRun(t, st, g, slow, `{"i":-1}`)
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow run's first decision was never appended")
	}
	blockedAt := time.Now()
	runs := start(t, st, g, 64)
	waitEnded(t, st, runs, 30*time.Second)
	t.Logf("64 runs ended %s after the slow run's append hung", time.Since(blockedAt).Round(time.Millisecond))
	// Waits for an absence: the slow run is held past three ack waits,
	// time for a redelivery to show if the in-progress acknowledgements
	// failed; none is to come, so there is no event to wait for.
	time.Sleep(time.Until(blockedAt.Add(3 * ackWait)))
	if s := projection.Fold(readRun(t, st, slow)); s.Status.Ended() {
		t.Fatalf("the slow run ended while its append hung: %s", s.Status)
	}
	info, err := eventlog.JetStream(st).Consumer(ctx, st.StreamName(), coordinator.ConsumerName("coordinator", 0))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := info.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every message of the stream is on the partition's subjects: each
	// delivery past one per message is a redelivery.
	if extra := int64(ci.Delivered.Consumer) - int64(ci.Delivered.Stream); ci.NumRedelivered > 2 || extra > 2 {
		t.Errorf("the partition consumer redelivered while one run hung: %d events, %d deliveries more than messages (ack pending %d); want none",
			ci.NumRedelivered, extra, ci.NumAckPending)
	}
	if s := c.Stats(); s.HandedBack > 0 {
		t.Errorf("%d events handed back while one run hung", s.HandedBack)
	}

	unblock()
	waitEnded(t, st, []string{slow}, 30*time.Second)
	checkExactlyOnce(t, st, append(runs, slow), 5)
}

// A coordinator that stops cleanly hands the events it held back at once:
// the next holder of their partition decides them without waiting for the
// consumer's ack wait. Here a run's first decision hangs while a cancel
// request of the run waits its turn behind it; the coordinator stops, and
// another, with an ack wait far longer than the test, cancels the run.
func TestStoppedCoordinatorHandsHeldEventsBack(t *testing.T) {
	_, st := testkit.Store(t)
	fs := testkit.NewFaultStore(st)
	g := mustGraph(t, chain)
	run := events.NewRunID()
	release := make(chan struct{})
	blocked := make(chan struct{})
	var blockedOnce, releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	fs.Set(func(f *testkit.FaultStore) {
		f.BeforeAppend = func(r string, evs []*events.Event) error {
			if r == run {
				blockedOnce.Do(func() { close(blocked) })
				<-release
				return errors.New("the test stopped this append")
			}
			return nil
		}
	})
	const ackWait = time.Minute
	a := coordinator.New(fs, coordinator.WithAckWait(ackWait), coordinator.WithLeaseTTL(time.Second), coordinator.WithLogger(quiet()))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	t.Cleanup(func() { unblock(); cancel(); wg.Wait() })

	startRun(t, st, g, run, `{"i":0}`)
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's first decision was never appended")
	}
	e, err := events.New(run, events.NewRunID(), time.Time{}, &events.RunCancelRequestedData{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, run, events.AnySeq, e); err != nil {
		t.Fatal(err)
	}
	// Both events are delivered to the coordinator and unacknowledged,
	// the start by the starts consumer, the cancel request by the
	// progress consumer.
	js, stream := eventlog.JetStream(st), st.StreamName()
	deadline := time.Now().Add(30 * time.Second)
	for {
		starts := ackPendingOf(t, js, stream, coordinator.StartsConsumerName("coordinator", 0))
		progress := ackPendingOf(t, js, stream, coordinator.ConsumerName("coordinator", 0))
		if starts == 1 && progress == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancel request never reached the coordinator: %d starts and %d other events held", starts, progress)
		}
		// No event says the coordinator holds it (it is in the log
		// before): the consumer's state is polled.
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	unblock()
	wg.Wait()

	b := coordinator.New(st, coordinator.WithAckWait(ackWait), coordinator.WithLeaseTTL(time.Second), coordinator.WithLogger(quiet()))
	bctx, bcancel := context.WithCancel(context.Background())
	var bwg sync.WaitGroup
	bwg.Go(func() { _ = b.Run(bctx) })
	t.Cleanup(func() { bcancel(); bwg.Wait() })
	states := waitEnded(t, st, []string{run}, ackWait/3)
	if s := states[run]; s.Status != projection.RunCancelled {
		t.Fatalf("run %s: %s, want cancelled", run, s.Status)
	}
}

// A burst of runs far beyond what the partition's consumer lets the
// coordinator hold waits in the stream, paced by the server: no event is
// handed back and no run is read again from the log.
func TestBurstIsPacedByTheServer(t *testing.T) {
	_, st := testkit.Store(t)
	g := mustGraph(t, chain)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := partitionConsumer(coordinator.ConsumerName("coordinator", 0), 10*time.Second)
	cfg.MaxAckPending = 16
	if _, err := eventlog.JetStream(st).CreateConsumer(ctx, st.StreamName(), cfg); err != nil {
		t.Fatal(err)
	}
	runs := start(t, st, g, 100)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	waitEnded(t, st, runs, time.Minute)
	if s := c.Stats(); s.HandedBack != 0 || s.Reloads != 0 {
		t.Errorf("a burst of 100 runs through 16 acks pending: %d events handed back, %d runs read from the log; want none", s.HandedBack, s.Reloads)
	}
	checkExactlyOnce(t, st, runs, 5)
}
