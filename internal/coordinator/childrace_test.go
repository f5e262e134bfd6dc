package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// quickChildGraph's subgraph node runs a child of one local transform:
// the child ends as soon as it starts.
const quickChildGraph = `
name: quick
graphs:
  sub:
    name: sub
    nodes: [{id: t, type: transform, config: {set: {done: "true"}}}]
    edges: [{from: START, to: t}, {from: t, to: END}]
nodes:
  - {id: child, type: subgraph, outputAs: result, config: {graph: sub}}
edges: [{from: START, to: child}, {from: child, to: END}]
`

// TestChildEndsBeforeParentWaits: the coordinator appends a child run's
// start before its parent's decisions, so a quick child can end, and its
// end reach the parent's log, before the parent's node-waiting. Here that
// order is forced: the parent's decisions that start the child are held
// until the child's end is written to the parent's log. The node still
// takes the child's end and the run completes with the child's output
// (before the fold kept early ends, the node waited forever).
func TestChildEndsBeforeParentWaits(t *testing.T) {
	t.Parallel()
	_, base := testkit.Store(t)
	st := testkit.NewFaultStore(base)
	ended := make(chan struct{})
	var once sync.Once
	held := make(chan bool, 1)
	st.Set(func(f *testkit.FaultStore) {
		f.AfterAppend = func(run string, evs []*events.Event) error {
			for _, e := range evs {
				if e.Type == events.ChildRunFinished {
					once.Do(func() { close(ended) })
				}
			}
			return nil
		}
		f.BeforeAppend = func(run string, evs []*events.Event) error {
			for _, e := range evs {
				if e.Type != events.ChildRunStarted {
					continue
				}
				select {
				case <-ended:
					held <- true
				case <-time.After(60 * time.Second):
					held <- false
				}
				return nil
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	run, err := client.New(base).Start(ctx, mustGraph(t, quickChildGraph))
	if err != nil {
		t.Fatal(err)
	}
	if !<-held {
		t.Fatal("the child's end never reached the parent's log while the parent's decisions were held")
	}
	s := pollRun(t, base, run, "run ends", func(s *projection.State) bool { return s.Status.Ended() })
	if s.Status != projection.RunCompleted || s.Node("child").Status != projection.NodeSucceeded || string(s.Artifacts["result"]) != `{"done":true}` {
		t.Fatalf("run %s, node %s, result %s, error %+v", s.Status, s.Node("child").Status, s.Artifacts["result"], s.Error)
	}
	_, evs := stateOf(t, base, run)
	finished, waiting := uint64(0), uint64(0)
	for _, e := range evs {
		switch {
		case e.Type == events.ChildRunFinished && finished == 0:
			finished = e.Seq
		case e.Type == events.NodeWaiting && waiting == 0:
			waiting = e.Seq
		}
	}
	if finished == 0 || waiting == 0 || finished > waiting {
		t.Fatalf("setup: the child's end at seq %d, the node's wait at %d; want the end first", finished, waiting)
	}
}
