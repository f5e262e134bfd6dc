package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// waitThenLocal waits until the deadline in its input, then runs a
// transform, which the coordinator runs itself: the run needs no worker
// at all.
const waitThenLocal = `
name: waitlocal
nodes:
  - {id: w, type: wait, config: {until: "state.deadline"}}
  - {id: after, type: transform, config: {set: {done: "true"}}}
edges:
  - {from: START, to: w}
  - {from: w, to: after}
  - {from: after, to: END}
`

// startUntil starts n runs of g whose input says until when to wait.
func startUntil(t testing.TB, st events.Store, g *graph.Graph, n int, until time.Time) []string {
	t.Helper()
	var runs []string
	for range n {
		run := events.NewRunID()
		e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
			Input: json.RawMessage(fmt.Sprintf(`{"deadline":%q}`, until.UTC().Format(time.RFC3339Nano))),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(context.Background(), run, 0, e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

// waitAllWaiting waits until node w of every run waits on its timer.
func waitAllWaiting(t testing.TB, st events.Store, runs []string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for _, run := range runs {
		for {
			evs, err := st.Read(context.Background(), run, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			s := projection.Fold(evs)
			if w := s.Nodes["w"]; w != nil && w.Status == projection.NodeWaiting && w.WaitingFor == projection.WaitingForTimer {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("run %s: w is not waiting on its timer: %+v", run, s.Nodes["w"])
			}
			time.Sleep(20 * time.Millisecond) // polling the log
		}
	}
}

// checkWaitedOnce checks that each run's wait ended once, by its timer,
// not before its deadline, and that nothing of w ever went to a worker.
func checkWaitedOnce(t testing.TB, st events.Store, runs []string, until time.Time) {
	t.Helper()
	checkExactlyOnce(t, st, runs, 1) // "after" only: w is never readied
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		waiting, fired := 0, 0
		for _, e := range evs {
			p, _ := e.Payload()
			switch d := p.(type) {
			case *events.NodeWaitingData:
				if d.Node == "w" {
					waiting++
				}
			case *events.TimerFiredData:
				if d.Purpose == projection.PurposeWait {
					fired++
					if e.Stored.Before(until) {
						t.Fatalf("run %s: the wait's timer fired at %s, before %s", run, e.Stored, until)
					}
				}
			case *events.NodeReadyData:
				if d.Node == "w" {
					t.Fatalf("run %s: a wait node went to a queue (%s)", run, d.Queue)
				}
			}
		}
		s := projection.Fold(evs)
		var out struct{ Until time.Time }
		_ = json.Unmarshal(s.Nodes["w"].Output, &out)
		if waiting != 1 || fired != 1 || !out.Until.Equal(until.UTC()) || s.Nodes["w"].Executions != 0 {
			t.Fatalf("run %s: %d waiting, %d fired, until %s (want %s), %d executions", run, waiting, fired, out.Until, until.UTC(), s.Nodes["w"].Executions)
		}
	}
}

// A wait node holds no worker: with no worker running at all, runs wait
// and finish on the coordinator's durable timer alone.
func TestWaitNodeNeedsNoWorker(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	until := time.Now().Add(1500 * time.Millisecond)
	runs := startUntil(t, st, mustGraph(t, waitThenLocal), 10, until)
	waitEnded(t, st, runs, 30*time.Second)
	checkWaitedOnce(t, st, runs, until)
}

// Every process may restart during a wait: the coordinator is killed
// (SIGKILL) while the runs wait, started again and killed again, and the
// wait's time passes while no coordinator runs at all. The timers fire
// into the log meanwhile (they are JetStream message schedules); the
// coordinator started last finds the runs and ends each wait once.
func TestWaitSurvivesCoordinatorKills(t *testing.T) {
	binaries(t) // built before the clock starts: a build takes seconds
	srv, st := testkit.Store(t)
	ctx := context.Background()
	if _, err := eventlog.JetStream(st).CreateConsumer(ctx, st.StreamName(), partitionConsumer(coordinator.ConsumerName("coordinator", 0), 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(6 * time.Second)
	runs := startUntil(t, st, mustGraph(t, waitThenLocal), 20, until)
	kill := func(p *proc) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
	}
	p := spawn(t, srv, "coordinator", "-lease-ttl", "1s")
	waitAllWaiting(t, st, runs, 30*time.Second)
	kill(p) // while every run waits
	p = spawn(t, srv, "coordinator", "-lease-ttl", "1s")
	// Let the second one fold the runs and re-arm their timers, then
	// kill it too, before the wait is over.
	time.Sleep(time.Until(until) / 2) // a point inside the wait
	kill(p)
	if time.Now().After(until) {
		t.Fatalf("the wait was over before the coordinators were killed; the machine is too slow for this test's timing")
	}
	time.Sleep(time.Until(until) + time.Second) // the wait ends while no coordinator runs
	spawn(t, srv, "coordinator", "-lease-ttl", "1s")
	waitEnded(t, st, runs, 60*time.Second)
	checkWaitedOnce(t, st, runs, until)
}

// A run that only waits is indexed as waiting, with what it waits on and
// until when, and as completed once its wait ended.
func TestWaitingRunIsIndexedAsWaiting(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	until := time.Now().Add(3 * time.Second).UTC()
	run := startUntil(t, st, mustGraph(t, waitThenLocal), 1, until)[0]
	get := func(want projection.RunStatus) *readmodel.Summary {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; {
			m, err := readmodel.Open(ctx, eventlog.JetStream(st))
			if err == nil {
				if s, err := m.Get(ctx, run); err == nil && s.Status == want {
					return s
				}
			}
			if time.Now().After(end) {
				t.Fatalf("run %s not indexed as %s in time", run, want)
			}
			time.Sleep(20 * time.Millisecond) // polling the read model
		}
	}
	s := get(projection.RunWaiting)
	if len(s.Waiting) != 1 || s.Waiting[0].Node != "w" || s.Waiting[0].For != projection.WaitingForTimer ||
		s.Waiting[0].Deadline == nil || !s.Waiting[0].Deadline.Equal(until) {
		t.Fatalf("waiting summary %+v; want w until %s", s.Waiting, until)
	}
	if s = get(projection.RunCompleted); len(s.Waiting) != 0 {
		t.Fatalf("completed summary still waits: %+v", s.Waiting)
	}
}
