package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

var cmdBatch = &command{
	name:    "batch",
	args:    "cancel|terminate|signal|reset|delete|resume|list|describe ...",
	summary: "a durable batch job over runs: resumable after a crash, its progress readable",
	help: `A batch job does one operation to many runs, and is itself durable: its
definition (the operation, the query or run ids, the runs they resolved
to, the rate, who started it) and each run's outcome (done, skipped and
why, failed and why) are written to JetStream (the KV bucket weft-batches)
as it goes, so that a job interrupted (its process killed) is resumed
where it stopped, and no run has the operation applied twice.

  weft batch cancel    -q QUERY | RUN...  [-reason TEXT]
  weft batch terminate -q QUERY | RUN...  [-reason TEXT]
  weft batch signal    -q QUERY | RUN...  -node NODE [-data JSON]
  weft batch reset     -q QUERY | RUN...  -node NODE
  weft batch delete    -q QUERY | RUN...  [-archive WHERE]
  weft batch resume ID [-force]
  weft batch list
  weft batch describe ID

-q takes the language of 'weft help list'; -dry-run says which runs it
would act on and writes nothing; a batch asks first (-yes does not);
-rate caps runs a second (default 50); -id names the job (default a new
id, printed first): running the same command with an -id whose job did
not finish resumes that job. 'reset' forks each run from just before
-node was last activated and cancels the run (as 'weft reset -to').

Each operation is idempotent by the job and the run: a cancel or
terminate request's id is derived from the run; a signal's id is
"batch-ID"; a reset's new run id is derived from the job and the run.
On a terminal, a progress bar; otherwise a line per run.

Batch jobs need the admin's credentials under the roles (they write the
weft-batches bucket); list and describe need only the client's.`,
	run: func(e *env, c *command, args []string) error {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
				fs, _ := e.flagSet(c)
				e.printHelp(c, fs)
				return flag.ErrHelp
			}
			return &usageError{cmd: c, msg: "want an operation (cancel, terminate, signal, reset, delete), or resume, list or describe"}
		}
		sub := &command{name: "batch " + args[0], help: c.help}
		switch args[0] {
		case "cancel", "terminate", "signal", "reset", "delete":
			sub.args = "RUN... | -q QUERY"
			return e.skeleton(sub.with(0, -1, connSelf, batchStart(args[0])), args[1:])
		case "resume", "describe":
			sub.args = "ID"
			return e.skeleton(sub.with(1, 1, connSelf, batchByID(args[0])), args[1:])
		case "list":
			return e.skeleton(sub.with(0, 0, connSelf, batchList), args[1:])
		}
		return &usageError{cmd: c, msg: fmt.Sprintf("unknown batch command %q (want cancel, terminate, signal, reset, delete, resume, list or describe)", args[0])}
	},
}

// jobFlags are a batch job's flags beyond batchFlags.
type jobFlags struct {
	id, reason, node, data, archive *string
	force                           *bool
}

func addJobFlags(fs *flag.FlagSet) *jobFlags {
	return &jobFlags{
		id:      fs.String("id", "", "the job's id (default: a new one); an unfinished job of this id is resumed"),
		reason:  fs.String("reason", "", "cancel, terminate: why, recorded in each run's log (with the job's id)"),
		node:    fs.String("node", "", "signal: the node to signal; reset: the node to reset each run to"),
		data:    fs.String("data", "", "signal: the signal's data, JSON or @FILE"),
		archive: fs.String("archive", "none", "delete: archive each run first (none, an Object Store bucket, obj:NAME or dir:PATH)"),
		force:   fs.Bool("force", false, "take the job over even when another process seems to run it"),
	}
}

// check says what is wrong with the flags for op.
func (jf *jobFlags) check(c *command, op string) error {
	switch {
	case batch.Takes(op, "node") && *jf.node == "":
		return &usageError{cmd: c, msg: fmt.Sprintf("want -node NODE: the node to %s each run %s", op, map[string]string{"reset": "to", "signal": "of"}[op])}
	case !batch.Takes(op, "node") && *jf.node != "":
		return &usageError{cmd: c, msg: "-node is for signal and reset only"}
	case !batch.Takes(op, "data") && *jf.data != "":
		return &usageError{cmd: c, msg: "-data is for signal only"}
	case !batch.Takes(op, "reason") && *jf.reason != "":
		return &usageError{cmd: c, msg: "-reason is for cancel and terminate only"}
	case *jf.id != "":
		if err := batch.CheckID(*jf.id); err != nil {
			return &usageError{cmd: c, msg: "-id: " + err.Error()}
		}
	}
	return nil
}

// args are the job's recorded arguments.
func (jf *jobFlags) args(op string, data []byte) map[string]string {
	a := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			a[k] = v
		}
	}
	set("reason", *jf.reason)
	set("node", *jf.node)
	set("data", string(data))
	if batch.Takes(op, "archive") {
		set("archive", *jf.archive)
	}
	return a
}

// batchStart makes a batch job of op over -q's runs or the ids, or
// resumes the job -id names, and runs it.
func batchStart(op string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		bf := addBatchFlags(fs)
		jf := addJobFlags(fs)
		var data []byte
		check := func(e *env, x *call) (err error) {
			if err := batchPositional(x.cmd, bf, x.args); err != nil {
				return err
			}
			if err := jf.check(x.cmd, op); err != nil {
				return err
			}
			data, err = e.jsonArg(x.cmd, "data", *jf.data)
			return err
		}
		return action{check: check, do: func(e *env, x *call) error {
			s, err := e.openJobs(x.cmd, x.nats, !*bf.dryRun)
			if err != nil {
				return err
			}
			defer s.close()
			if *jf.id != "" && !*bf.dryRun {
				if found, err := e.resumeNamed(s, x.out, op, *jf.id, *jf.force); found || err != nil {
					return err
				}
			}
			j := &batch.Job{ID: *jf.id, Op: op, Query: *bf.query, Args: jf.args(op, data), Rate: *bf.rate, By: s.cl.Identity()}
			if j.ID == "" {
				j.ID = "b-" + events.NewRunID()
			}
			made, err := e.makeJob(s, x.out, bf, j, x.args)
			if err != nil || !made {
				return err
			}
			return e.runJob(s, x.out, j.ID, *jf.force)
		}}
	}
}

