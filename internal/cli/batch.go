package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// Batches: cancel, terminate, signal and delete act on one run, on
// several run ids, or on every run a query selects (-q, the language of
// 'weft list -q'). A batch of a query asks first (-yes does not), and
// -dry-run says what it would do without doing it. Each run is reported
// as it is done: done, skipped (and why: the run ended, or has not), or
// failed (and why); the command fails when any run failed, and a batch
// interrupted says which runs it did not reach. Runs are acted on at most
// -rate a second, so that a batch of thousands does not flood the log.

// batchFlags are the flags of a command that acts on runs.
type batchFlags struct {
	query  *string
	dryRun *bool
	yes    *bool
	rate   *float64
}

func addBatchFlags(fs *flag.FlagSet) *batchFlags {
	return &batchFlags{
		query:  fs.String("q", "", "act on every run this query selects (the language of 'weft help list'), instead of run ids"),
		dryRun: fs.Bool("dry-run", false, "say which runs it would act on, and do nothing"),
		yes:    fs.Bool("yes", false, "do not ask for confirmation"),
		rate:   fs.Float64("rate", 50, "act on at most this many runs a second (0: no limit)"),
	}
}

// batchOp is what a batch does to each run.
type batchOp struct {
	verb string // "cancel": for the question and the report
	done string // "cancel requested": what a run it was done to reads
	// skip says why the operation does not apply to a run in status st
	// ("" when it does).
	skip func(st projection.RunStatus) string
	// do does it to one run; a "skipped: …" outcome is an error wrapping
	// errSkipped.
	do func(ctx context.Context, run string) (string, error)
	// ask: ask for confirmation even for run ids (delete).
	ask bool
}

// errSkipped marks a run the operation does not apply to.
var errSkipped = errors.New("skipped")

// endedSkip is the skip of an operation on runs that have not ended.
func endedSkip(st projection.RunStatus) string {
	if st.Ended() {
		return "ended (" + string(st) + ")"
	}
	return ""
}

// batchRow is what a batch did, or would do, to one run.
type batchRow struct {
	RunID  string `json:"runId"`
	Status string `json:"status,omitempty"`
	// Result is done, skipped, failed, not done (interrupted), or, for a
	// dry run, would or skip.
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

// batchTarget is a run a batch is to act on, with its status ("" when
// not known).
type batchTarget struct {
	run    string
	status projection.RunStatus
	shown  string
}

// batchPositional checks a batch's run ids against -q: one or the other.
func batchPositional(c *command, bf *batchFlags, ids []string) error {
	switch {
	case *bf.query != "" && len(ids) > 0:
		return &usageError{cmd: c, msg: fmt.Sprintf("give run ids or -q, not both (got %d run id(s) and -q)", len(ids))}
	case *bf.query == "" && len(ids) == 0:
		return &usageError{cmd: c, msg: "want RUN... or -q QUERY"}
	case *bf.rate < 0:
		return &usageError{cmd: c, msg: fmt.Sprintf("-rate: want 0 or more, got %v", *bf.rate)}
	}
	if *bf.query != "" {
		if _, err := readmodel.ParseFilter(*bf.query); err != nil {
			return &usageError{cmd: c, msg: "-q: " + err.Error()}
		}
	}
	return checkRunIDs(c, ids...)
}

// batchTargets finds the runs: the query's (newest first), or the ids
// given with their statuses as the read model, else their logs, say.
func (e *env) batchTargets(cl *client.Client, bf *batchFlags, ids []string) ([]batchTarget, error) {
	if *bf.query != "" {
		sums, err := cl.List(e.ctx, client.WithQuery(*bf.query))
		if err != nil {
			return nil, fmt.Errorf("selecting runs: %w", err)
		}
		out := make([]batchTarget, len(sums))
		for i, s := range sums {
			out[i] = batchTarget{run: s.RunID, status: s.Status, shown: readmodel.ShownStatus(s.Status, s.Terminated)}
		}
		return out, nil
	}
	out := make([]batchTarget, len(ids))
	for i, id := range ids {
		out[i] = batchTarget{run: id}
		if s, err := cl.Summary(e.ctx, id); err == nil {
			out[i].status, out[i].shown = s.Status, readmodel.ShownStatus(s.Status, s.Terminated)
		} else if st, err := cl.Get(e.ctx, id); err == nil {
			out[i].status, out[i].shown = st.Status, shownStatus(st)
		}
	}
	return out, nil
}

// runBatch does op to the runs: the ids, or -q's.
func (e *env) runBatch(c *command, out string, bf *batchFlags, cl *client.Client, ids []string, op batchOp) error {
	targets, err := e.batchTargets(cl, bf, ids)
	if err != nil {
		return err
	}
	apply, skipped := countApplies(op, targets)
	if *bf.dryRun {
		return e.printDryRun(out, op, targets, apply)
	}
	if *bf.query != "" && len(targets) == 0 {
		return e.report(out, op, nil, fmt.Sprintf("no run matches -q %s: nothing to %s", *bf.query, op.verb))
	}
	if apply == 0 {
		// Refused before any question: nothing it applies to.
		rows := make([]batchRow, len(targets))
		for i, t := range targets {
			rows[i] = batchRow{RunID: t.run, Status: t.shown, Result: "skipped", Detail: op.skip(t.status)}
		}
		return e.report(out, op, rows, "")
	}
	if (*bf.query != "" || op.ask) && !*bf.yes {
		if err := e.confirm(op, targets, apply, skipped); err != nil {
			return err
		}
	}
	return e.report(out, op, e.actOnAll(out, op, *bf.rate, targets), "")
}

// countApplies counts the targets op applies to, and those it skips, as
// far as their statuses tell.
func countApplies(op batchOp, targets []batchTarget) (apply, skipped int) {
	for _, t := range targets {
		if t.status != "" && op.skip(t.status) != "" {
			skipped++
		} else {
			apply++
		}
	}
	return apply, skipped
}

// confirm asks whether to do op to the targets (apply of them; skipped
// more match and are skipped), and is an error unless the answer is yes.
func (e *env) confirm(op batchOp, targets []batchTarget, apply, skipped int) error {
	what := fmt.Sprintf("%d run(s)", apply)
	if apply == 1 && len(targets) == 1 {
		what = "run " + targets[0].run
	}
	if skipped > 0 {
		what += fmt.Sprintf(" (%d more match, and are skipped)", skipped)
	}
	fmt.Fprintf(e.stderr, "%s %s? [y/N] ", capitalize(op.verb), what)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("nothing done: not confirmed (-yes skips the question; -dry-run lists the runs)")
	}
	return nil
}

