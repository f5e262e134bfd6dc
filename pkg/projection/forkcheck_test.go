package projection_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestHonestForksPassTheCheck: a fork of any recorded run at any position
// (ForkState of the state there) passes CheckForkState against the run's
// own graph, unless ForkState refuses it (a node waiting for a child), or
// a router was caught between its two decisions; and the fork's
// run-started folds to that state.
func TestHonestForksPassTheCheck(t *testing.T) {
	forks := 0
	for name, evs := range histories(t) {
		for cut := 1; cut <= len(evs); cut++ {
			at := projection.Fold(evs[:cut])
			st, err := projection.ForkState(at)
			if errors.Is(err, projection.ErrForkChild) {
				continue
			}
			if err != nil {
				t.Fatalf("%s at %d: ForkState: %v", name, cut, err)
			}
			if err := projection.CheckForkState(at.Graph, st); err != nil {
				if router(at) {
					continue
				}
				t.Fatalf("%s at %d: an honest fork refused: %v", name, cut, err)
			}
			start, err := events.New("fork", "fork", time.Time{}, &events.RunStartedData{GraphName: at.GraphName, GraphDigest: at.GraphDigest, Graph: at.Graph,
				Fork: &events.ForkRef{RunID: at.RunID, Position: cut}, State: st.Marshal()})
			if err != nil {
				t.Fatal(err)
			}
			start.Seq = 1
			got := projection.Fold([]*events.Event{start})
			if got.ForkRefused != nil || len(got.Nodes) != len(st.Nodes) {
				t.Fatalf("%s at %d: the fork's fold refused its state: %+v", name, cut, got.ForkRefused)
			}
			forks++
		}
	}
	if forks < 50 {
		t.Fatalf("only %d forks checked", forks)
	}
}

// router reports whether a router waits between its two decisions in s.
func router(s *projection.State) bool {
	for _, n := range s.Nodes {
		if n.Status == projection.NodeWaiting && n.WaitingFor == "router" {
			return true
		}
	}
	return false
}

// checkGraph is the graph of the fork states below: a worker node a with
// three attempts, a human node h, a map node m, a subgraph s, a router r,
// a wait node w.
var checkGraph = json.RawMessage(`{"name":"g","maxIterations":5,"nodes":[
	{"id":"a","type":"echo","retry":{"maxAttempts":3}},
	{"id":"h","type":"human"},
	{"id":"m","type":"echo","map":{"over":"state.xs"},"retry":{"maxAttempts":2}},
	{"id":"s","type":"subgraph","config":{"graph":"c"}},
	{"id":"r","type":"router"},
	{"id":"w","type":"wait","config":{"duration":"1h"}}],
	"edges":[{"from":"START","to":"a"},{"from":"a","to":"h"},{"from":"h","to":"m"},{"from":"m","to":"s"},{"from":"s","to":"r"},{"from":"r","to":"w"},{"from":"w","to":"END"}]}`)

