package workqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
)

func TestEnsureQueue(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	js, stream := eventlog.JetStream(st), st.StreamName()

	// Many processes at once: one consumer, created once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := workqueue.EnsureQueue(ctx, js, stream, "q1", workqueue.QueueOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.Consumer(ctx, stream, "work-q1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	if cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cfg.OptStartSeq == 0 || cfg.AckPolicy != jetstream.AckExplicitPolicy ||
		cfg.FilterSubject != eventlog.QueueFilter("q1") || cfg.AckWait != workqueue.DefaultAckWait ||
		cfg.MaxAckPending != workqueue.DefaultMaxAckPending || cfg.MaxDeliver != -1 {
		t.Errorf("config = %+v", cfg)
	}

	// A worker's other settings are not applied: they are logged, once.
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for range 2 {
		c, err = workqueue.EnsureQueue(ctx, js, stream, "q1", workqueue.QueueOptions{AckWait: 5 * time.Second, MaxAckPending: 10, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if cfg := c.CachedInfo().Config; cfg.AckWait != workqueue.DefaultAckWait || cfg.MaxAckPending != workqueue.DefaultMaxAckPending {
			t.Errorf("the consumer was changed: %+v", cfg)
		}
	}
	for _, want := range []string{"setting=ack_wait have=30s want=5s", "setting=max_ack_pending have=1000 want=10"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, logs.String())
		}
	}
	// A caller that does not care says nothing.
	if _, err := workqueue.EnsureQueue(ctx, js, stream, "q1", workqueue.QueueOptions{Logger: log}); err != nil {
		t.Fatal(err)
	}

	if _, err := workqueue.EnsureQueue(ctx, js, stream, "bad.queue", workqueue.QueueOptions{}); err == nil {
		t.Error("a queue name with a dot was accepted")
	}
}

func TestEnsureQueueCreatesWithItsOptions(t *testing.T) {
	_, st := testkit.Store(t)
	c, err := workqueue.EnsureQueue(context.Background(), eventlog.JetStream(st), st.StreamName(), "q2", workqueue.QueueOptions{AckWait: 7 * time.Second, MaxDeliver: 5})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.CachedInfo().Config; cfg.AckWait != 7*time.Second || cfg.MaxDeliver != 5 {
		t.Errorf("created with %+v", cfg)
	}
}

func TestEnsureQueueRefusesAConsumerWithoutAcks(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	cfg := workqueue.QueueConfig("q3", workqueue.QueueOptions{})
	cfg.AckPolicy, cfg.OptStartSeq = jetstream.AckNonePolicy, 1
	if _, err := eventlog.JetStream(st).CreateConsumer(ctx, st.StreamName(), cfg); err != nil {
		t.Fatal(err)
	}
	_, err := workqueue.EnsureQueue(ctx, eventlog.JetStream(st), st.StreamName(), "q3", workqueue.QueueOptions{})
	var se *eventlog.SettingError
	if !errors.Is(err, eventlog.ErrUnsafeSetting) || !errors.As(err, &se) || se.Setting != "ack_policy" {
		t.Fatalf("got %v, want an unsafe ack_policy", err)
	}
}
