package projection_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// forkGraph is the graph of the forks below: a, then b and c.
var forkGraph = json.RawMessage(`{"nodes":[{"id":"a"},{"id":"b"},{"id":"c"}],"edges":[{"from":"START","to":"a"},{"from":"a","to":"b"},{"from":"a","to":"c"}]}`)

// ForkState makes ready and running attempts due again (same attempt
// number), keeps finished nodes, pending signals, retry and deadline
// timers, drops the re-run attempts' timeouts, and clears the run's own
// fields; the fork's run-started then gives exactly that state back.
func TestForkStateRerunsActiveAttempts(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	n := 0
	var evs []*events.Event
	add := func(p events.Payload) {
		t.Helper()
		n++
		e, err := events.New("parent", "e"+string(rune('a'+n)), t0.Add(time.Duration(n)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = uint64(n)
		evs = append(evs, e)
	}
	a := events.NodeRef{Node: "a", Iteration: 1}
	b := events.NodeRef{Node: "b", Iteration: 1}
	add(&events.RunStartedData{GraphName: "g", Graph: forkGraph, Input: json.RawMessage(`{"k":1}`)})
	add(&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "q"})
	add(&events.NodeInvokedData{NodeRef: a, Attempt: 1, Output: json.RawMessage(`{"x":1}`)})
	add(&events.NodeReadyData{NodeRef: b, Attempt: 2, Queue: "q", TimeoutMs: 1000,
		Routed: []events.NodeRoutedData{{NodeRef: a, Signals: []events.Signal{{Edge: 1, To: "b", Taken: true}, {Edge: 2, To: "c", Taken: true}}}}})
	add(&events.NodeInvokingData{NodeRef: b, Attempt: 2, Delivery: 1, Worker: "w"})
	parent := projection.Fold(evs)
	if parent.Nodes["b"].Status != projection.NodeRunning || len(parent.Timers) == 0 {
		t.Fatalf("setup: b %s, timers %v", parent.Nodes["b"].Status, parent.Timers)
	}

	st, err := projection.ForkState(parent)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Nodes["b"]; got.Status != projection.NodeRetryDue || got.Attempt != 1 || got.Worker != "" || got.Delivery != 0 {
		t.Errorf("b after ForkState: %+v; want retry_due at attempt 1 (so that attempt 2 runs again)", got)
	}
	if st.Nodes["a"].Status != projection.NodeSucceeded || string(st.Nodes["a"].Output) != `{"x":1}` {
		t.Errorf("a after ForkState: %+v", st.Nodes["a"])
	}
	if len(st.Pending["c"]) != 1 {
		t.Errorf("c's pending signal was lost: %v", st.Pending)
	}
	if len(st.Timers) != 0 {
		t.Errorf("the re-run attempt's timeout is kept: %v", st.Timers)
	}
	if st.RunID != "" || st.Status != projection.RunPending || st.Stats.Events != 0 || st.LastSeq != 0 || st.Graph != nil {
		t.Errorf("the run's own fields are kept: %s", st.Marshal())
	}
	if parent.Nodes["b"].Status != projection.NodeRunning {
		t.Error("ForkState changed the parent's state")
	}

	fork := &events.ForkRef{RunID: "parent", Position: 5, Seq: 5}
	start, err := events.New("child", "child", t0.Add(time.Hour), &events.RunStartedData{GraphName: "g", Graph: forkGraph, Fork: fork, State: st.Marshal()})
	if err != nil {
		t.Fatal(err)
	}
	start.Seq = 100
	got := projection.Fold([]*events.Event{start})
	if got.RunID != "child" || got.Status != projection.RunRunning || got.Fork == nil || *got.Fork != *fork || got.LastSeq != 100 || got.Stats.Events != 1 {
		t.Errorf("fork's fold: %s", got.Marshal())
	}
	if got.Nodes["b"].Status != projection.NodeRetryDue || string(got.Vars["k"]) != "1" || got.StartedAt == nil || !got.StartedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("fork's fold lost the start state: %s", got.Marshal())
	}
	if string(got.Marshal()) != string(projection.Fold([]*events.Event{start}).Marshal()) {
		t.Error("folding the fork's start twice gives different states")
	}
}

