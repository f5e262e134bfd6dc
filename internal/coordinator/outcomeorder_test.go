package coordinator_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestOutcomeBeforeItsInvoking: a worker's outcome that lands before its
// node.invoking, or with no node.invoking at all (its append failed), is
// still the attempt's outcome: the coordinator's fold takes it and the run
// goes on to its end; an invoking after the outcome counts as an execution
// and changes nothing else. A conforming worker does not write them so
// today (docs/worker-protocol.md, "A work item's life"), but one that
// reports over two connections, or a later protocol that lets the outcome
// go before invoking's acknowledgement, may: the fold must not depend on
// their order.
func TestOutcomeBeforeItsInvoking(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	cons, err := workqueue.EnsureQueue(ctx, eventlog.JetStream(st), st.StreamName(), "default", workqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGraph(t, `
name: order
nodes:
  - {id: a, type: noop}
  - {id: b, type: noop}
  - {id: c, type: noop}
edges: [{from: START, to: a}, {from: a, to: b}, {from: b, to: c}, {from: c, to: END}]
`)
	runs := start(t, st, g, 3)
	// A fake worker: for a, the outcome and then invoking; for b, the
	// outcome alone; for c, as the protocol's order has it.
	order := map[string][]events.Type{
		"a": {events.NodeInvoked, events.NodeInvoking},
		"b": {events.NodeInvoked},
		"c": {events.NodeInvoking, events.NodeInvoked},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				if err := answer(ctx, st, m, order); err != nil && ctx.Err() == nil {
					t.Errorf("answering %s: %v", m.Subject(), err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	for run, s := range waitEnded(t, st, runs, 30*time.Second) {
		if s.Status != projection.RunCompleted {
			t.Errorf("run %s: %s, want completed", run, s.Status)
		}
		for _, id := range []string{"a", "b", "c"} {
			if n := s.Nodes[id]; n == nil || n.Status != projection.NodeSucceeded {
				t.Errorf("run %s: node %s is %+v, want succeeded", run, id, n)
			}
		}
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			if e.NodeID == "a" || e.NodeID == "b" {
				got = append(got, e.NodeID+":"+string(e.Type))
			}
		}
		// The log holds the order the test meant: a's invoking after its
		// outcome, b's missing.
		if i, j := slices.Index(got, "a:"+string(events.NodeInvoked)), slices.Index(got, "a:"+string(events.NodeInvoking)); i < 0 || j < i {
			t.Errorf("run %s: a's events %v: want invoked before invoking", run, got)
		}
		if slices.Contains(got, "b:"+string(events.NodeInvoking)) {
			t.Errorf("run %s: b has an invoking: %v", run, got)
		}
		// a's late invoking counts as an execution, and does not make a
		// running again (its status is checked above).
		if s.Stats.Executions != 2 {
			t.Errorf("run %s: %d executions, want 2 (a's and c's invokings)", run, s.Stats.Executions)
		}
	}
}

// answer appends a work item's invoking and outcome in the order the test
// gives for its node, then acks it.
func answer(ctx context.Context, st events.Store, m jetstream.Msg, order map[string][]events.Type) error {
	ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		return err
	}
	p, err := ev.Payload()
	if err != nil {
		return err
	}
	r := p.(*events.NodeReadyData)
	for _, typ := range order[r.Node] {
		var data events.Payload = &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Worker: "fake"}
		if typ == events.NodeInvoking {
			data = &events.NodeInvokingData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: 1, Worker: "fake"}
		}
		e, err := events.New(ev.RunID, eventlog.DecisionID(ev.RunID, typ, r.Key(), strconv.Itoa(r.Attempt), "1"), time.Time{}, data)
		if err != nil {
			return err
		}
		e.Queue = r.Queue
		if _, err := st.Append(ctx, ev.RunID, events.AnySeq, e); err != nil {
			return err
		}
	}
	return m.DoubleAck(ctx)
}
