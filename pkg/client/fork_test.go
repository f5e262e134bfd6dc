package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// lastSeq is the events stream's last sequence: what a refused call must
// leave as it was.
func lastSeq(t *testing.T, store events.Store) uint64 {
	t.Helper()
	st, err := eventlog.JetStream(store).Stream(context.Background(), store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// position returns the position of the first event of run history that
// matches.
func position(t *testing.T, evs []client.RunEvent, typ events.Type, node string) int {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ && e.NodeID == node {
			return e.Position
		}
	}
	t.Fatalf("no %s of %s in the history", typ, node)
	return 0
}

// workerHelloYAML is helloYAML with shout on a worker, not run by the
// coordinator as a local node: a fork can then find it running.
var workerHelloYAML = strings.Replace(helloYAML, "type: transform", "type: transform\n    local: false", 1)

func count(evs []client.RunEvent, typ events.Type, node string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && e.NodeID == node {
			n++
		}
	}
	return n
}

// A fork from the point where shout was ready, with an edited state: greet
// (completed) does not run again, shout (ready) does, with the new state;
// the new run's log starts self-contained and names its parent.
func TestForkRerunsReadyNodesWithEditedState(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, workerHelloYAML), client.WithInput(map[string]any{"name": "Ada"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, run); err != nil {
		t.Fatal(err)
	}
	evs, err := c.Events(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Position != i+1 {
			t.Fatalf("event %d has position %d", i, e.Position)
		}
	}
	at := position(t, evs, events.NodeReady, "shout")
	fork, err := c.Fork(ctx, run, at, client.SetState("name", "Bob"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, fork)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted || string(st.Vars["greeting"]) != `"Hello, Bob!"` {
		t.Fatalf("fork %s, greeting %s; want completed, Hello, Bob!", st.Status, st.Vars["greeting"])
	}
	if st.Fork == nil || st.Fork.RunID != run || st.Fork.Position != at || st.Fork.Seq != evs[at-1].Seq {
		t.Errorf("fork's lineage %+v, want %s at %d (seq %d)", st.Fork, run, at, evs[at-1].Seq)
	}
	fevs, err := c.Events(ctx, fork)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(fevs, events.NodeInvoking, "greet"); n != 0 {
		t.Errorf("greet, completed at the fork point, ran %d times in the fork", n)
	}
	if n := count(fevs, events.NodeInvoking, "shout"); n != 1 {
		t.Errorf("shout, ready at the fork point, ran %d times in the fork, want 1", n)
	}
	// From the point where shout was running: it runs again too, as
	// attempt 1 of the fork.
	running := position(t, evs, events.NodeInvoking, "shout")
	fork2, err := c.Fork(ctx, run, running)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx, fork2); err != nil || st.Status != projection.RunCompleted || st.Nodes["shout"].Attempt != 1 || string(st.Vars["greeting"]) != `"Hello, Ada!"` {
		t.Errorf("fork from shout running: %v %+v", err, st)
	}
	f2evs, _ := c.Events(ctx, fork2)
	if n := count(f2evs, events.NodeInvoking, "shout"); n != 1 {
		t.Errorf("shout, running at the fork point, ran %d times in the fork, want 1", n)
	}
	// From the end of the completed run: nothing runs, the fork completes
	// with the same state.
	end, err := c.Fork(ctx, run, len(evs))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx, end); err != nil || st.Status != projection.RunCompleted || string(st.Vars["greeting"]) != `"Hello, Ada!"` {
		t.Errorf("fork from the end: %v %+v", err, st)
	}
	if eevs, _ := c.Events(ctx, end); count(eevs, events.NodeReady, "greet")+count(eevs, events.NodeReady, "shout") != 0 {
		t.Errorf("a fork from the end ran nodes again")
	}
	// Self-contained: the fork's own first event folds to its start state.
	first := projection.Fold([]*events.Event{fevs[0].Event})
	if first.Nodes["greet"] == nil || first.Nodes["greet"].Status != projection.NodeSucceeded || len(first.Graph) == 0 {
		t.Errorf("the fork's run-started alone does not give greet succeeded and the graph: %s", first.Marshal())
	}
}

