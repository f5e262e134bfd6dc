package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestRunsEndedAreNoticed: the coordinator publishes a run's ended notice
// (eventlog.EndedNotice, core NATS) once its end is in the log, one per
// run, for workers to spare the read of their ended-run check; and only
// for runs that ended.
func TestRunsEndedAreNoticed(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nc := eventlog.JetStream(st).Conn()
	heard := make(chan string, 100)
	sub, err := nc.Subscribe(eventlog.AllEndedNotices, func(m *nats.Msg) {
		run, ok := eventlog.RunOfEndedNotice(m.Subject)
		if !ok || len(m.Data) != 0 {
			t.Errorf("a notice on %s with %d bytes", m.Subject, len(m.Data))
		}
		heard <- run
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 5)
	waitEnded(t, st, runs, 30*time.Second)
	want := map[string]bool{}
	for _, r := range runs {
		want[r] = true
	}
	for len(want) > 0 {
		select {
		case run := <-heard:
			if !want[run] {
				t.Fatalf("a notice of run %s, not one that ended here or noticed twice", run)
			}
			delete(want, run)
		case <-time.After(10 * time.Second):
			t.Fatalf("no ended notice of %d runs that ended", len(want))
		}
	}
}
