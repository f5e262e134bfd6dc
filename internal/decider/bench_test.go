package decider_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// chainSource is a chain of n echo nodes.
func chainSource(n int) string {
	var s strings.Builder
	s.WriteString("name: chain\nnodes:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - {id: n%d, type: echo}\n", i)
	}
	s.WriteString("edges:\n  - {from: START, to: n0}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&s, "  - {from: n%d, to: n%d}\n", i-1, i)
	}
	fmt.Fprintf(&s, "  - {from: n%d, to: END}\n", n-1)
	return s.String()
}

// driveChain runs a run of g to its end as the coordinator does: decide
// on the folded state (the decisions applied to it), then fold each work
// item's invoking and invoked. It returns the decisions made.
func driveChain(tb testing.TB, g *graph.Graph, now time.Time) int {
	s := &projection.State{}
	seq := uint64(0)
	apply := func(e *events.Event) {
		seq++
		e.Seq = seq
		if err := s.Apply(e); err != nil {
			tb.Fatalf("apply %s: %v", e.Type, err)
		}
	}
	mk := func(id string, p events.Payload) *events.Event {
		e, err := events.New("run1", id, now, p)
		if err != nil {
			tb.Fatal(err)
		}
		return e
	}
	apply(mk("run1", &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), Input: json.RawMessage(`{"x":1}`)}))
	decisions := 0
	for !s.Status.Ended() {
		d := decider.DecideWith(g, s, now, decider.Options{})
		if len(d.Events) == 0 {
			tb.Fatalf("the run came to rest %s", s.Status)
		}
		for _, e := range d.Events {
			seq++ // applied by the decider; its place in the log
			decisions++
			if e.Type != events.NodeReady {
				continue
			}
			p, _ := e.Payload()
			r := p.(*events.NodeReadyData)
			apply(mk("inv-"+e.ID, &events.NodeInvokingData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Worker: "w"}))
			apply(mk("out-"+e.ID, &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Output: json.RawMessage(`{}`)}))
		}
	}
	return decisions
}

// BenchmarkDecideChain decides a whole run of a chain of 200 nodes, as
// the coordinator does after each outcome: ns/step is per node. The
// decider's cost per step should not grow with the graph's size.
func BenchmarkDecideChain(b *testing.B) {
	for _, n := range []int{10, 200} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			g, err := graph.Parse([]byte(chainSource(n)), "chain.yaml")
			if err != nil {
				b.Fatal(err)
			}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			for b.Loop() {
				driveChain(b, g, now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
		})
	}
}
