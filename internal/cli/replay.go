package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/replay"
)

var cmdReplay = &command{
	name:    "replay",
	args:    "RUN...",
	summary: "check recorded runs against a changed graph (-graph FILE)",
	help: `Re-runs the decision engine over the recorded logs of the given runs (or,
with -all, of every run of the graph's name, -status narrowing them) with
the graph in -graph, and reports per run whether every decision the run
recorded is still what the new graph decides; if not, the first event where
they differ, what was recorded, what the graph decides, and the fields that
differ. For a run still going, it also compares what each graph decides
next. Use it before deploying a changed graph: a run that differs would
take another path, or get stuck, under the new graph. Nothing is written.
Exits 1 when any run differs.`,
	max: -1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		graphFile := fs.String("graph", "", "the changed graph file (required)")
		types := typesFlag(fs)
		all := fs.Bool("all", false, "check every run of the graph's name (see -status)")
		status := fs.String("status", "", "with -all, only runs in these statuses, comma separated (running, which includes waiting; waiting; cancelling, completed, failed, cancelled)")
		var statuses []projection.RunStatus // -status
		var g *graph.Graph                  // -graph
		check := func(e *env, x *call) (err error) {
			c, runs := x.cmd, x.args
			if *graphFile == "" {
				return &usageError{cmd: c, msg: "-graph: want the changed graph file"}
			}
			if *all == (len(runs) > 0) {
				return &usageError{cmd: c, msg: "want RUN... or -all (one of them)"}
			}
			if *status != "" {
				if !*all {
					return &usageError{cmd: c, msg: "-status goes with -all"}
				}
				for s := range strings.SplitSeq(*status, ",") {
					rs := projection.RunStatus(strings.TrimSpace(s))
					switch rs {
					case projection.RunRunning, projection.RunWaiting, projection.RunCancelling, projection.RunCompleted, projection.RunFailed, projection.RunCancelled:
					default:
						return &usageError{cmd: c, msg: fmt.Sprintf("-status: unknown status %q (want running, waiting, cancelling, completed, failed or cancelled)", s)}
					}
					statuses = append(statuses, rs)
				}
			}
			if g, err = loadGraph(*graphFile, *types); err != nil {
				return graphError(*graphFile, err)
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			runs, cl := x.args, x.cl
			if *all {
				list, err := cl.List(e.ctx, client.WithDetails(), client.WithStatus(statuses...))
				if err != nil {
					return err
				}
				for _, r := range list {
					if r.Graph == g.Definition().Name {
						runs = append(runs, r.RunID)
					}
				}
			}
			results := make([]replay.Result, 0, len(runs))
			for _, run := range runs {
				res, err := cl.Replay(e.ctx, g, run)
				if err != nil {
					return runError(run, err)
				}
				results = append(results, res...)
			}
			bad := 0
			for i := range results {
				if !results[i].OK() {
					bad++
				}
			}
			if x.out == "json" {
				if err := e.writeJSON(results); err != nil {
					return err
				}
			} else {
				e.printReplay(g.Definition().Name, results)
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d runs decide differently on graph %s", bad, len(results), *graphFile)
			}
			return nil
		}}
	},
}

func (e *env) printReplay(graphName string, results []replay.Result) {
	if len(results) == 0 {
		fmt.Fprintf(e.stdout, "no runs of graph %s to check\n", graphName)
		return
	}
	for _, r := range results {
		if r.OK() {
			fmt.Fprintf(e.stdout, "%s: ok (%d events, %d decisions the same)\n", r.RunID, r.Events, r.Decisions)
			continue
		}
		where := fmt.Sprintf("event %d", r.Diff.Position)
		if r.Diff.Seq > 0 {
			where += fmt.Sprintf(" (seq %d)", r.Diff.Seq)
		}
		fmt.Fprintf(e.stdout, "%s: DIFFERS at %s\n", r.RunID, where)
		for line := range strings.SplitSeq(r.Diff.String(), "\n") {
			fmt.Fprintf(e.stdout, "  %s\n", line)
		}
	}
}