// Bad fork requests are refused with a located error, and nothing is
// written.
func TestForkRefusesBadInputWritingNothing(t *testing.T) {
	c, store := engine(t)
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, workerHelloYAML), client.WithInput(map[string]any{"name": "Ada"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, run); err != nil {
		t.Fatal(err)
	}
	evs, _ := c.Events(ctx, run)
	other := mustGraph(t, `
name: other
nodes:
  - {id: greet, type: echo}
edges:
  - {from: START, to: greet}
  - {from: greet, to: END}
`)
	before := lastSeq(t, store)
	for _, tc := range []struct {
		name    string
		pos     int
		opts    []client.ForkOption
		wantErr error
		want    string
	}{
		{"past the end", len(evs) + 1, nil, client.ErrNoSuchPosition, "positions 1 to"},
		{"zero", 0, nil, client.ErrNoSuchPosition, "out of range"},
		{"state value not JSON", 2, []client.ForkOption{client.SetState("name", json.RawMessage("{"))}, client.ErrInvalidInput, `key "name"`},
		{"state not an object", 2, []client.ForkOption{client.ReplaceState([]int{1})}, client.ErrInvalidInput, "state must be a JSON object"},
		{"graph without shout", len(evs), []client.ForkOption{client.WithForkGraph(other)}, client.ErrIncompatibleGraph, `node "shout"`},
		{"run id taken", 2, []client.ForkOption{client.WithForkRunID(run)}, events.ErrRunExists, run},
		{"state too large to keep", 2, []client.ForkOption{client.SetState("big", strings.Repeat("x", events.MaxPayloadObject))}, events.ErrPayloadTooLarge, fmt.Sprint(events.MaxPayloadObject)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Fork(ctx, run, tc.pos, tc.opts...)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fork: %v; want %v mentioning %q", err, tc.wantErr, tc.want)
			}
		})
	}
	if _, err := c.Fork(ctx, "missing", 1); !errors.Is(err, events.ErrRunNotFound) {
		t.Errorf("fork of a missing run: %v", err)
	}
	if after := lastSeq(t, store); after != before {
		t.Errorf("refused forks wrote to the stream: last sequence %d -> %d", before, after)
	}
}

