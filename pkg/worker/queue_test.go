package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

func TestEnsureQueue(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	js, stream := st.JetStream(), st.StreamName()

	// Many processes at once: one consumer, created once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := worker.EnsureQueue(ctx, js, stream, "q1", worker.QueueOptions{})
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
		cfg.FilterSubject != events.QueueFilter("q1") || cfg.AckWait != worker.DefaultAckWait ||
		cfg.MaxAckPending != worker.DefaultMaxAckPending || cfg.MaxDeliver != -1 {
		t.Errorf("config = %+v", cfg)
	}

	// A worker's settings are applied; the delivery policy stays.
	c, err = worker.EnsureQueue(ctx, js, stream, "q1", worker.QueueOptions{AckWait: 5 * time.Second, MaxAckPending: 10})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.CachedInfo().Config; cfg.AckWait != 5*time.Second || cfg.MaxAckPending != 10 || cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy {
		t.Errorf("updated config = %+v", cfg)
	}
	// A caller that does not care leaves them as they are.
	c, err = worker.EnsureQueue(ctx, js, stream, "q1", worker.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.CachedInfo().Config; cfg.AckWait != 5*time.Second || cfg.MaxAckPending != 10 {
		t.Errorf("config after a zero ensure = %+v", cfg)
	}

	if _, err := worker.EnsureQueue(ctx, js, stream, "bad.queue", worker.QueueOptions{}); err == nil {
		t.Error("a queue name with a dot was accepted")
	}
}
