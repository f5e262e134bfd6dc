package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// WaitEnded waits until every run has ended and returns their states. Read
// errors (a cluster electing a leader) are retried until the timeout; on
// the timeout the last run's log is logged and the test fails.
func WaitEnded(t testing.TB, st events.Store, runs []string, timeout time.Duration) map[string]*projection.State {
	t.Helper()
	deadline := time.Now().Add(timeout)
	out := map[string]*projection.State{}
	for _, run := range runs {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			evs, err := st.Read(ctx, run, 0, 0)
			cancel()
			if err == nil {
				if s := projection.Fold(evs); s.Status.Ended() {
					out[run] = s
					break
				}
			}
			if time.Now().After(deadline) {
				logConsumers(t, st)
				for _, e := range evs {
					t.Logf("%d %s %s %s", e.Seq, e.Type, e.NodeID, e.Time.Format("15:04:05.000"))
				}
				t.Fatalf("run %s did not end in %s (last read error: %v)", run, timeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// CheckExactlyOnce asserts that every run completed, that it has nodes
// ready events, and that no decision or outcome was written twice: one
// ready per node attempt, one invoked per delivery of a work item, one
// routing per activation, one completion; and that the fold took one
// outcome per activation (a redelivered attempt may report twice, and
// only the live delivery's outcome counts).
func CheckExactlyOnce(t testing.TB, st events.Store, runs []string, nodes int) {
	t.Helper()
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s := projection.Fold(evs); s.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s (%v)", run, s.Status, s.Error)
		}
		seen := map[string]int{}
		note := func(r *events.NodeRoutedData) { seen["routed "+r.Key()]++ }
		for _, e := range evs {
			p, _ := e.Payload()
			switch d := p.(type) {
			case *events.NodeReadyData:
				seen["ready "+d.Key()+fmt.Sprint(d.Attempt)]++
				for i := range d.Routed {
					note(&d.Routed[i])
				}
			case *events.NodeInvokedData:
				seen[fmt.Sprintf("invoked %s attempt %d delivery %d", d.Key(), d.Attempt, d.Delivery)]++
			case *events.NodeRoutedData:
				note(d)
			case *events.RunCompletedData:
				seen["completed"]++
			}
		}
		readies := 0
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("run %s: %q written %d times", run, k, n)
			}
			if strings.HasPrefix(k, "ready ") {
				readies++
			}
		}
		if readies != nodes {
			t.Fatalf("run %s: %d ready events, want %d", run, readies, nodes)
		}
	}
}

// logConsumers logs the state of the coordinator's and the default queue's
// consumers: where the work stands when a run does not end.
func logConsumers(t testing.TB, st events.Store) {
	t.Helper()
	for _, name := range []string{"coordinator-0", "coordinator-starts-0", "work-default"} {
		cons, err := eventlog.JetStream(st).Consumer(context.Background(), st.StreamName(), name)
		if err != nil {
			continue
		}
		info, err := cons.Info(context.Background())
		if err != nil {
			continue
		}
		leader := ""
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		t.Logf("consumer %s: delivered %+v ack floor %+v pending %d ack pending %d redelivered %d waiting %d leader %q",
			name, info.Delivered, info.AckFloor, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, leader)
	}
}
