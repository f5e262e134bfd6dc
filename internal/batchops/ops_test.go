package batchops_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/batchops"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

const humanYAML = `
name: approve
nodes:
  - id: ask
    type: human
  - id: done
    type: noop
edges:
  - {from: START, to: ask}
  - {from: ask, to: done}
  - {from: done, to: END}
`

// engine is a JetStream server, a coordinator and a worker with the
// built-in executors; it returns a client and the store.
func engine(t *testing.T) (*client.Client, events.Store) {
	t.Helper()
	_, store := testkit.Store(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(store, worker.WithQueues("default"), worker.WithName("test-worker"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	var wg sync.WaitGroup
	wg.Go(func() { _ = coordinator.New(store, coordinator.WithLogger(log)).Run(ctx) })
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return client.New(store, client.WithLogger(log), client.WithIdentity("tester")), store
}

// waiting starts a run and waits until its human node waits.
func waiting(t *testing.T, ctx context.Context, c *client.Client, g *graph.Graph) string {
	t.Helper()
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := c.Get(ctx, run)
		if err == nil && st.Nodes["ask"] != nil && st.Nodes["ask"].Status == projection.NodeWaiting {
			return run
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s never waited on ask: %v", run, err)
		}
		// Polls: the run's log notifies nobody here.
		time.Sleep(20 * time.Millisecond)
	}
}

// applyTwice applies op to run twice, as a job resumed after a crash
// would, and returns both results.
func applyTwice(ctx context.Context, do batch.Do, run string) (r1, d1, r2, d2 string) {
	r1, d1 = do(ctx, run)
	r2, d2 = do(ctx, run)
	return
}

// TestOpsApplyOnce: each operation, applied twice to a run (a job
// resumed after an interruption), does its work once and says so the
// second time; what it does not apply to is skipped with the reason.
func TestOpsApplyOnce(t *testing.T) {
	c, store := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := graph.Parse([]byte(humanYAML), "approve.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := func(id, op string, args map[string]string) batch.Do {
		return batchops.Do(&batch.Job{ID: id, Op: op, Args: args}, c, store)
	}

	cancelled := waiting(t, ctx, c, g)
	// The second cancel finds the run ending (its request the same, by
	// id) or ended (the job's own request found in its log): done
	// either way, and one request in the log.
	r1, _, r2, d2 := applyTwice(ctx, job("j1", "cancel", map[string]string{"reason": "tidy"}), cancelled)
	if r1 != batch.Done || r2 != batch.Done {
		t.Errorf("cancel twice: %s, then %s %q", r1, r2, d2)
	}
	if st, err := c.Wait(ctx, cancelled); err != nil || st.Status != projection.RunCancelled {
		t.Errorf("run %s after the cancel: %v, %v", cancelled, status(st), err)
	}
	if r, d := job("j1", "cancel", map[string]string{"reason": "tidy"})(ctx, cancelled); r != batch.Done || !strings.Contains(d, "before an interruption") {
		t.Errorf("cancel of the run the job ended: %s %q, want done, requested before an interruption", r, d)
	}
	if n := count(t, ctx, c, cancelled, events.RunCancelRequested); n != 1 {
		t.Errorf("the cancel sent three times is in the log %d times, want once", n)
	}

	signalled := waiting(t, ctx, c, g)
	r1, _, r2, _ = applyTwice(ctx, job("j2", "signal", map[string]string{"node": "ask", "data": `{"ok":true}`}), signalled)
	if r1 != batch.Done || r2 != batch.Done {
		t.Errorf("signal twice: %s, %s", r1, r2)
	}
	if st, err := c.Wait(ctx, signalled); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("signalled run: %v, %v", status(st), err)
	}
	if n := count(t, ctx, c, signalled, events.SignalReceived); n != 1 {
		t.Errorf("the signal sent twice is in the log %d times, want once", n)
	}

	r1, d1, r2, d2 := applyTwice(ctx, job("j3", "reset", map[string]string{"node": "ask"}), signalled)
	forked := batch.ResetRunID("j3", signalled)
	if r1 != batch.Done || !strings.Contains(d1, forked) || r2 != batch.Done || !strings.Contains(d2, "forked before an interruption") {
		t.Errorf("reset twice: %s %q, then %s %q", r1, d1, r2, d2)
	}
	if r, d := job("j4", "reset", map[string]string{"node": "nosuch"})(ctx, signalled); r != batch.Skipped || !strings.Contains(d, "nosuch") {
		t.Errorf("reset to an unknown node: %s %q, want skipped naming it", r, d)
	}

	open := waiting(t, ctx, c, g)
	del := job("j5", "delete", nil)
	if r, d := del(ctx, open); r != batch.Skipped || !strings.Contains(d, "has not ended") {
		t.Errorf("delete of a waiting run: %s %q, want skipped", r, d)
	}
	r1, d1, r2, d2 = applyTwice(ctx, del, cancelled)
	if r1 != batch.Done || !strings.Contains(d1, "events") || r2 != batch.Skipped || !strings.Contains(d2, "not found") {
		t.Errorf("delete twice: %s %q, then %s %q", r1, d1, r2, d2)
	}
	if _, err := c.History(ctx, cancelled); err == nil {
		t.Errorf("run %s still has a log after its delete", cancelled)
	}

	if r, d := job("j6", "explode", nil)(ctx, open); r != batch.Failed || !strings.Contains(d, `unknown operation "explode"`) {
		t.Errorf("unknown operation: %s %q", r, d)
	}
}

// count is how many events of type typ run's log has.
func count(t *testing.T, ctx context.Context, c *client.Client, run string, typ events.Type) int {
	t.Helper()
	evs, err := c.History(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// status is st's status, or "none".
func status(st *projection.State) string {
	if st == nil {
		return "none"
	}
	return string(st.Status)
}
