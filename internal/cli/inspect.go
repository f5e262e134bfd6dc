package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

var cmdStatus = &command{
	name:    "status",
	args:    "RUN",
	summary: "show a run's status, nodes and state",
	help: `Folds the run's log and prints its status, each node's status, attempt,
worker and time, and the shared state. -o json prints the whole folded state.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		stall := stallFlag(fs)
		pos, err := e.parse(c, fs, args, 1, 1)
		if err != nil {
			return err
		}
		cl, closeConn, err := e.connect(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		history, err := cl.History(e.ctx, pos[0])
		if err != nil {
			return runError(pos[0], err)
		}
		st := projection.Fold(history)
		if !st.Status.Ended() {
			e.warnNoCoordinator(cl)
			e.warnStalled(st, *stall)
		}
		if *out == "json" {
			return e.writeJSON(st)
		}
		e.printStatus(st, unserved(e.ctx, cl, st))
		if id := telemetry.TraceID(history[0]); id != "" {
			fmt.Fprintf(e.stdout, "\ntrace %s\n", id)
		}
		return nil
	},
}

// unserved finds the ready nodes of a run that no live worker serves: their
// work waits in the queue until a worker for their type starts. It maps
// node id to an explanation; a failed look-up shows nothing.
func unserved(ctx context.Context, cl *client.Client, st *projection.State) map[string]string {
	var def struct {
		Nodes []struct{ ID, Type, Queue string } `json:"nodes"`
	}
	if json.Unmarshal(st.Graph, &def) != nil {
		return nil
	}
	var ready []int
	for i, n := range def.Nodes {
		if ns := st.Nodes[n.ID]; ns != nil && ns.Status == projection.NodeReady {
			ready = append(ready, i)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	live, err := cl.LiveWorkers(ctx)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, i := range ready {
		n := def.Nodes[i]
		served := false
		for j := range live {
			served = served || live[j].Serves(n.Queue, n.Type)
		}
		if !served {
			out[n.ID] = fmt.Sprintf("waiting: no live worker serves type %s on queue %s", n.Type, n.Queue)
		}
	}
	return out
}

var cmdList = &command{
	name:    "list",
	summary: "list runs, newest first",
	help: `Lists runs from the events stream's subject index, newest first, with their
status, graph and start time.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		limit := fs.Int("limit", 50, "list at most this many runs (0: all)")
		status := fs.String("status", "", "only runs in these statuses, comma separated (running, cancelling, completed, failed, cancelled)")
		stall := stallFlag(fs)
		if _, err := e.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		if *limit < 0 {
			return &usageError{cmd: c, msg: fmt.Sprintf("-limit: want 0 or more, got %d", *limit)}
		}
		opts := []client.ListOption{client.WithLimit(*limit), client.WithDetails()}
		if *status != "" {
			for s := range strings.SplitSeq(*status, ",") {
				rs := projection.RunStatus(strings.TrimSpace(s))
				switch rs {
				case projection.RunRunning, projection.RunCancelling, projection.RunCompleted, projection.RunFailed, projection.RunCancelled:
				default:
					return &usageError{cmd: c, msg: fmt.Sprintf("-status: unknown status %q (want running, cancelling, completed, failed or cancelled)", s)}
				}
				opts = append(opts, client.WithStatus(rs))
			}
		}
		cl, closeConn, err := e.connect(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		runs, err := cl.List(e.ctx, opts...)
		if err != nil {
			return err
		}
		e.warnList(cl, runs, *stall)
		if *out == "json" {
			if runs == nil {
				runs = []client.RunSummary{}
			}
			return e.writeJSON(runs)
		}
		tw := table(e.stdout)
		fmt.Fprintln(tw, "RUN\tGRAPH\tSTATUS\tSTARTED")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.RunID, r.Graph, r.Status, r.StartedAt.Local().Format(time.DateTime))
		}
		return tw.Flush()
	},
}

var cmdEvents = &command{
	name:    "events",
	args:    "RUN",
	summary: "show a run's timeline, event by event",
	help: `Prints the run's events in log order: the stream sequence, the time since
the run started, the event type, the node, its iteration and attempt, and what
the event says (the worker, the error, the edges taken...). The sequences are
the points 'weft state -at' and 'weft diff' take.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		pos, err := e.parse(c, fs, args, 1, 1)
		if err != nil {
			return err
		}
		cl, closeConn, err := e.connect(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		evs, err := cl.History(e.ctx, pos[0])
		if err != nil {
			return runError(pos[0], err)
		}
		if *out == "json" {
			return e.writeJSON(timeline(evs))
		}
		e.printTimeline(evs)
		return nil
	},
}

var cmdState = &command{
	name:    "state",
	args:    "RUN",
	summary: "show a run's state, now or at a sequence (-at SEQ)",
	help: `Replays the run's log up to the stream sequence -at (see 'weft events') and
prints the state at that point; without -at, the current state. -o json prints
the whole folded state.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		at := fs.Uint64("at", 0, "the stream sequence to replay up to (0: all)")
		pos, err := e.parse(c, fs, args, 1, 1)
		if err != nil {
			return err
		}
		cl, closeConn, err := e.connect(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		st, err := cl.StateAt(e.ctx, pos[0], *at)
		if err != nil {
			return runError(pos[0], err)
		}
		if *out == "json" {
			return e.writeJSON(st)
		}
		if *at > 0 {
			fmt.Fprintf(e.stdout, "state at seq %d\n", *at)
		}
		e.printStatus(st, nil)
		return nil
	},
}

var cmdDiff = &command{
	name:    "diff",
	args:    "RUN FROMSEQ TOSEQ",
	summary: "show what changed in a run's state between two sequences",
	help: `Replays the run's log to FROMSEQ and to TOSEQ (stream sequences, see 'weft
events') and lists every value that differs, by JSON path.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		pos, err := e.parse(c, fs, args, 3, 3)
		if err != nil {
			return err
		}
		var seqs [2]uint64
		for i, s := range pos[1:] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n == 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("%s: want a stream sequence (a positive number), got %q", []string{"FROMSEQ", "TOSEQ"}[i], s)}
			}
			seqs[i] = n
		}
		cl, closeConn, err := e.connect(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		evs, err := cl.History(e.ctx, pos[0])
		if err != nil {
			return runError(pos[0], err)
		}
		for _, s := range seqs {
			if s < evs[0].Seq {
				return fmt.Errorf("run %s starts at seq %d; %d is before it", pos[0], evs[0].Seq, s)
			}
		}
		changes := projection.Diff(projection.FoldTo(evs, seqs[0]), projection.FoldTo(evs, seqs[1]))
		if *out == "json" {
			if changes == nil {
				changes = []projection.Change{}
			}
			return e.writeJSON(changes)
		}
		if len(changes) == 0 {
			fmt.Fprintf(e.stdout, "no changes between seq %d and seq %d\n", seqs[0], seqs[1])
			return nil
		}
		tw := table(e.stdout)
		fmt.Fprintln(tw, "PATH\tBEFORE\tAFTER")
		for _, ch := range changes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Path, orDash(truncate(string(ch.Before), 60)), orDash(truncate(string(ch.After), 60)))
		}
		return tw.Flush()
	},
}