// actOnAll does op to each target in turn, at most rate a second (0: no
// limit), printing each row as it goes (but for json output), and
// returns the rows; the targets not reached when e.ctx ends are not done.
func (e *env) actOnAll(out string, op batchOp, rate float64, targets []batchTarget) []batchRow {
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
	}
	rows := make([]batchRow, 0, len(targets))
	for i, t := range targets {
		row := batchRow{RunID: t.run, Status: t.shown}
		switch {
		case e.ctx.Err() != nil:
			row.Result, row.Detail = "not done", "interrupted"
		case t.status != "" && op.skip(t.status) != "":
			row.Result, row.Detail = "skipped", op.skip(t.status)
		default:
			if tick != nil && i > 0 {
				select {
				case <-tick:
				case <-e.ctx.Done():
				}
			}
			row.Result, row.Detail = e.actOn(op, t.run)
		}
		if out != "json" {
			fmt.Fprintln(e.stdout, rowLine(op, row))
		}
		rows = append(rows, row)
	}
	return rows
}

// actOn does op to one run, and says how it went: done, skipped, failed
// or not done (interrupted), and the detail.
func (e *env) actOn(op batchOp, run string) (result, detail string) {
	detail, err := op.do(e.ctx, run)
	switch {
	case e.ctx.Err() != nil && err != nil:
		return "not done", "interrupted"
	case errors.Is(err, errSkipped), errors.Is(err, client.ErrRunEnded), errors.Is(err, readmodel.ErrNotEnded):
		return "skipped", strings.TrimPrefix(err.Error(), errSkipped.Error()+": ")
	case err != nil:
		return "failed", runError(run, err).Error()
	}
	return "done", detail
}

// rowLine is a batch's line about one run.
func rowLine(op batchOp, r batchRow) string {
	switch r.Result {
	case "done":
		return fmt.Sprintf("run %s: %s", r.RunID, strings.TrimSpace(op.done+" "+r.Detail))
	case "would":
		return fmt.Sprintf("run %s (%s): would %s", r.RunID, orDash(r.Status), op.verb)
	case "skip":
		return fmt.Sprintf("run %s (%s): would skip: %s", r.RunID, orDash(r.Status), r.Detail)
	}
	return fmt.Sprintf("run %s: %s: %s", r.RunID, r.Result, r.Detail)
}

// report ends a batch: its rows as JSON, or a count of each result; an
// error when a run failed or was not reached.
func (e *env) report(out string, op batchOp, rows []batchRow, note string) error {
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Result]++
	}
	if out == "json" {
		if rows == nil {
			rows = []batchRow{}
		}
		if err := e.writeJSON(map[string]any{"operation": op.verb, "runs": rows, "counts": counts}); err != nil {
			return err
		}
	} else if note != "" {
		fmt.Fprintln(e.stdout, note)
	} else {
		if counts["done"]+counts["failed"]+counts["not done"] == 0 {
			for _, r := range rows { // every run skipped: say why
				fmt.Fprintln(e.stdout, rowLine(op, r))
			}
		}
		fmt.Fprintf(e.stdout, "%s: %d done, %d skipped, %d failed", op.verb, counts["done"], counts["skipped"], counts["failed"])
		if n := counts["not done"]; n > 0 {
			fmt.Fprintf(e.stdout, ", %d not done (interrupted)", n)
		}
		fmt.Fprintln(e.stdout)
	}
	if n := counts["failed"] + counts["not done"]; n > 0 {
		return fmt.Errorf("%s: %d of %d run(s) failed or were not reached", op.verb, n, len(rows))
	}
	return nil
}

// printDryRun says what a batch would do.
func (e *env) printDryRun(out string, op batchOp, targets []batchTarget, apply int) error {
	rows := make([]batchRow, len(targets))
	for i, t := range targets {
		rows[i] = batchRow{RunID: t.run, Status: t.shown, Result: "would"}
		if t.status != "" && op.skip(t.status) != "" {
			rows[i].Result, rows[i].Detail = "skip", op.skip(t.status)
		}
	}
	if out == "json" {
		return e.writeJSON(map[string]any{"operation": op.verb, "dryRun": true, "matched": len(targets), "would": apply, "runs": rows})
	}
	for _, r := range rows {
		fmt.Fprintln(e.stdout, rowLine(op, r))
	}
	fmt.Fprintf(e.stdout, "dry run: %d run(s) match, %d would be %s; nothing done\n", len(targets), apply, pastOf(op.verb))
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func pastOf(verb string) string {
	switch verb {
	case "cancel":
		return "cancelled"
	case "signal":
		return "signalled"
	case "delete", "terminate":
		return verb + "d"
	}
	return verb + "ed"
}
