package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/batchops"
	"github.com/weft-dev/weft/pkg/projection"
)

func nowUTC() time.Time { return time.Now().UTC() }

// op is how job j reads in the CLI's batch reports and questions.
func (s *jobConn) op(j *batch.Job) batchOp {
	bop := batchOp{verb: j.Op, done: pastOf(j.Op), skip: endedSkip}
	switch j.Op {
	case "cancel", "terminate":
		bop.done = j.Op + " requested"
	case "signal":
		bop.done = "signal sent to node " + j.Args["node"]
	case "reset":
		bop.done = "reset to node " + j.Args["node"]
		bop.skip = func(projection.RunStatus) string { return "" }
	case "delete":
		bop.ask = true
		bop.skip = func(st projection.RunStatus) string {
			if !st.Ended() {
				return "has not ended (" + string(st) + ")"
			}
			return ""
		}
	}
	return bop
}

// do is job j's operation on one run (package batchops).
func (s *jobConn) do(j *batch.Job) batch.Do { return batchops.Do(j, s.cl, s.store) }

// bar shows a job's progress: a bar redrawn in place on a terminal, a
// line per run elsewhere, nothing for -o json.
type bar struct {
	e     *env
	op    batchOp
	json  bool
	tty   bool
	drawn bool
}

func (e *env) progressBar(out string, op batchOp) *bar {
	return &bar{e: e, op: op, json: out == "json", tty: terminal(e.stdout)}
}

func (b *bar) show(o batch.Outcome, t batch.Tally) {
	switch {
	case b.json:
	case !b.tty:
		fmt.Fprintln(b.e.stdout, rowLine(b.op, batchRow{RunID: o.Run, Result: o.Result, Detail: o.Detail}))
	default:
		const width = 30
		n := t.Total - t.Left()
		filled := width * n / max(t.Total, 1)
		fmt.Fprintf(b.e.stdout, "\r[%s%s] %d/%d  %d done, %d skipped, %d failed\x1b[K",
			strings.Repeat("#", filled), strings.Repeat(" ", width-filled), n, t.Total, t.Done, t.Skipped, t.Failed)
		b.drawn = true
	}
}

func (b *bar) end() {
	if b.drawn {
		fmt.Fprintln(b.e.stdout)
	}
}
