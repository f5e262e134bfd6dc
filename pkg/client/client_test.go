package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

const helloYAML = `
name: hello
nodes:
  - id: greet
    type: echo
  - id: shout
    type: transform
    config:
      set:
        greeting: "'Hello, ' + input.name + '!'"
edges:
  - {from: START, to: greet}
  - {from: greet, to: shout}
  - {from: shout, to: END}
`

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

func mustGraph(t *testing.T, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartWaitGetList(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, helloYAML)

	run, err := c.Start(ctx, g, client.WithInput(map[string]any{"name": "Ada"}), client.WithInvocation(map[string]any{"tier": "gold"}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted {
		t.Fatalf("status = %q, want completed (error %v)", st.Status, st.Error)
	}
	if got := st.VarsMap()["greeting"]; got != "Hello, Ada!" {
		t.Errorf("greeting = %v, want Hello, Ada!", got)
	}
	if got := st.InvocationMap()["tier"]; got != "gold" {
		t.Errorf("invocation tier = %v, want gold", got)
	}

	// Waiting on a run that has ended returns at once.
	again, err := c.Wait(ctx, run)
	if err != nil || again.LastSeq != st.LastSeq {
		t.Fatalf("second Wait: %v, last seq %d, want %d", err, again.LastSeq, st.LastSeq)
	}

	got, err := c.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Marshal()) != string(st.Marshal()) {
		t.Error("Get differs from Wait's state")
	}

	waitListed(t, ctx, c, run, projection.RunCompleted)
	runs, err := c.List(ctx, client.WithDetails())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].RunID != run || runs[0].Status != projection.RunCompleted || runs[0].Graph != "hello" || runs[0].StartedAt.IsZero() {
		t.Fatalf("List = %+v, want the one completed hello run", runs)
	}

	hist, err := c.History(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].Type != events.RunStarted || hist[len(hist)-1].Type != events.RunCompleted {
		t.Fatalf("history runs from %s to %s", hist[0].Type, hist[len(hist)-1].Type)
	}
	early, err := c.StateAt(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if early.Status != projection.RunRunning || early.Vars["greeting"] != nil {
		t.Errorf("state at the start: status %q, greeting %s; want running, none", early.Status, early.Vars["greeting"])
	}
	if _, err := c.StateAtSeq(ctx, run, hist[0].Seq-1); hist[0].Seq > 1 && !errors.Is(err, client.ErrNoSuchSeq) {
		t.Errorf("state before the start: %v, want ErrNoSuchSeq", err)
	}
	if bySeq, err := c.StateAtSeq(ctx, run, hist[0].Seq); err != nil || string(bySeq.Marshal()) != string(early.Marshal()) {
		t.Errorf("state at the first sequence differs from the state at position 1 (%v)", err)
	}
	for _, pos := range []int{-1, len(hist) + 1} {
		_, err := c.StateAt(ctx, run, pos)
		if !errors.Is(err, client.ErrNoSuchPosition) || !strings.Contains(err.Error(), fmt.Sprintf("positions 1 to %d", len(hist))) {
			t.Errorf("state at position %d: %v, want ErrNoSuchPosition stating 1 to %d", pos, err, len(hist))
		}
	}
	if len(projection.Diff(early, st)) == 0 {
		t.Error("no difference between the first and the last state")
	}
}

func TestListStatusesAndOrder(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	done, err := c.Start(ctx, mustGraph(t, helloYAML), client.WithInput(map[string]any{"name": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, done); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a later millisecond: a later id
	waiting, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	waitListed(t, ctx, c, done, projection.RunCompleted)
	waitListed(t, ctx, c, waiting, projection.RunWaiting)
	runs, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].RunID != waiting || runs[1].RunID != done {
		t.Fatalf("List = %+v, want %s then %s", runs, waiting, done)
	}
	if runs[0].Status != projection.RunWaiting || runs[1].Status != projection.RunCompleted {
		t.Fatalf("statuses = %s, %s; want waiting, completed", runs[0].Status, runs[1].Status)
	}
	only, err := c.List(ctx, client.WithStatus(projection.RunCompleted))
	if err != nil || len(only) != 1 || only[0].RunID != done {
		t.Fatalf("List(completed) = %+v, %v", only, err)
	}
	limited, err := c.List(ctx, client.WithLimit(1))
	if err != nil || len(limited) != 1 || limited[0].RunID != waiting {
		t.Fatalf("List(limit 1) = %+v, %v", limited, err)
	}
}

func TestSignalAndCancel(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, humanYAML)

	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx, run, "nope", nil); !errors.Is(err, graph.ErrUnknownNode) {
		t.Fatalf("signal to an unknown node: %v, want graph.ErrUnknownNode", err)
	}
	waitIteration(t, c, run, "ask", 1)
	if err := c.Signal(ctx, run, "ask", map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted {
		t.Fatalf("signalled run: status %q, want completed (error %v)", st.Status, st.Error)
	}
	if err := c.Signal(ctx, run, "ask", nil); !errors.Is(err, client.ErrRunEnded) {
		t.Fatalf("signal after the end: %v, want ErrRunEnded", err)
	}

	run2, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, run2, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	st, err = c.Wait(ctx, run2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCancelled || st.Cancel == nil || st.Cancel.By != "tester" || st.Cancel.Reason != "changed my mind" {
		t.Fatalf("cancelled run: status %q, cancel %+v", st.Status, st.Cancel)
	}
	if err := c.Cancel(ctx, run2, ""); !errors.Is(err, client.ErrRunEnded) {
		t.Fatalf("cancel after the end: %v, want ErrRunEnded", err)
	}
	waitListed(t, ctx, c, run2, projection.RunCancelled)
	runs, err := c.List(ctx, client.WithStatus(projection.RunCancelled))
	if err != nil || len(runs) != 1 || runs[0].RunID != run2 {
		t.Fatalf("List(cancelled) = %+v, %v", runs, err)
	}
}

func TestErrors(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store)
	ctx := timeout(t)
	g := mustGraph(t, helloYAML)

	run, err := c.Start(ctx, g, client.WithRunID("order-42"))
	if err != nil || run != "order-42" {
		t.Fatalf("Start with an id: %q, %v", run, err)
	}
	late, err := c.Start(ctx, g, client.WithRunID("order-43"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"start twice", func() error { _, err := c.Start(ctx, g, client.WithRunID("order-42")); return err }, events.ErrRunExists},
		{"invalid run id", func() error { _, err := c.Start(ctx, g, client.WithRunID("a.b")); return err }, events.ErrInvalidID},
		{"input not an object", func() error { _, err := c.Start(ctx, g, client.WithInput([]int{1})); return err }, client.ErrInvalidInput},
		{"input not JSON", func() error { _, err := c.Start(ctx, g, client.WithInput(json.RawMessage(`{"a":`))); return err }, client.ErrInvalidInput},
		{"invocation not an object", func() error { _, err := c.Start(ctx, g, client.WithInvocation("gold")); return err }, client.ErrInvalidInput},
		{"get missing", func() error { _, err := c.Get(ctx, "missing"); return err }, events.ErrRunNotFound},
		{"history missing", func() error { _, err := c.History(ctx, "missing"); return err }, events.ErrRunNotFound},
		{"state at missing", func() error { _, err := c.StateAt(ctx, "missing", 5); return err }, events.ErrRunNotFound},
		{"state before the start", func() error { _, err := c.StateAtSeq(ctx, late, 1); return err }, client.ErrNoSuchSeq},
		{"state past the end", func() error { _, err := c.StateAt(ctx, late, 1000); return err }, client.ErrNoSuchPosition},
		{"wait missing", func() error { _, err := c.Wait(ctx, "missing"); return err }, events.ErrRunNotFound},
		{"signal missing", func() error { return c.Signal(ctx, "missing", "greet", nil) }, events.ErrRunNotFound},
		{"signal bad data", func() error { return c.Signal(ctx, run, "greet", json.RawMessage("{")) }, client.ErrInvalidInput},
		{"cancel missing", func() error { return c.Cancel(ctx, "missing", "") }, events.ErrRunNotFound},
		{"signal unknown node", func() error { return c.Signal(ctx, run, "nobody", nil) }, graph.ErrUnknownNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}

	// A run id that is taken stays taken after the de-duplication window
	// of the first start too: a different graph cannot take it over.
	other := mustGraph(t, humanYAML)
	if _, err := c.Start(ctx, other, client.WithRunID("order-42")); !errors.Is(err, events.ErrRunExists) {
		t.Fatalf("start of a taken id with another graph: %v", err)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	_, store := testkit.Store(t) // no coordinator: the run never ends
	c := client.New(store)
	run, err := c.Start(timeout(t), mustGraph(t, helloYAML))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, run); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want context.DeadlineExceeded", err)
	}
}

// loopYAML asks again for as long as the answer says "more".
const loopYAML = `
name: loop
nodes:
  - id: ask
    type: human
edges:
  - {from: START, to: ask}
  - {from: ask, to: ask, when: "output.more"}
  - {from: ask, to: END, when: "!output.more"}
`

// signalCount counts the signal events in a run's log.
func signalCount(t *testing.T, c *client.Client, run string) int {
	t.Helper()
	evs, err := c.History(timeout(t), run)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == events.SignalReceived {
			n++
		}
	}
	return n
}

