package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestReadsOutliveLostAnswers: a read of the schedules bucket whose
// answer is lost is asked again after a bounded try, instead of waiting
// out its caller's whole deadline (TestScheduleFiresOnceThroughKills
// stalled so: a describe of the schedule, given the drill's four
// minutes, waited through them for one lost answer while the
// coordinators kept firing). Opening the bucket, reading a definition
// and reading its state each lose their first answer, under a deadline
// of a minute; each is answered after about one try; so is a delete of
// the schedule (a delete marker twice is one delete). A read that no
// answer comes to, with no deadline, fails after readPatience.
func TestReadsOutliveLostAnswers(t *testing.T) {
	e := newEnv(t)
	e.create(&schedule.Definition{Name: "tick", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll})
	e.waitFires("tick", 1, 10*time.Second)
	const try, patience = 500 * time.Millisecond, 3 * time.Second
	defer schedule.SetReadTimes(try, patience)()
	l := testkit.NewLosingJetStream(eventlog.JetStream(e.st))
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	began := time.Now()
	ss, err := schedule.Open(ctx, l)
	if err != nil {
		t.Fatalf("opening the bucket, its first answer lost: %v (after %s)", err, time.Since(began))
	}
	d, _, err := ss.Get(ctx, "tick")
	if err != nil || d.Name != "tick" {
		t.Fatalf("reading the definition, its first answer lost: %+v, %v (after %s)", d, err, time.Since(began))
	}
	st, _, err := ss.State(ctx, "tick")
	if err != nil || len(st.Fires) == 0 {
		t.Fatalf("reading the state, its first answer lost: %+v, %v (after %s)", st, err, time.Since(began))
	}
	took := time.Since(began)
	if l.Lost() != 3 {
		t.Fatalf("%d answers lost, want 3 (opening, the definition, the state)", l.Lost())
	}
	// Three lost tries and three answered reads; the deadline was a
	// minute away.
	if took > 3*try+10*time.Second {
		t.Fatalf("the reads took %s with 3 answers lost and tries of %s", took, try)
	}
	t.Logf("3 reads, each with its first answer lost, in %s", took.Round(time.Millisecond))

	// A delete, its answer lost: asked again, done once.
	began = time.Now()
	if err := ss.Delete(ctx, "tick"); err != nil {
		t.Fatalf("deleting, its first answer lost: %v (after %s)", err, time.Since(began))
	}
	if _, _, err := e.ss.Get(ctx, "tick"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("after the delete: %v, want not found", err)
	}
	if l.Lost() != 4 {
		t.Fatalf("%d answers lost, want 4", l.Lost())
	}

	// A read none answers, its caller with no deadline: it fails after
	// readPatience rather than asking forever.
	l.Always = true
	began = time.Now()
	if _, _, err := ss.Get(context.Background(), "tick"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read never answered, with no deadline: %v, want the deadline exceeded", err)
	}
	if took := time.Since(began); took < patience || took > patience+5*time.Second {
		t.Fatalf("a read never answered gave up after %s, want %s", took, patience)
	}
}
