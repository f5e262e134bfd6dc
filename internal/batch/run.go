package batch

import (
	"context"
	"fmt"
	"time"
)

// HeartbeatEvery is how often a process running a job says so.
const HeartbeatEvery = 2 * time.Second

// StaleAfter is how long after its last heartbeat a job that has not
// finished counts as interrupted, and another process may take it up.
const StaleAfter = 5 * HeartbeatEvery

// Tally counts a job's outcomes.
type Tally struct {
	Done, Skipped, Failed, Total int
}

// Left is how many runs have no outcome yet.
func (t Tally) Left() int { return t.Total - t.Done - t.Skipped - t.Failed }

func (t *Tally) add(result string) {
	switch result {
	case Done:
		t.Done++
	case Skipped:
		t.Skipped++
	default:
		t.Failed++
	}
}

// TallyOf counts the outcomes of job j.
func TallyOf(j *Job, outs map[string]Outcome) Tally {
	t := Tally{Total: len(j.Runs)}
	for _, r := range j.Runs {
		if o, ok := outs[r]; ok {
			t.add(o.Result)
		}
	}
	return t
}

// State says where a job is: finished, running (a fresh heartbeat) or
// interrupted.
func (j *Job) State(now time.Time) string {
	switch {
	case !j.Finished.IsZero():
		return "finished"
	case now.Sub(j.Heartbeat) < StaleAfter:
		return "running"
	}
	return "interrupted"
}

// Claim takes job id up for owner: its owner and heartbeat are set, by
// compare-and-set. A job another owner runs now (a fresh heartbeat) is
// ErrRunning, unless force. A finished job is returned as it is.
func (s *Store) Claim(ctx context.Context, id, owner string, force bool) (*Job, uint64, error) {
	j, rev, err := s.Job(ctx, id)
	if err != nil || !j.Finished.IsZero() {
		return j, rev, err
	}
	now := time.Now()
	if j.Owner != owner && j.State(now) == "running" && !force {
		return nil, 0, fmt.Errorf("batch job %s: %w (%s, last heard from %s ago; -force takes it over)",
			id, ErrRunning, j.Owner, now.Sub(j.Heartbeat).Round(time.Millisecond))
	}
	if !j.Heartbeat.IsZero() {
		j.Resumed++
	}
	j.Owner, j.Heartbeat = owner, now
	rev, err = s.update(ctx, j, rev)
	if err != nil {
		return nil, 0, err
	}
	return j, rev, nil
}

// Do does the operation to one run and says how it went (Done, Skipped
// or Failed, and the detail). It must be idempotent by the job and run:
// a run whose outcome was not written before a crash is done again.
type Do func(ctx context.Context, run string) (result, detail string)

// Run does the claimed job (rev is the revision Claim returned) to every
// run that has no outcome yet, at most j.Rate a second, writing each
// outcome as it comes and calling progress with it and the tally so far,
// then marks the job finished. It returns the tally; when ctx ends first,
// the runs not reached are left for a resume (Tally.Left).
func (s *Store) Run(ctx context.Context, j *Job, rev uint64, do Do, progress func(Outcome, Tally)) (Tally, error) {
	outs, err := s.Outcomes(ctx, j.ID)
	if err != nil {
		return Tally{}, err
	}
	t := TallyOf(j, outs)
	r := &runner{s: s, j: j, rev: rev, beat: time.Now()}
	if j.Rate > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / j.Rate))
		defer tick.Stop()
		r.tick = tick.C
	}
	first := true
	for _, run := range j.Runs {
		if _, ok := outs[run]; ok {
			continue
		}
		if err := r.pace(ctx, first); err != nil {
			return t, err
		}
		first = false
		res, detail := do(ctx, run)
		if ctx.Err() != nil && res != Done {
			return t, ctx.Err() // not reached: left for a resume
		}
		o := Outcome{Run: run, Result: res, Detail: detail, At: time.Now().UTC()}
		if err := s.Record(context.WithoutCancel(ctx), j.ID, o); err != nil {
			return t, fmt.Errorf("batch job %s: recording run %s (%s): %w", j.ID, run, res, err)
		}
		t.add(res)
		if progress != nil {
			progress(o, t)
		}
	}
	j.Finished, j.Heartbeat = time.Now().UTC(), time.Now().UTC()
	if _, err := s.update(ctx, j, r.rev); err != nil {
		return t, err
	}
	return t, nil
}

// runner paces a job and keeps its heartbeat.
type runner struct {
	s    *Store
	j    *Job
	rev  uint64
	beat time.Time
	tick <-chan time.Time
}

// pace waits for the rate's next tick (not before the first run),
// renewing the heartbeat while it waits and before each run.
func (r *runner) pace(ctx context.Context, first bool) error {
	hb := time.NewTicker(HeartbeatEvery)
	defer hb.Stop()
	for !first && r.tick != nil {
		select {
		case <-r.tick:
			first = true
		case <-hb.C:
			if err := r.heartbeat(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if time.Since(r.beat) >= HeartbeatEvery {
		return r.heartbeat(ctx)
	}
	return ctx.Err()
}

func (r *runner) heartbeat(ctx context.Context) error {
	r.j.Heartbeat = time.Now().UTC()
	rev, err := r.s.update(ctx, r.j, r.rev)
	if err != nil {
		return err
	}
	r.rev, r.beat = rev, time.Now()
	return nil
}
