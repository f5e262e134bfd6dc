package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// slowAckMsg is a work item whose double ack waits until release is
// closed, as one whose server answers late.
type slowAckMsg struct {
	jetstream.Msg
	release chan struct{}
	acked   *atomic.Int32
}

func (m slowAckMsg) DoubleAck(ctx context.Context) error {
	select {
	case <-m.release:
		m.acked.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestAckGivesTheSlotBack: an item's double ack goes on after ack returns
// (so its slot is free for the next item while the server answers), at
// most the worker's concurrency of them at once; past that, ack waits for
// its answer in the slot; and the drain (w.inflight) waits for every ack.
func TestAckGivesTheSlotBack(t *testing.T) {
	_, st := testkit.Store(t)
	const conc = 2
	w, err := New(st, WithConcurrency(conc), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var acked atomic.Int32
	item := func() *item {
		return &item{run: events.NewRunID(), ready: &events.NodeReadyData{}, msg: slowAckMsg{release: release, acked: &acked}, base: w.log}
	}
	ctx := context.Background()
	w.inflight.Add(1) // as process's goroutine holds it while ack is called
	for i := range conc {
		returned := make(chan struct{})
		go func() { w.ack(ctx, item()); close(returned) }()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatalf("ack %d of %d waited for the server's answer; it should go on beside the next item", i+1, conc)
		}
	}
	// The worker's concurrency of acks is in flight: the next one is made
	// in its slot.
	third := make(chan struct{})
	go func() { w.ack(ctx, item()); close(third) }()
	select {
	case <-third:
		t.Fatalf("ack %d returned with %d acks in flight; it should wait in its slot", conc+1, conc)
	case <-time.After(200 * time.Millisecond):
		// Time for the third ack to return if it did not wait: it must not.
	}
	drained := make(chan struct{})
	w.inflight.Done()
	go func() { w.inflight.Wait(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("the drain did not wait for the acks in flight")
	case <-third:
		t.Fatal("the third ack returned before its answer")
	case <-time.After(100 * time.Millisecond):
		// Time for the drain to finish if it did not wait: it must not.
	}
	close(release)
	for _, ch := range []chan struct{}{third, drained} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("acks or the drain did not finish once the server answered")
		}
	}
	if n := acked.Load(); n != conc+1 {
		t.Fatalf("%d items acknowledged, want %d", n, conc+1)
	}
	if n := len(w.acks); n != 0 {
		t.Fatalf("%d acks still counted in flight after they finished", n)
	}
}
