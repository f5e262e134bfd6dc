package cli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/batch"
)

// batchByID is 'weft batch resume ID' and 'weft batch describe ID'.
func batchByID(verb string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		force := new(bool)
		if verb == "resume" {
			force = fs.Bool("force", false, "take the job over even when another process seems to run it")
		}
		check := func(e *env, x *call) error {
			if err := batch.CheckID(x.args[0]); err != nil {
				return &usageError{cmd: x.cmd, msg: err.Error()}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			s, err := e.openJobs(x.cmd, x.nats, verb == "resume")
			if err != nil {
				return err
			}
			defer s.close()
			if verb == "resume" {
				return e.runJob(s, x.out, x.args[0], *force)
			}
			return e.describeJobCmd(s, x.out, x.args[0])
		}}
	}
}

// describeJobCmd is 'weft batch describe ID' once connected.
func (e *env) describeJobCmd(s *jobConn, out, id string) error {
	if s.jobs == nil {
		return fmt.Errorf("batch job %s: %w (none was ever made here)", id, batch.ErrUnknownJob)
	}
	j, _, err := s.jobs.Job(e.ctx, id)
	if err != nil {
		return err
	}
	outs, err := s.jobs.Outcomes(e.ctx, j.ID)
	if err != nil {
		return err
	}
	if out == "json" {
		return e.writeJSON(map[string]any{"job": j, "state": j.State(time.Now()), "tally": batch.TallyOf(j, outs), "runs": jobRows(j, outs)})
	}
	describeJob(e.stdout, j, outs, time.Now())
	return nil
}

// describeJob prints a job's definition, state and each run's outcome.
func describeJob(w io.Writer, j *batch.Job, outs map[string]batch.Outcome, now time.Time) {
	t := batch.TallyOf(j, outs)
	tw := table(w)
	fmt.Fprintf(tw, "job:\t%s\n", j.ID)
	fmt.Fprintf(tw, "operation:\t%s\n", jobOperation(j))
	if j.Query != "" {
		fmt.Fprintf(tw, "query:\t%s\n", j.Query)
	}
	fmt.Fprintf(tw, "started by:\t%s, %s\n", orDash(j.By), ago(j.Created, now))
	rate := "no limit"
	if j.Rate > 0 {
		rate = fmt.Sprintf("%g runs a second", j.Rate)
	}
	fmt.Fprintf(tw, "rate:\t%s\n", rate)
	fmt.Fprintf(tw, "state:\t%s\n", jobState(j, t, now))
	fmt.Fprintf(tw, "runs:\t%d: %d done, %d skipped, %d failed, %d not reached\n", t.Total, t.Done, t.Skipped, t.Failed, t.Left())
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "RUN\tRESULT\tAT\tDETAIL")
	for _, r := range j.Runs {
		o, ok := outs[r]
		if !ok {
			fmt.Fprintf(tw, "%s\tnot reached\t-\t-\n", r)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r, o.Result, o.At.Local().Format(time.TimeOnly), orDash(o.Detail))
	}
	_ = tw.Flush()
}

// jobOperation is a job's operation with its arguments.
func jobOperation(j *batch.Job) string {
	keys := make([]string, 0, len(j.Args))
	for k := range j.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{j.Op}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("-%s %s", k, j.Args[k]))
	}
	return strings.Join(parts, " ")
}

// jobState says whether a job finished, runs, or was interrupted (and how
// to resume it).
func jobState(j *batch.Job, t batch.Tally, now time.Time) string {
	switch j.State(now) {
	case "finished":
		s := "finished " + ago(j.Finished, now)
		if j.Resumed > 0 {
			s += fmt.Sprintf(", resumed %d time(s)", j.Resumed)
		}
		return s
	case "running":
		return fmt.Sprintf("running in %s (heard from %s ago)", j.Owner, duration(now.Sub(j.Heartbeat)))
	}
	if j.Heartbeat.IsZero() {
		return "not started; 'weft batch resume " + j.ID + "' starts it"
	}
	return fmt.Sprintf("interrupted (%s last heard from %s ago), %d run(s) not reached: 'weft batch resume %s' does the rest",
		j.Owner, duration(now.Sub(j.Heartbeat)), t.Left(), j.ID)
}

// batchList is 'weft batch list': every job, newest first.
func batchList(fs *flag.FlagSet) action {
	return action{do: func(e *env, x *call) error {
		s, err := e.openJobs(x.cmd, x.nats, false)
		if err != nil {
			return err
		}
		defer s.close()
		return e.listJobs(s, x.out)
	}}
}

// listJobs prints every job of s, newest first.
func (e *env) listJobs(s *jobConn, out string) error {
	var err error
	var jobs []*batch.Job
	if s.jobs != nil {
		if jobs, err = s.jobs.List(e.ctx); err != nil {
			return err
		}
	}
	now := time.Now()
	type row struct {
		*batch.Job
		State string      `json:"state"`
		Tally batch.Tally `json:"tally"`
	}
	rows := make([]row, len(jobs))
	for i, j := range jobs {
		outs, err := s.jobs.Outcomes(e.ctx, j.ID)
		if err != nil {
			return err
		}
		rows[i] = row{j, j.State(now), batch.TallyOf(j, outs)}
	}
	if out == "json" {
		return e.writeJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no batch jobs")
		return nil
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "JOB\tOPERATION\tSTATE\tRUNS\tDONE\tSKIPPED\tFAILED\tLEFT\tSTARTED\tBY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", r.ID, r.Op, r.State, r.Tally.Total, r.Tally.Done,
			r.Tally.Skipped, r.Tally.Failed, r.Tally.Left(), duration(now.Sub(r.Created))+" ago", orDash(r.By))
	}
	return tw.Flush()
}
