package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

const testGraph = `name: nightly
nodes:
  - id: a
    type: passthrough
edges:
  - from: START
    to: a
  - from: a
    to: END
`

// env is a store, a schedules store and the runners started on it.
type env struct {
	t     *testing.T
	st    events.Store
	ss    *schedule.Store
	ctx   context.Context
	g     *graph.Graph
	stops []context.CancelFunc
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	g, err := graph.Parse([]byte(testGraph), "nightly.yaml", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, ctx: ctx, g: g}
	e.runner() // creates the buckets
	e.waitBuckets()
	return e
}

func (e *env) waitBuckets() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss, err := schedule.Open(e.ctx, eventlog.JetStream(e.st))
		if err == nil {
			e.ss = ss
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal(err)
		}
		// Polls: cond reads KV state that changes without an event to wait for.
		time.Sleep(20 * time.Millisecond)
	}
}

// runner starts a runner; the returned func stops it.
func (e *env) runner() context.CancelFunc {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { _ = schedule.NewRunner(e.st).Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	e.stops = append(e.stops, stop)
	return stop
}

// stopAll stops every runner.
func (e *env) stopAll() {
	for _, s := range e.stops {
		s()
	}
}

func (e *env) create(d *schedule.Definition) {
	e.t.Helper()
	d.SetGraph(e.g)
	now := time.Now()
	if d.CreatedAt.IsZero() {
		d.CreatedAt, d.UpdatedAt = now, now
	}
	if err := e.ss.Create(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
}

// waitFires waits until the schedule's state has n fires, and returns it.
func (e *env) waitFires(name string, n int, within time.Duration) *schedule.State {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, _, err := e.ss.State(e.ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(st.Fires) >= n {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("schedule %s: %d fires after %s, want %d: %+v", name, len(st.Fires), within, n, st)
		}
		// Polls: a schedule's fires are a KV value re-read here.
		time.Sleep(50 * time.Millisecond)
	}
}

// starts counts the run-started events in the log.
func (e *env) starts() int {
	e.t.Helper()
	s, err := eventlog.JetStream(e.st).Stream(e.ctx, e.st.StreamName())
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx, jetstreamSubjects(eventlog.KindFilter(events.RunStarted)))
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

func (e *env) started(run string) *events.RunStartedData {
	e.t.Helper()
	var d *events.RunStartedData
	err := eventlog.Each(e.ctx, e.st, run, 0, 0, func(ev *events.Event) error {
		if ev.Type == events.RunStarted {
			p, err := ev.Payload()
			if err != nil {
				return err
			}
			d = p.(*events.RunStartedData)
			return errors.New("stop")
		}
		return nil
	})
	if d == nil {
		e.t.Fatalf("run %s has no start: %v", run, err)
	}
	return d
}

// TestEveryFiresOncePerTime: two runners (two coordinators) handle an
// @every schedule; each nominal fire time starts exactly one run, whose
// id is derived from it and whose start names the schedule and time.
func TestEveryFiresOncePerTime(t *testing.T) {
	e := newEnv(t)
	e.runner()
	e.create(&schedule.Definition{Name: "tick", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll, Input: json.RawMessage(`{"k":1}`)})
	st := e.waitFires("tick", 3, 10*time.Second)
	seen := map[time.Time]bool{}
	for _, f := range st.Fires {
		if f.Outcome != schedule.Started {
			t.Fatalf("fire %+v, want started", f)
		}
		if seen[f.Nominal] {
			t.Fatalf("nominal time %s handled twice: %+v", f.Nominal, st.Fires)
		}
		seen[f.Nominal] = true
		d := e.started(f.RunID)
		if d.Trigger == nil || d.Trigger.Kind != events.TriggerSchedule || d.Trigger.Name != "tick" || !d.Trigger.FireTime.Equal(f.Nominal) {
			t.Fatalf("run %s start names %+v, want schedule tick at %s", f.RunID, d.Trigger, f.Nominal)
		}
		if string(d.Input) != `{"k":1}` {
			t.Fatalf("input %s", d.Input)
		}
	}
	// Nominal times are a second apart, counted from the creation.
	for i := 1; i < len(st.Fires); i++ {
		if d := st.Fires[i].Nominal.Sub(st.Fires[i-1].Nominal); d != time.Second {
			t.Fatalf("fires %s apart, want 1s: %+v", d, st.Fires)
		}
	}
	// Gives a duplicate fire the time to (wrongly) appear: an absence cannot be waited for.
	time.Sleep(300 * time.Millisecond)
	st, _, _ = e.ss.State(e.ctx, "tick")
	if got := e.starts(); got != len(st.Fires) {
		t.Fatalf("%d runs started for %d fires", got, len(st.Fires))
	}
}

func jetstreamSubjects(filter string) jetstream.StreamInfoOpt {
	return jetstream.WithSubjectFilter(filter)
}

// TestBrokenChainIsSwept: a schedule fires through a chain of one-shot
// message schedules, each armed when the fire before it is handled. With
// the pending fire purged from the timers stream (as a fire lost on a
// loaded cluster leaves it), the chain is broken, and the runners' sweep
// finds the schedule overdue and reconciles it: the missed fire times are
// started, once each, and the schedule fires on.
func TestBrokenChainIsSwept(t *testing.T) {
	e := newEnv(t)
	e.create(&schedule.Definition{Name: "tick", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll, CatchupWindow: schedule.Duration(time.Minute)})
	st := e.waitFires("tick", 2, 10*time.Second)
	ts, err := eventlog.JetStream(e.st).Stream(e.ctx, eventlog.Must(e.st).TimerStream())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{eventlog.ScheduleArmSubject("tick"), eventlog.ScheduleFireSubject("tick")} {
		if err := ts.Purge(e.ctx, jetstream.WithPurgeSubject(s)); err != nil {
			t.Fatal(err)
		}
	}
	broken := len(st.Fires)
	st = e.waitFires("tick", broken+4, 30*time.Second)
	for i, f := range st.Fires {
		if f.Outcome != schedule.Started {
			t.Fatalf("fire %+v, want started", f)
		}
		if i > 0 && f.Nominal.Sub(st.Fires[i-1].Nominal) != time.Second {
			t.Fatalf("fires %s and %s: a fire time lost or taken twice", st.Fires[i-1].Nominal, f.Nominal)
		}
	}
	time.Sleep(300 * time.Millisecond) // the last fire's run, stored before its state
	st, _, _ = e.ss.State(e.ctx, "tick")
	if got := e.starts(); got != len(st.Fires) {
		t.Fatalf("%d runs started for %d fires", got, len(st.Fires))
	}
}