// resumeNamed resumes job id when it exists (found), refusing one of
// another operation.
func (e *env) resumeNamed(s *jobConn, out, op, id string, force bool) (found bool, err error) {
	j, _, err := s.jobs.Job(e.ctx, id)
	switch {
	case errors.Is(err, batch.ErrUnknownJob):
		return false, nil
	case err != nil:
		return true, err
	case j.Op != op:
		return true, fmt.Errorf("batch job %s is a %s, not a %s: give another -id", j.ID, j.Op, op)
	}
	fmt.Fprintf(e.stderr, "batch job %s exists: resuming it\n", j.ID)
	return true, e.runJob(s, out, j.ID, force)
}

// makeJob resolves the job's runs, says what a dry run would do, asks for
// confirmation, and writes the job (made); a dry run, nothing matched or
// no confirmation make none.
func (e *env) makeJob(s *jobConn, out string, bf *batchFlags, j *batch.Job, ids []string) (made bool, err error) {
	bop := s.op(j)
	targets, err := e.batchTargets(s.cl, bf, ids)
	if err != nil {
		return false, err
	}
	apply, skipped := countApplies(bop, targets)
	switch {
	case *bf.dryRun:
		return false, e.printDryRun(out, bop, targets, apply)
	case len(targets) == 0:
		return false, e.report(out, bop, nil, fmt.Sprintf("no run matches -q %s: nothing to %s, no job made", *bf.query, j.Op))
	case !*bf.yes:
		if err := e.confirm(bop, targets, apply, skipped); err != nil {
			return false, err
		}
	}
	for _, t := range targets {
		j.Runs = append(j.Runs, t.run)
	}
	j.Created = nowUTC()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if _, err = s.jobs.Create(ctx, j); err != nil && !errors.Is(err, batch.ErrJobExists) {
		// A user who may not write the bucket gets no answer at all.
		err = fmt.Errorf("%w (batch jobs write the KV bucket %s, which under Weft's roles only the admin may: connect with the admin's credentials)", err, batch.Bucket)
	}
	return err == nil, err
}

// jobConn is a batch command's connection: the client (as the admin, who
// alone writes batch jobs under the roles) and the jobs' store.
type jobConn struct {
	store events.Store
	cl    *client.Client
	jobs  *batch.Store
	close func()
}

// openJobs connects as the admin (as the client when reading only) and
// opens the jobs' bucket, making it when create.
func (e *env) openJobs(c *command, cfg *natsconn.Config, create bool) (*jobConn, error) {
	role := natsconn.RoleAdmin
	if !create {
		role = natsconn.RoleClient
	}
	store, opts, closeConn, err := e.connectStoreAs(c, cfg, false, role)
	if err != nil {
		return nil, err
	}
	js := eventlog.JetStream(store)
	replicas, _ := setup.StreamReplicas(e.ctx, js, store.StreamName()) // the bucket's, as the events stream's
	jobs, err := batch.Open(e.ctx, js, replicas, create)
	if err != nil && (create || !errors.Is(err, batch.ErrUnknownJob)) {
		closeConn()
		return nil, err
	}
	return &jobConn{store: store, cl: client.New(store, opts...), jobs: jobs, close: closeConn}, nil
}

// owner names this process, for a job's owner.
func owner() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}

// runJob claims job id and runs it to its end, showing its progress, then
// reports on every run of it.
func (e *env) runJob(s *jobConn, out, id string, force bool) error {
	j, rev, err := s.jobs.Claim(e.ctx, id, owner(), force)
	if err != nil {
		return err
	}
	bop := s.op(j)
	if out != "json" {
		what := j.Op + " of " + fmt.Sprint(len(j.Runs)) + " run(s)"
		if j.Resumed > 0 {
			what += ", resumed"
		}
		fmt.Fprintf(e.stdout, "batch job %s: %s ('weft batch describe %s' shows its progress)\n", j.ID, what, j.ID)
	}
	if j.Finished.IsZero() {
		bar := e.progressBar(out, bop)
		_, err = s.jobs.Run(e.ctx, j, rev, s.do(j), bar.show)
		bar.end()
		if err != nil && e.ctx.Err() == nil {
			return err
		}
	}
	outs, rerr := s.jobs.Outcomes(context.WithoutCancel(e.ctx), j.ID)
	if rerr != nil {
		return rerr
	}
	rows := jobRows(j, outs)
	if err := e.report(out, bop, rows, ""); err != nil {
		if e.ctx.Err() != nil {
			return fmt.Errorf("%w; 'weft batch resume %s' does the rest", err, j.ID)
		}
		return err
	}
	return nil
}

// jobRows are a job's runs as batch rows: their outcomes, or not done.
func jobRows(j *batch.Job, outs map[string]batch.Outcome) []batchRow {
	rows := make([]batchRow, len(j.Runs))
	for i, r := range j.Runs {
		rows[i] = batchRow{RunID: r, Result: "not done", Detail: "not reached yet"}
		if o, ok := outs[r]; ok {
			rows[i].Result, rows[i].Detail = o.Result, o.Detail
		}
	}
	return rows
}