// waitIteration waits until the node waits for a signal in activation it.
func waitIteration(t *testing.T, c *client.Client, run, node string, it int) {
	t.Helper()
	ctx := timeout(t)
	for {
		st, err := c.Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if ns := st.Nodes[node]; ns != nil && ns.Iteration == it && ns.Status == projection.NodeWaiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s never waited in activation %d: %+v", node, it, st.Nodes[node])
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestSignalIsIdempotent(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, loopYAML)

	for _, tc := range []struct {
		name string
		opts []client.SignalOption
	}{
		{"derived id", nil},
		{"client id", []client.SignalOption{client.WithSignalID("req-1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := c.Start(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			waitIteration(t, c, run, "ask", 1)
			more := map[string]any{"more": true}
			if err := c.Signal(ctx, run, "ask", more, tc.opts...); err != nil {
				t.Fatal(err)
			}
			// The first signal completes the first wait and the loop
			// waits again; the same signal sent again (a retried call)
			// must not answer the second wait.
			waitIteration(t, c, run, "ask", 2)
			if err := c.Signal(ctx, run, "ask", more, tc.opts...); err != nil {
				t.Fatal(err)
			}
			if n := signalCount(t, c, run); n != 1 {
				t.Fatalf("%d signal events after sending one signal twice, want 1", n)
			}
			// Gives a duplicate signal the time to (wrongly) move the run: an absence cannot be waited for.
			time.Sleep(200 * time.Millisecond)
			st, err := c.Get(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if ns := st.Nodes["ask"]; ns.Iteration != 2 || ns.Status != projection.NodeWaiting {
				t.Fatalf("after the repeat: ask is %s in activation %d, want waiting in 2", ns.Status, ns.Iteration)
			}
			// A different signal answers the second wait.
			var opts []client.SignalOption
			if tc.opts != nil {
				opts = []client.SignalOption{client.WithSignalID("req-2")}
			}
			if err := c.Signal(ctx, run, "ask", map[string]any{"more": false}, opts...); err != nil {
				t.Fatal(err)
			}
			st, err = c.Wait(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != projection.RunCompleted || st.Nodes["ask"].Iteration != 2 {
				t.Fatalf("run %s in activation %d, want completed in 2", st.Status, st.Nodes["ask"].Iteration)
			}
		})
	}
	if err := c.Signal(ctx, "x", "ask", nil, client.WithSignalID("a.b")); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("signal id a.b: %v, want events.ErrInvalidID", err)
	}
}