// Reset ends a waiting run with a recorded reason and forks it from just
// before the node was activated: the new run waits at the node again.
func TestResetToNode(t *testing.T) {
	c, store := engine(t)
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, humanYAML))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, run, func(st *projection.State) bool {
		return st.Nodes["ask"] != nil && st.Nodes["ask"].Status == projection.NodeWaiting
	})
	before := lastSeq(t, store)
	for _, tc := range []struct {
		target  client.ResetTarget
		wantErr error
	}{
		{client.ResetTarget{Node: "done"}, client.ErrNodeNeverRan},
		{client.ResetTarget{Node: "nobody"}, graph.ErrUnknownNode},
		{client.ResetTarget{Position: 99}, client.ErrNoSuchPosition},
	} {
		if _, err := c.Reset(ctx, run, tc.target); !errors.Is(err, tc.wantErr) {
			t.Errorf("Reset %+v: %v, want %v", tc.target, err, tc.wantErr)
		}
	}
	if after := lastSeq(t, store); after != before {
		t.Errorf("refused resets wrote to the stream: last sequence %d -> %d", before, after)
	}

	fork, err := c.Reset(ctx, run, client.ResetTarget{Node: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != projection.RunCancelled || old.Cancel == nil || !strings.Contains(old.Cancel.Reason, "reset to node ask") || !strings.Contains(old.Cancel.Reason, "new run "+fork) {
		t.Errorf("the reset run is %s, cancel %+v; want cancelled naming the node and %s", old.Status, old.Cancel, fork)
	}
	waitFor(t, c, fork, func(st *projection.State) bool {
		return st.Nodes["ask"] != nil && st.Nodes["ask"].Status == projection.NodeWaiting
	})
	if err := c.Signal(ctx, fork, "ask", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, fork)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted || st.Fork == nil || st.Fork.RunID != run || !strings.Contains(st.Fork.Reason, "reset to node ask") {
		t.Errorf("fork %s, lineage %+v", st.Status, st.Fork)
	}
}

// waitFor waits until the run's state satisfies ok, reading it each time
// one of its events is stored.
func waitFor(t *testing.T, c *client.Client, run string, ok func(*projection.State) bool) {
	t.Helper()
	ctx := timeout(t)
	err := c.Follow(ctx, run, func(e client.RunEvent, st *projection.State) bool { return !ok(st) })
	if err != nil {
		t.Fatalf("waiting for run %s: %v", run, err)
	}
}

// Replay says whether recorded runs still decide the same on a graph.
func TestReplay(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, helloYAML)
	run, err := c.Start(ctx, g, client.WithInput(map[string]any{"name": "Ada"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, run); err != nil {
		t.Fatal(err)
	}
	changed := mustGraph(t, strings.Replace(helloYAML, "type: transform", "type: transform\n    queue: gpu", 1))
	res, err := c.Replay(ctx, g, run)
	if err != nil || len(res) != 1 || !res[0].OK() {
		t.Fatalf("Replay on the run's own graph: %v %+v", err, res)
	}
	res, err = c.Replay(ctx, changed, run)
	if err != nil || len(res) != 1 || res[0].OK() {
		t.Fatalf("Replay on a changed graph: %v %+v", err, res)
	}
	if d := res[0].Diff; !strings.Contains(d.Recorded, "node.ready shout/1") {
		t.Errorf("difference at %q, want shout's node-ready:\n%s", d.Recorded, d)
	}
	if _, err := c.Replay(ctx, g, "missing"); !errors.Is(err, events.ErrRunNotFound) {
		t.Errorf("Replay of a missing run: %v", err)
	}
}

// A fork taken while a map's items run: the items then running run again,
// finished ones do not, and the fork completes with every item's output.
func TestForkDuringAMap(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g, err := graph.LoadFile("../../examples/fanout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(ctx, g, client.WithInput(map[string]any{"docs": []string{"a", "b", "c", "d"}}))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("parent: %v %+v", err, st)
	}
	evs, _ := c.Events(ctx, run)
	// After the first item's outcome: item 0 is done, item 1 is under way
	// or ready, items 2 and 3 wait for a slot.
	at := position(t, evs, events.NodeInvoked, "pages")
	mid, _ := c.StateAt(ctx, run, at)
	done := 0
	for _, it := range mid.Nodes["pages"].Items {
		if it.Status == projection.NodeSucceeded {
			done++
		}
	}
	if done != 1 {
		t.Fatalf("at the first item's outcome %d items are done", done)
	}
	fork, err := c.Fork(ctx, run, at)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, fork)
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("fork: %v %+v", err, st)
	}
	if got := string(st.Artifacts["pages"]); got != `["0:A","1:B","2:C","3:D"]` {
		t.Errorf("fork's pages %s", got)
	}
	fevs, _ := c.Events(ctx, fork)
	if n := count(fevs, events.NodeInvoked, "pages"); n != 4-done {
		t.Errorf("the fork ran %d items, want the %d not done at the fork point", n, 4-done)
	}
	if n := count(fevs, events.NodeInvoking, "left") + count(fevs, events.NodeInvoking, "right"); n != 0 {
		t.Errorf("the fork ran left or right again (%d)", n)
	}
}

// A RunEvent's JSON keeps its position beside the event.
func TestRunEventJSON(t *testing.T) {
	e, err := events.New("r1", "e1", time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC), &events.SignalReceivedData{Node: "a", By: "me"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(client.RunEvent{Position: 3, Event: e})
	if err != nil {
		t.Fatal(err)
	}
	var got client.RunEvent
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Position != 3 || got.ID != "e1" || got.Type != events.SignalReceived {
		t.Errorf("round trip of %s: %+v", b, got)
	}
}
