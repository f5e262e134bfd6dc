package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/events"
)

// outcomes lists the fires' outcomes.
func outcomes(st *schedule.State) []string {
	var out []string
	for _, f := range st.Fires {
		out = append(out, f.Outcome)
	}
	return out
}

// complete ends a run as the coordinator would.
func (e *env) complete(run string) {
	e.t.Helper()
	ev, err := events.New(run, run+":completed", time.Time{}, &events.RunCompletedData{})
	if err != nil {
		e.t.Fatal(err)
	}
	// No concurrency check: the start, on the run's decision subject, is
	// the only decision before it.
	if _, err := eventlog.Must(e.st).AppendDecisions(e.ctx, run, events.AnySeq, ev); err != nil {
		e.t.Fatal(err)
	}
}

// TestOverlapPolicies: with no coordinator, a started run never ends, so
// every fire after the first overlaps it.
func TestOverlapPolicies(t *testing.T) {
	e := newEnv(t)
	t.Run("skip", func(t *testing.T) {
		e.create(&schedule.Definition{Name: "skip", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapSkip})
		st := e.waitFires("skip", 3, 10*time.Second)
		if got := strings.Join(outcomes(st)[:3], " "); got != "started skipped-overlap skipped-overlap" {
			t.Fatalf("outcomes %s", got)
		}
		if st.Skipped[schedule.SkippedOverlap] < 2 || !strings.Contains(st.Fires[1].Reason, st.Fires[0].RunID) {
			t.Fatalf("skips not counted or not explained: %+v", st)
		}
	})
	t.Run("allow-all", func(t *testing.T) {
		e.create(&schedule.Definition{Name: "all", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll})
		st := e.waitFires("all", 3, 10*time.Second)
		if got := strings.Join(outcomes(st)[:3], " "); got != "started started started" || len(st.Running) < 3 {
			t.Fatalf("outcomes %s, running %v", got, st.Running)
		}
	})
	t.Run("cancel-other", func(t *testing.T) {
		e.create(&schedule.Definition{Name: "cancel", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapCancelOther})
		st := e.waitFires("cancel", 2, 10*time.Second)
		if got := strings.Join(outcomes(st)[:2], " "); got != "started started" {
			t.Fatalf("outcomes %s", got)
		}
		first := st.Fires[0].RunID
		var req *events.RunCancelRequestedData
		_ = eventlog.Each(e.ctx, e.st, first, 0, 0, func(ev *events.Event) error {
			if ev.Type == events.RunCancelRequested {
				p, _ := ev.Payload()
				req = p.(*events.RunCancelRequestedData)
			}
			return nil
		})
		if req == nil || req.By != "schedule:cancel" {
			t.Fatalf("the first run %s was not asked to cancel: %+v", first, req)
		}
	})
	t.Run("buffer-one", func(t *testing.T) {
		e.create(&schedule.Definition{Name: "buf", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapBufferOne})
		st := e.waitFires("buf", 3, 10*time.Second)
		if got := strings.Join(outcomes(st)[:3], " "); got != "started buffered skipped-overlap" || st.Buffer == nil {
			t.Fatalf("outcomes %s, buffer %v", got, st.Buffer)
		}
		buffered := *st.Buffer
		e.complete(st.Fires[0].RunID)
		// The buffered fire starts once the first run ended.
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _, _ = e.ss.State(e.ctx, "buf")
			var found *schedule.Fire
			for i, f := range st.Fires {
				if f.Outcome == schedule.Started && f.Nominal.Equal(buffered) {
					found = &st.Fires[i]
				}
			}
			if found != nil {
				if d := e.started(found.RunID); !d.Trigger.FireTime.Equal(buffered) {
					t.Fatalf("buffered run's fire time %s, want %s", d.Trigger.FireTime, buffered)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the buffered fire of %s never started: %+v", buffered, st.Fires)
			}
			// Polls: a schedule's fires are a KV value re-read here.
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestCatchUp: fires missed while no coordinator ran are started when one
// comes back if inside the catch-up window, and recorded as skipped
// beyond it; every nominal time is accounted for, once.
func TestCatchUp(t *testing.T) {
	e := newEnv(t)
	stop := e.runner()
	e.create(&schedule.Definition{Name: "cu", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll, CatchupWindow: schedule.Duration(2500 * time.Millisecond)})
	e.waitFires("cu", 1, 10*time.Second)
	// Stop every runner (the one newEnv started too).
	stop()
	e.stopAll()
	before, _, _ := e.ss.State(e.ctx, "cu")
	// Keeps every runner down across several fire times: the outage's duration.
	time.Sleep(6 * time.Second)
	e.runner()
	st := e.waitFires("cu", len(before.Fires)+6, 10*time.Second)
	var late, caught int
	for i, f := range st.Fires {
		if i > 0 && f.Nominal.Sub(st.Fires[i-1].Nominal) != time.Second {
			t.Fatalf("fire times not one second apart (a time lost or taken twice): %+v", st.Fires)
		}
		if i < len(before.Fires) {
			continue
		}
		lateness := f.At.Sub(f.Nominal)
		switch f.Outcome {
		case schedule.SkippedCatchup:
			late++
			if lateness <= 2500*time.Millisecond {
				t.Errorf("fire %s skipped %s late, inside the window", f.Nominal, lateness)
			}
		case schedule.Started:
			if lateness > 2500*time.Millisecond {
				t.Errorf("fire %s started %s late, beyond the window", f.Nominal, lateness)
			}
			if lateness > 1500*time.Millisecond {
				caught++
			}
		}
	}
	if late < 2 || caught < 1 {
		t.Fatalf("%d fires skipped beyond the window, %d caught up inside it; want both: %+v", late, caught, st.Fires)
	}
	if st.Skipped[schedule.SkippedCatchup] != late {
		t.Fatalf("skipped count %v, want %d", st.Skipped, late)
	}
}
