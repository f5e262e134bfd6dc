package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// failingJS opens KV buckets whose writes fail while fail is set,
// counting the writes that failed.
type failingJS struct {
	jetstream.JetStream
	fail   *atomic.Bool
	failed *atomic.Int64
}

func (f failingJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := f.JetStream.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return failingKV{KeyValue: kv, fail: f.fail, failed: f.failed}, nil
}

type failingKV struct {
	jetstream.KeyValue
	fail   *atomic.Bool
	failed *atomic.Int64
}

// failing reports whether a write fails now, counting it.
func (kv failingKV) failing() bool {
	if kv.fail.Load() {
		kv.failed.Add(1)
		return true
	}
	return false
}

var errInjectedWrite = errors.New("injected: the bucket did not take this write")

func (kv failingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if kv.failing() {
		return 0, errInjectedWrite
	}
	return kv.KeyValue.Create(ctx, key, value, opts...)
}

func (kv failingKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if kv.failing() {
		return 0, errInjectedWrite
	}
	return kv.KeyValue.Update(ctx, key, value, rev)
}

func (kv failingKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if kv.failing() {
		return errInjectedWrite
	}
	return kv.KeyValue.Delete(ctx, key, opts...)
}

// A run's slot is given back on the handler's path: a release the bucket
// does not take (its writes fail while the run ends) leaves the event
// that ended the run to be handled again, and the release is made once
// the bucket takes writes again, not left to a sweep after its grace (a
// minute): the two runs waiting behind it then complete within seconds,
// and no slot is left.
func TestRunSlotReleaseRetriedUntilTaken(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	js := eventlog.JetStream(st)
	if _, err := flow.Open(ctx, js, 1, nil); err != nil { // the bucket, made as a coordinator makes it
		t.Fatal(err)
	}
	var fail atomic.Bool
	var failed atomic.Int64
	l, err := flow.Open(ctx, failingJS{JetStream: js, fail: &fail, failed: &failed}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCoordinator(t, ctx, st, coordinator.WithFlow(l), coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	long := mustGraph(t, strings.Replace(fmt.Sprintf(runLimitGraph, "queue", "60s"), "max: 2", "max: 1", 1))
	short := mustGraph(t, strings.Replace(fmt.Sprintf(runLimitGraph, "queue", "100ms"), "max: 2", "max: 1", 1))
	first := startFor(t, st, long, "acme", 1)[0]
	waitRunning(t, st, first)
	behind := startFor(t, st, short, "acme", 2)
	for _, r := range behind {
		waitSlotWait(t, st, r, true)
	}
	fail.Store(true)
	e, err := events.New(first, first+"-cancel", time.Now(), &events.RunCancelRequestedData{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, first, events.AnySeq, e); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, st, []string{first}, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for failed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes failed, want the release tried at least twice", failed.Load())
		}
		// Polls: the failed writes are counted, not announced.
		time.Sleep(20 * time.Millisecond)
	}
	fail.Store(false)
	start := time.Now()
	for r, s := range waitEnded(t, st, behind, 40*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %+v", r, s.Status, s.Error)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the runs behind the failed release waited %s, want seconds, not a sweep's grace", d)
	}
	if peak, _ := peakRuns(t, st, append([]string{first}, behind...)); peak[`{"tenant":"acme"}`] != 1 {
		t.Fatalf("runs in progress at once: %v, want 1", peak)
	}
	waitNoSlots(t, st)
}
