package projection_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/projection"
)

// runningState is a running run of n nodes that finished, and a human
// node and a timer that wait.
func runningState(n int) *projection.State {
	s := &projection.State{Status: projection.RunRunning, Nodes: map[string]*projection.NodeState{}}
	for i := range n {
		s.Nodes[fmt.Sprintf("n%03d", i)] = &projection.NodeState{Status: projection.NodeSucceeded, Iteration: 1}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Nodes["zz-ask"] = &projection.NodeState{Status: projection.NodeWaiting, WaitingFor: "signal", Iteration: 1}
	s.Nodes["aa-nap"] = &projection.NodeState{Status: projection.NodeWaiting, WaitingFor: projection.WaitingForTimer, Iteration: 2, Deadline: &at}
	s.Nodes["mm-map"] = &projection.NodeState{Status: projection.NodeWaiting, WaitingFor: "map", Iteration: 1}
	return s
}

// Waits lists the nodes that wait on a person or a time, in id order, and
// no other.
func TestWaitsInIDOrder(t *testing.T) {
	ws := runningState(50).Waits()
	if len(ws) != 2 || ws[0].Node != "aa-nap" || ws[0].For != projection.WaitingForTimer || ws[0].Deadline == nil || ws[0].Iteration != 2 ||
		ws[1].Node != "zz-ask" || ws[1].For != "signal" {
		t.Fatalf("waits %+v", ws)
	}
}

// BenchmarkWaits is Waits of a running run of 200 finished nodes: a
// coordinator asks on every event it handles (readmodel.IndexKey).
func BenchmarkWaits(b *testing.B) {
	s := runningState(200)
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Waits()) != 2 {
			b.Fatal("want 2 waits")
		}
	}
}
