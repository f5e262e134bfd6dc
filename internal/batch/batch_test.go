package batch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/testkit"
)

// A job is written once, claimed by one process at a time, and run to
// every run exactly once across an interruption and a resume: the store's
// own guarantees, under the CLI's and the UI's.
func TestJobRunsEachRunOnceAcrossAResume(t *testing.T) {
	ctx := context.Background()
	_, js := testkit.Connect(t, testkit.Server(t))
	if _, err := batch.Open(ctx, js, 1, false); !errors.Is(err, batch.ErrUnknownJob) {
		t.Fatalf("opening before any job: %v, want ErrUnknownJob", err)
	}
	s, err := batch.Open(ctx, js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	j := &batch.Job{ID: "job-1", Op: "cancel", Runs: []string{"r1", "r2", "r3", "r4", "r5"}, Created: time.Now().UTC()}
	if _, err := s.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, j); !errors.Is(err, batch.ErrJobExists) {
		t.Fatalf("creating it again: %v, want ErrJobExists", err)
	}
	if _, err := s.Create(ctx, &batch.Job{ID: "a.b"}); err == nil {
		t.Fatal("a job id with a dot was taken")
	}

	// The first process does two runs, then is interrupted.
	var mu sync.Mutex
	done := map[string]int{}
	runCtx, stop := context.WithCancel(ctx)
	do := func(ctx context.Context, run string) (string, string) {
		mu.Lock()
		defer mu.Unlock()
		done[run]++
		if len(done) == 2 {
			stop()
		}
		return batch.Done, ""
	}
	first, rev, err := s.Claim(ctx, "job-1", "proc-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Claim(ctx, "job-1", "proc-b", false); !errors.Is(err, batch.ErrRunning) {
		t.Fatalf("a second process claiming a running job: %v, want ErrRunning", err)
	}
	tally, err := s.Run(runCtx, first, rev, do, nil)
	if !errors.Is(err, context.Canceled) || tally.Done != 2 || tally.Left() != 3 {
		t.Fatalf("interrupted run: tally %+v, err %v; want 2 done, 3 left, cancelled", tally, err)
	}
	got, _, err := s.Job(ctx, "job-1")
	if err != nil || got.State(time.Now()) == "finished" {
		t.Fatalf("after the interruption: %+v, %v", got, err)
	}

	// Another process takes it over (force: the first's heartbeat is
	// fresh) and does the rest, each run once.
	second, rev, err := s.Claim(ctx, "job-1", "proc-b", true)
	if err != nil {
		t.Fatal(err)
	}
	if second.Resumed != 1 || second.Owner != "proc-b" {
		t.Fatalf("taken over: resumed %d, owner %q", second.Resumed, second.Owner)
	}
	var seen []batch.Tally
	tally, err = s.Run(ctx, second, rev, do, func(_ batch.Outcome, t batch.Tally) { seen = append(seen, t) })
	if err != nil || tally.Done != 5 || tally.Left() != 0 || len(seen) != 3 {
		t.Fatalf("resumed run: tally %+v, %d progress calls, err %v; want 5 done and 3 calls", tally, len(seen), err)
	}
	for _, r := range j.Runs {
		if done[r] != 1 {
			t.Errorf("run %s done %d times, want once (%v)", r, done[r], done)
		}
	}
	outs, err := s.Outcomes(ctx, "job-1")
	if err != nil || len(outs) != 5 {
		t.Fatalf("outcomes %v, %v", outs, err)
	}
	final, _, err := s.Job(ctx, "job-1")
	if err != nil || final.State(time.Now()) != "finished" || batch.TallyOf(final, outs).Done != 5 {
		t.Fatalf("final job %+v, %v", final, err)
	}
	// A finished job claimed again is returned as it is, and runs nothing.
	again, rev, err := s.Claim(ctx, "job-1", "proc-c", false)
	if err != nil || again.Owner != "proc-b" {
		t.Fatalf("claiming a finished job: owner %q, %v", again.Owner, err)
	}
	_ = rev
	jobs, err := s.List(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" {
		t.Fatalf("list: %v, %v", jobs, err)
	}
	if _, _, err := s.Job(ctx, "nope"); !errors.Is(err, batch.ErrUnknownJob) {
		t.Fatalf("an unknown job: %v, want ErrUnknownJob", err)
	}
}

// Two processes claiming one interrupted job at once: one wins, the other
// is told the job runs elsewhere (the claim is a compare-and-set).
func TestClaimIsACompareAndSet(t *testing.T) {
	ctx := context.Background()
	_, js := testkit.Connect(t, testkit.Server(t))
	s, err := batch.Open(ctx, js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, &batch.Job{ID: "job-2", Op: "delete", Runs: []string{"r1"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = s.Claim(ctx, "job-2", "proc-"+string(rune('a'+i)), false)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won, want exactly 1: %v", won, errs)
	}
}