// A node waiting for a child run cannot be forked over.
func TestForkStateRefusesAWaitingChild(t *testing.T) {
	s := &projection.State{Nodes: map[string]*projection.NodeState{"sub": {Status: projection.NodeWaiting, WaitingFor: "child", Child: "kid"}}}
	if _, err := projection.ForkState(s); !errors.Is(err, projection.ErrForkChild) {
		t.Errorf("ForkState = %v, want ErrForkChild", err)
	}
}

// The end of a child run that came before its node's wait is the
// forked run's: a fork does not keep it.
func TestForkStateDropsEarlyChildEnds(t *testing.T) {
	s := &projection.State{EarlyChildEnds: map[string]*events.ChildRunFinishedData{"sub": {NodeRef: events.NodeRef{Node: "sub", Iteration: 1}, ChildRunID: "kid", Status: "completed"}}}
	f, err := projection.ForkState(s)
	if err != nil || f.EarlyChildEnds != nil {
		t.Fatalf("ForkState = %v, early ends %v", err, f.EarlyChildEnds)
	}
}

// A fork of a cancelled run takes up what the cancellation ended: the
// waiting human node waits again with its deadline, the running node runs
// again.
func TestForkStateOfACancelledRun(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	deadline := t0.Add(time.Hour)
	var evs []*events.Event
	add := func(p events.Payload) {
		t.Helper()
		e, err := events.New("parent", "e"+string(rune('a'+len(evs))), t0.Add(time.Duration(len(evs))*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = uint64(len(evs) + 1)
		evs = append(evs, e)
	}
	h := events.NodeRef{Node: "h", Iteration: 1}
	w := events.NodeRef{Node: "w", Iteration: 1}
	add(&events.RunStartedData{GraphName: "g", Graph: json.RawMessage(`{"nodes":[{"id":"h","type":"human"},{"id":"w"}]}`)})
	add(&events.NodeWaitingData{NodeRef: h, For: "signal", Deadline: &deadline})
	add(&events.NodeReadyData{NodeRef: w, Attempt: 1, Queue: "q"})
	add(&events.NodeInvokingData{NodeRef: w, Attempt: 1, Delivery: 1, Worker: "x"})
	add(&events.RunCancelRequestedData{By: "me"})
	add(&events.RunCancelledData{By: "me"})
	parent := projection.Fold(evs)
	if parent.Status != projection.RunCancelled || parent.Nodes["h"].Status != projection.NodeCancelled {
		t.Fatalf("setup: %s", parent.Marshal())
	}
	st, err := projection.ForkState(parent)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["h"]; n.Status != projection.NodeWaiting || n.WaitingFor != "signal" {
		t.Errorf("h: %+v, want waiting for a signal again", n)
	}
	if tm, ok := st.Timers[projection.DeadlineTimerID(h)]; !ok || !tm.At.Equal(deadline) {
		t.Errorf("h's deadline timer: %v", st.Timers)
	}
	if n := st.Nodes["w"]; n.Status != projection.NodeRetryDue || n.Attempt != 0 {
		t.Errorf("w: %+v, want attempt 1 due again", n)
	}
	if st.Cancel != nil || st.EndedAt != nil {
		t.Errorf("the cancellation is kept: %s", st.Marshal())
	}
	if err := projection.CheckForkState(parent.Graph, st); err != nil {
		t.Errorf("the fork of a cancelled run does not pass the check: %v", err)
	}
}

// A map node's items that were ready or running run again; finished ones
// do not.
func TestForkStateRerunsMapItems(t *testing.T) {
	s := &projection.State{Nodes: map[string]*projection.NodeState{"m": {Status: projection.NodeWaiting, WaitingFor: "map", Iteration: 1,
		Items: []*projection.ItemState{{Status: projection.NodeSucceeded, Attempt: 1}, {Status: projection.NodeRunning, Attempt: 2, Delivery: 1}, {Status: projection.NodeReady, Attempt: 1}}}}}
	st, err := projection.ForkState(s)
	if err != nil {
		t.Fatal(err)
	}
	it := st.Nodes["m"].Items
	if it[0].Status != projection.NodeSucceeded || it[1].Status != projection.NodeRetryDue || it[1].Attempt != 1 || it[2].Status != projection.NodeRetryDue || it[2].Attempt != 0 {
		t.Errorf("items after ForkState: %+v %+v %+v", *it[0], *it[1], *it[2])
	}
	if st.Nodes["m"].Status != projection.NodeWaiting {
		t.Errorf("the map node is %s, want waiting", st.Nodes["m"].Status)
	}
	if err := projection.CheckForkState(json.RawMessage(`{"nodes":[{"id":"m","type":"echo","map":{"over":"state.xs"},"retry":{"maxAttempts":3}}]}`), st); err != nil {
		t.Errorf("the fork does not pass the check: %v", err)
	}
}

// FuzzForkStart: a fork's run-started carrying any state (the writer is a
// client) followed by any recorded events never panics the fold, and
// folding it twice gives the same state.
func FuzzForkStart(f *testing.F) {
	t := &testing.T{}
	var pool []*events.Event
	for _, evs := range histories(t) {
		pool = append(pool, evs...)
	}
	for _, evs := range histories(t) {
		st, err := projection.ForkState(projection.Fold(evs[:len(evs)/2]))
		if err == nil {
			f.Add(st.Marshal(), []byte{1, 2, 3, 4, 5})
		}
	}
	f.Add([]byte(`{"nodes":{"a":null,"b":{"items":[null]}},"timers":{"x":{}}}`), []byte{0, 7, 9})
	f.Fuzz(func(t *testing.T, state []byte, picks []byte) {
		start, err := events.New("rec-hello", "rec-hello", time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC),
			&events.RunStartedData{GraphName: "g", Fork: &events.ForkRef{RunID: "p", Position: 1}, State: state})
		if err != nil {
			return
		}
		start.Seq = 1
		evs := []*events.Event{start}
		for i, p := range picks {
			e := fresh(pool[int(p)%len(pool)])
			e.RunID, e.Seq = "rec-hello", uint64(i+2)
			evs = append(evs, e)
		}
		a := projection.Fold(evs).Marshal()
		if b := projection.Fold(evs).Marshal(); string(a) != string(b) {
			t.Fatal("folding the same events twice differs")
		}
	})
}

// A run that waits for a slot of its graph's run limit (START waiting)
// forks into a state without that wait: the fork asks for its own slot,
// and its state passes CheckForkState.
func TestForkStateDropsTheRunSlotWait(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	var evs []*events.Event
	for i, p := range []events.Payload{
		&events.RunStartedData{GraphName: "g", Graph: forkGraph},
		&events.NodeWaitingData{NodeRef: events.NodeRef{Node: "START", Iteration: 1}, For: "slot", Attempt: 1, Slot: &events.SlotRef{Limit: "g", Max: 1}},
	} {
		e, err := events.New("parent", "e"+string(rune('a'+i)), t0.Add(time.Duration(i)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = uint64(i + 1)
		evs = append(evs, e)
	}
	parent := projection.Fold(evs)
	if !parent.Waiting() || parent.Nodes["START"] == nil {
		t.Fatalf("setup: the parent does not wait for its slot: %+v", parent.Nodes)
	}
	st, err := projection.ForkState(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Nodes["START"]; ok || st.EntryRouted {
		t.Fatalf("fork state %+v keeps the parent's slot wait", st.Nodes)
	}
	if err := projection.CheckForkState(forkGraph, st); err != nil {
		t.Fatalf("CheckForkState: %v", err)
	}
}