func TestCheckForkStateFindsEveryProblem(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := at.Add(time.Hour)
	ref := func(node string, it int) events.NodeRef { return events.NodeRef{Node: node, Iteration: it} }
	item0 := 0
	tests := []struct {
		name  string
		state string
		want  []string // node/field pairs, in order
	}{
		{"a node the graph lacks", `{"nodes":{"ghost":{"status":"succeeded","iteration":1}}}`, []string{"ghost/node"}},
		{"not a status", `{"nodes":{"a":{"status":"paid","iteration":1}}}`, []string{"a/status"}},
		{"running with no work item", `{"nodes":{"a":{"status":"running","iteration":1,"attempt":1}}}`, []string{"a/status"}},
		{"a ready item", `{"nodes":{"m":{"status":"waiting","waitingFor":"map","iteration":1,"items":[{"status":"ready","attempt":1}]}}}`, []string{"m/items[0].status"}},
		{"iteration 0", `{"nodes":{"a":{"status":"succeeded","iteration":0}}}`, []string{"a/iteration"}},
		{"past the iteration cap", `{"nodes":{"a":{"status":"succeeded","iteration":6}}}`, []string{"a/iteration"}},
		{"past the retry policy", `{"nodes":{"a":{"status":"failed","iteration":1,"attempt":4}}}`, []string{"a/attempt"}},
		{"negative attempt", `{"nodes":{"a":{"status":"retry_due","iteration":1,"attempt":-1}}}`, []string{"a/attempt"}},
		{"routed ahead", `{"nodes":{"a":{"status":"succeeded","iteration":1,"routed":2}}}`, []string{"a/routed"}},
		{"a worker node waiting for a signal", `{"nodes":{"a":{"status":"waiting","waitingFor":"signal","iteration":1}}}`, []string{"a/waitingFor"}},
		{"waiting for a child run", `{"nodes":{"s":{"status":"waiting","waitingFor":"child","child":"victim1-child-1","iteration":1}}}`, []string{"s/waitingFor"}},
		{"a router between its decisions", `{"nodes":{"r":{"status":"waiting","waitingFor":"router","iteration":1}}}`, []string{"r/waitingFor"}},
		{"a child of a worker node", `{"nodes":{"a":{"status":"succeeded","iteration":1,"child":"x"}}}`, []string{"a/child"}},
		{"items of a worker node", `{"nodes":{"a":{"status":"succeeded","iteration":1,"items":[{"status":"succeeded"}]}}}`, []string{"a/items"}},
		{"an owed edge into another node", `{"nodes":{"h":{"status":"waiting","waitingFor":"signal","iteration":1,"owed":[0]}}}`, []string{"h/owed[0]"}},
		{"an owed edge that does not exist", `{"nodes":{"h":{"status":"waiting","waitingFor":"signal","iteration":1,"owed":[9]}}}`, []string{"h/owed[0]"}},
		{"a pending signal on the wrong edge", `{"pending":{"h":[{"edge":0,"to":"h","taken":true}]}}`, []string{"/pending[h][0]"}},
		{"a pending signal for a node the graph lacks", `{"pending":{"ghost":[{"edge":0,"to":"ghost","taken":true}]}}`, []string{"/pending[ghost]"}},
		{"retrying without its timer", `{"nodes":{"a":{"status":"retrying","iteration":1,"attempt":1}}}`, []string{"a/status"}},
		{"a retry timer of a node that is not retrying", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"a": {Status: projection.NodeSucceeded, Iteration: 1, Attempt: 1}},
			Timers: map[string]projection.Timer{"retry-a-1-2": {Purpose: "retry", Ref: ref("a", 1), Attempt: 2, At: at}}}), []string{"a/timers[retry-a-1-2]"}},
		{"a retry timer under another id", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"a": {Status: projection.NodeRetrying, Iteration: 1, Attempt: 1}},
			Timers: map[string]projection.Timer{"retry-a-1-2": {Purpose: "retry", Ref: ref("a", 1), Attempt: 2, At: at}, "evil.subject": {Purpose: "retry", Ref: ref("a", 1), Attempt: 2, At: at}}}), []string{"a/timers[evil.subject]"}},
		{"a timer of a node with no activation", mustState(t, &projection.State{
			Timers: map[string]projection.Timer{"deadline-h-1": {Purpose: "deadline", Ref: ref("h", 1), At: at}}}), []string{"/timers[deadline-h-1]"}},
		{"a timeout timer", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"a": {Status: projection.NodeRetryDue, Iteration: 1}},
			Timers: map[string]projection.Timer{"timeout-a-1-1": {Purpose: projection.PurposeTimeout, Ref: ref("a", 1), Attempt: 1, At: at}}}), []string{"a/timers[timeout-a-1-1]"}},
		{"a deadline that is not the node's", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"h": {Status: projection.NodeWaiting, WaitingFor: "signal", Iteration: 1, Deadline: &later}},
			Timers: map[string]projection.Timer{"deadline-h-1": {Purpose: "deadline", Ref: ref("h", 1), At: at}}}), []string{"h/timers[deadline-h-1]"}},
		{"a deadline with no timer", mustState(t, &projection.State{
			Nodes: map[string]*projection.NodeState{"h": {Status: projection.NodeWaiting, WaitingFor: "signal", Iteration: 1, Deadline: &later}}}), []string{"h/deadline"}},
		{"a retry of an item the node lacks", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"m": {Status: projection.NodeWaiting, WaitingFor: "map", Iteration: 1}},
			Timers: map[string]projection.Timer{"retry-m-1-0-2": {Purpose: "retry", Ref: events.NodeRef{Node: "m", Iteration: 1, Item: &item0}, Attempt: 2, At: at}}}), []string{"m/timers[retry-m-1-0-2]"}},
		{"a worker node waiting for a timer", `{"nodes":{"a":{"status":"waiting","waitingFor":"timer","iteration":1}}}`, []string{"a/waitingFor"}},
		{"a wait with no timer", mustState(t, &projection.State{
			Nodes: map[string]*projection.NodeState{"w": {Status: projection.NodeWaiting, WaitingFor: projection.WaitingForTimer, Iteration: 1, Deadline: &later}}}), []string{"w/deadline"}},
		{"a wait timer that is not the node's", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"w": {Status: projection.NodeWaiting, WaitingFor: projection.WaitingForTimer, Iteration: 1, Deadline: &later}},
			Timers: map[string]projection.Timer{"wait-w-1": {Purpose: projection.PurposeWait, Ref: ref("w", 1), At: at}}}), []string{"w/timers[wait-w-1]"}},
		{"a wait timer of a node that does not wait", mustState(t, &projection.State{
			Nodes:  map[string]*projection.NodeState{"w": {Status: projection.NodeSucceeded, Iteration: 1}},
			Timers: map[string]projection.Timer{"wait-w-1": {Purpose: projection.PurposeWait, Ref: ref("w", 1), At: at}}}), []string{"w/timers[wait-w-1]"}},
		{"too many buffered signals", bufferedSignals(101), []string{"/signals[h]"}},
		{"a child's end kept for a wait to come", `{"earlyChildEnds":{"s":{"node":"s","iteration":1,"childRunId":"victim1-s-1","status":"completed","output":{"paid":true}}}}`, []string{"/earlyChildEnds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st projection.State
			if err := json.Unmarshal([]byte(tt.state), &st); err != nil {
				t.Fatal(err)
			}
			err := projection.CheckForkState(checkGraph, &st)
			var fe *projection.ForkStateError
			if !errors.Is(err, projection.ErrInvalidForkState) || !errors.As(err, &fe) {
				t.Fatalf("CheckForkState = %v, want a ForkStateError", err)
			}
			var got []string
			for _, p := range fe.Problems {
				got = append(got, p.Node+"/"+p.Field)
				if p.Message == "" {
					t.Errorf("problem %+v says nothing", p)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("problems %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

func bufferedSignals(n int) string {
	sigs := make([]json.RawMessage, n)
	for i := range sigs {
		sigs[i] = json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(map[string]any{"signals": map[string]any{"h": sigs}})
	return string(b)
}

func mustState(t *testing.T, s *projection.State) string {
	t.Helper()
	return string(s.Marshal())
}

// TestCheckForkStateTakesAGoodState: a state with each kind of node in a
// state it may be forked in passes.
func TestCheckForkStateTakesAGoodState(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	item1 := 1
	st := &projection.State{
		Vars: map[string]json.RawMessage{"xs": json.RawMessage(`[1,2]`)},
		Nodes: map[string]*projection.NodeState{
			"a": {Status: projection.NodeSucceeded, Iteration: 2, Attempt: 3, Routed: 2},
			"h": {Status: projection.NodeWaiting, WaitingFor: "signal", Iteration: 1, Deadline: &at, Owed: []int{1}},
			"m": {Status: projection.NodeWaiting, WaitingFor: "map", Iteration: 1, Items: []*projection.ItemState{
				{Status: projection.NodeSucceeded, Attempt: 1}, {Status: projection.NodeRetrying, Attempt: 1}}},
			"s": {Status: projection.NodeSucceeded, Iteration: 1, Child: "run-s-1"},
		},
		Pending: map[string][]events.Signal{"s": {{Edge: 3, To: "s", Taken: true}}},
		Timers: map[string]projection.Timer{
			"deadline-h-1":  {Purpose: "deadline", Ref: events.NodeRef{Node: "h", Iteration: 1}, At: at},
			"retry-m-1-1-2": {Purpose: "retry", Ref: events.NodeRef{Node: "m", Iteration: 1, Item: &item1}, Attempt: 2, At: at},
		},
		Signals: map[string][]json.RawMessage{"h": {json.RawMessage(`{"ok":true}`)}},
	}
	if err := projection.CheckForkState(checkGraph, st); err != nil {
		t.Fatal(err)
	}
}

// TestForgedForkStateIsNotTaken: a fork's run-started whose state does not
// fit its graph, or does not decode, starts a run with none of it, and
// the failure the engine ends it with.
func TestForgedForkStateIsNotTaken(t *testing.T) {
	for name, state := range map[string]string{
		"does not fit": `{"state":{"paid":true},"nodes":{"a":{"status":"running","iteration":1,"attempt":1},"s":{"status":"waiting","waitingFor":"child","child":"victim1-s-1","iteration":1}},"artifacts":{"approval":{"approved":true}}}`,
		"not a state":  `[1,2,3]`,
	} {
		start, err := events.New("fork1", "fork1", time.Time{}, &events.RunStartedData{GraphName: "g", Graph: checkGraph,
			Fork: &events.ForkRef{RunID: "victim1", Position: 2}, State: json.RawMessage(state)})
		if err != nil {
			t.Fatal(err)
		}
		start.Seq = 4
		s := projection.Fold([]*events.Event{start})
		if s.Status != projection.RunRunning || s.ForkRefused == nil || s.ForkRefused.Type != events.FailureInvalidForkState {
			t.Fatalf("%s: %s %+v", name, s.Status, s.ForkRefused)
		}
		if len(s.Nodes) != 0 || len(s.Vars) != 0 || len(s.Artifacts) != 0 || s.Fork == nil || s.Fork.RunID != "victim1" || s.LastSeq != 4 {
			t.Fatalf("%s: the refused state was taken: %s", name, s.Marshal())
		}
		if name == "does not fit" && (!strings.Contains(s.ForkRefused.Message, `node "a": status: running`) || !strings.Contains(string(s.ForkRefused.Details), `"field":"waitingFor"`)) {
			t.Fatalf("%s: the failure does not locate the problems: %+v %s", name, s.ForkRefused, s.ForkRefused.Details)
		}
		snap, _ := projection.Unmarshal(s.Marshal())
		if string(snap.Marshal()) != string(s.Marshal()) {
			t.Fatalf("%s: the refused fork does not round-trip", name)
		}
	}
}
