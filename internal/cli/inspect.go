package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	wruns "github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

var cmdStatus = &command{
	name:    "status",
	args:    "RUN",
	summary: "show a run's status, nodes and state, and where it waits",
	help: `Folds the run's log and prints its status, each node's status, attempt,
worker and time (for a node under way, how long so far), and the shared
state. A running run that does nothing but wait is "waiting": what it
waits on is listed (a wait node's time; a human node's deadline and the
'weft signal' command that answers it). Under "pending", each node that has not finished says where it is:
how long it has run, its attempt and worker, its last heartbeat and what
the heartbeat reported, when it times out, when its next attempt is due
and why the last failed; a node waiting for a person, its deadline and
the exact 'weft signal' command that answers it; a wait node, when its
wait ends. A running run that does nothing but wait (on a person or a
time) is "waiting". -o json prints the whole
folded state ('weft describe -o json' adds the pending nodes).`,
	min: 1, max: 1, conn: connClient,
	flags: statusFlags(false),
}

var cmdDescribe = &command{
	name:    "describe",
	args:    "RUN",
	summary: "show where a run is: 'weft status', with -o json giving the pending nodes too",
	help: `Prints what 'weft status' prints. With -o json: {"state": the folded
state, "pending": [the nodes that have not finished, with what each waits
for: since, attempt, worker, heartbeatAt, heartbeatDetails, timeoutAt,
heartbeatTimeoutAt, retryAt, lastError, deadline, child, answer]} (package
client, Pending).`,
	min: 1, max: 1, conn: connClient,
	flags: statusFlags(true),
}

// statusFlags is the flags function of status and describe; describe's
// JSON has the pending nodes besides the state.
func statusFlags(describe bool) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		stall := stallFlag(fs)
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			history, err := cl.History(e.ctx, pos[0])
			if err != nil {
				return runError(pos[0], err)
			}
			st := projection.Fold(history)
			if !st.Status.Ended() {
				e.warnNoCoordinator(cl)
				e.warnStalled(st, *stall)
			}
			pending := client.PendingOf(st, history)
			if x.out == "json" {
				if describe {
					if pending == nil {
						pending = []client.Pending{}
					}
					return e.writeJSON(map[string]any{"state": st, "pending": pending})
				}
				return e.writeJSON(st)
			}
			// The command that answers a waiting node reaches this server
			// the way this one did.
			conn := connFlags(fs)
			for i := range pending {
				if pending[i].Answer != "" {
					pending[i].Answer += conn
				}
			}
			e.printStatus(st, unserved(e.ctx, cl, st), pending, time.Now())
			if id := telemetry.TraceID(history[0]); id != "" {
				fmt.Fprintf(e.stdout, "\ntrace %s\n", id)
			}
			return nil
		}}
	}
}

// connFlags are the connection flags given on the command line (not the
// password), as they would be given again: " -nats URL -stream S".
func connFlags(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "nats", "creds", "user", "nkey", "tls-ca", "tls-cert", "tls-key", "stream", "namespace", "roles-dir":
			b.WriteString(" -" + f.Name + " " + shellQuote(f.Value.String()))
		}
	})
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@,=+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	summary: "list runs, newest first (filters: -status, -graph, -since, -until, -attr)",
	help: `Lists runs from the read model of runs (the KV bucket weft-runs, which the
coordinators keep), newest first by start time (ties by run id), with their status, graph,
start (how long ago; with -absolute, the local time), how long it took
(so far), origin (the schedule, trigger or webhook that started it) and lineage (a forked
run's parent run and position: "forked from RUN@N"), and what a running run waits on: a run
that does nothing but wait, on a human node's signal or a wait node's time, is "waiting",
with the node and its deadline, and each human node's 'weft signal' command is printed
after the table; -status running includes the waiting runs;
it never reads the events stream. Filters combine: -status (comma
separated), -graph, -since and -until (start time: RFC 3339 or a duration
before now, such as 24h), -attr NAME=VALUE (a search attribute the graph
declares; repeat for more), -schedule, -trigger and -webhook (the runs
they started), -q QUERY (below). -limit pages: the next
page's cursor is printed after the runs, for -cursor. -count prints how many
runs the filters select; -count -by status (or graph) counts them by status
(terminated runs as such) or by graph. 'weft admin reindex' rebuilds the
read model from the log.

` + wruns.FilterHelp,
	conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		lf := listFlags(fs)
		stall := stallFlag(fs)
		absolute := fs.Bool("absolute", false, "show start times as local dates and times, not how long ago")
		var opts []client.ListOption
		check := func(e *env, x *call) (err error) {
			if opts, err = lf.options(time.Now()); err != nil {
				return &usageError{cmd: x.cmd, msg: err.Error()}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			c, cl := x.cmd, x.cl
			noModel := func(err error) error {
				if errors.Is(err, wruns.ErrNoReadModel) {
					// No coordinator has kept it: say whether one is alive.
					e.warnNoCoordinator(cl)
				}
				return err
			}
			if *lf.by != "" && (*lf.by != "status" && *lf.by != "graph" || !*lf.count) {
				return &usageError{cmd: c, msg: fmt.Sprintf("-by: want status or graph, with -count; got %q", *lf.by)}
			}
			if *lf.count && *lf.by != "" {
				all, err := cl.List(e.ctx, opts...)
				if err != nil {
					return noModel(err)
				}
				return e.printCounts(all, *lf.by, x.out)
			}
			if *lf.count {
				n, err := cl.Count(e.ctx, opts...)
				if err != nil {
					return noModel(err)
				}
				if x.out == "json" {
					return e.writeJSON(map[string]int{"total": n})
				}
				fmt.Fprintln(e.stdout, n)
				return nil
			}
			page, err := cl.ListPage(e.ctx, opts...)
			if err != nil {
				return noModel(err)
			}
			runs := page.Runs
			e.warnList(cl, runs, *stall)
			if x.out == "json" {
				if runs == nil {
					runs = []client.RunSummary{}
				}
				return e.writeJSON(runs)
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "RUN\tGRAPH\tSTATUS\tSTARTED\tTOOK\tORIGIN\tLINEAGE\tWAITING ON")
			now := time.Now()
			var answers []string
			for _, r := range runs {
				from, origin := "-", "-"
				if r.ForkedFrom != nil {
					from = lineage(r.ForkedFrom)
				}
				if r.Chain != "" {
					from = chainLineage(r.Chain, r.Link, r.Previous, r.ContinuedAs)
				}
				if r.Origin != "" {
					origin = r.Origin
				}
				started := duration(now.Sub(r.StartedAt).Round(time.Second)) + " ago"
				if *absolute {
					started = r.StartedAt.Local().Format(time.DateTime)
				}
				took := "-"
				switch {
				case !r.EndedAt.IsZero():
					took = duration(r.EndedAt.Sub(r.StartedAt))
				case !r.StartedAt.IsZero():
					took = duration(now.Sub(r.StartedAt).Round(time.Second)) + " so far"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Graph, wruns.ShownStatus(r.Status, r.Terminated), started, took, origin, from, waitCell(r.Waiting, now))
				for _, w := range r.Waiting {
					if w.For == "signal" {
						answers = append(answers, wruns.SignalCommand(r.RunID, w))
					}
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(answers) > 0 {
				fmt.Fprintln(e.stdout, "to answer the human nodes that wait (where the data shows ..., put a value):")
				for _, a := range answers {
					fmt.Fprintln(e.stdout, "  "+a)
				}
			}
			if page.Next != "" {
				fmt.Fprintf(e.stdout, "more: -cursor %s (%d runs in all)\n", page.Next, page.Total)
			}
			return nil
		}}
	},
}

var cmdEvents = &command{
	name:    "events",
	args:    "RUN",
	summary: "show a run's timeline, event by event (-follow to tail it)",
	help: `Prints the run's events in log order: the event's position in the run
(POS, the point 'weft state -at', 'weft diff' and 'weft fork -at' take), the
stream sequence (SEQ, which also counts other runs' events), the time since
the run started, the event type, the node, its iteration and attempt, and
what the event says (the worker, the error, the edges taken...). Routings a
node-ready, -waiting or -skipped event carries get rows of their own above it.
With -follow it keeps printing events as they are stored until the run ends
(-o json: one JSON object a line); -tokens adds the text agents stream
from their models as it arrives (not stored: the step events hold it).`,
	min: 1, max: 1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		follow := fs.Bool("follow", false, "keep printing the run's events as they come, until the run ends")
		tokens := fs.Bool("tokens", false, "with -follow: print the text nodes stream (agents' model tokens) as it comes, between the events")
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			if *follow {
				return runError(pos[0], e.followTimeline(cl, pos[0], x.out == "json", *tokens))
			}
			evs, err := cl.History(e.ctx, pos[0])
			if err != nil {
				return runError(pos[0], err)
			}
			if x.out == "json" {
				return e.writeJSON(timeline(evs))
			}
			e.printTimeline(evs)
			return nil
		}}
	},
}

var cmdState = &command{
	name:    "state",
	args:    "RUN",
	summary: "show a run's state, now or after an event (-at POS)",
	help: `Replays the run's log up to the event at position -at (1 is run-started;
see POS in 'weft events') and prints the state after it; without -at, the
current state. With -seq, -at is a stream sequence instead (SEQ in 'weft
events'). -o json prints the whole folded state.`,
	min: 1, max: 1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		at := fs.Uint64("at", 0, "the position in the run to replay up to (0: all)")
		bySeq := fs.Bool("seq", false, "-at is a stream sequence, not a position in the run")
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			var st *projection.State
			var err error
			if *bySeq {
				st, err = cl.StateAtSeq(e.ctx, pos[0], *at)
			} else if *at > math.MaxInt32 {
				err = fmt.Errorf("position %d is out of range", *at)
			} else {
				st, err = cl.StateAt(e.ctx, pos[0], int(*at))
			}
			if err != nil {
				return runError(pos[0], err)
			}
			if x.out == "json" {
				return e.writeJSON(st)
			}
			switch {
			case *at > 0 && *bySeq:
				fmt.Fprintf(e.stdout, "state at seq %d\n", *at)
			case *at > 0:
				fmt.Fprintf(e.stdout, "state after event %d (seq %d)\n", *at, st.LastSeq)
			}
			e.printStatus(st, nil, nil, time.Time{})
			return nil
		}}
	},
}

var cmdDiff = &command{
	name:    "diff",
	args:    "RUN FROM TO",
	summary: "show what changed in a run's state between two events",
	help: `Replays the run's log to the events at positions FROM and TO (see POS in
'weft events'; -seq: stream sequences) and lists every value that differs,
by JSON path: the run's state, its nodes' fields (a node that appears is
listed field by field) and its status. The fold's bookkeeping (/lastSeq,
/updatedAt, /stats/..., /endReached, timers, a node's delivery and routing
counters) is left out; -all shows it. Long values are cut to 60
characters; -full prints them whole.`,
	min: 3, max: 3, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		bySeq := fs.Bool("seq", false, "FROM and TO are stream sequences, not positions in the run")
		full := fs.Bool("full", false, "print values whole, not cut to 60 characters")
		all := fs.Bool("all", false, "show the fold's bookkeeping too (/lastSeq, /updatedAt, /stats/..., timers...)")
		var pts [2]uint64 // FROM and TO
		check := func(e *env, x *call) error {
			c, pos := x.cmd, x.args
			what := "a position in the run"
			if *bySeq {
				what = "a stream sequence"
			}
			for i, s := range pos[1:] {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil || n == 0 {
					return &usageError{cmd: c, msg: fmt.Sprintf("%s: want %s (a positive number), got %q", []string{"FROM", "TO"}[i], what, s)}
				}
				pts[i] = n
			}
			if pts[0] > pts[1] {
				return &usageError{cmd: c, msg: fmt.Sprintf("TO %d is before FROM %d: TO must be %d or later", pts[1], pts[0], pts[0])}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			evs, err := cl.History(e.ctx, pos[0])
			if err != nil {
				return runError(pos[0], err)
			}
			var states [2]*projection.State
			for i, p := range pts {
				if *bySeq {
					first, last := evs[0].Seq, evs[len(evs)-1].Seq
					if p < first {
						return fmt.Errorf("run %s has events at sequences %d to %d; %d is before its start", pos[0], first, last, p)
					}
					states[i] = projection.FoldTo(evs, p)
					continue
				}
				if p > uint64(len(evs)) {
					return fmt.Errorf("run %s has events at positions 1 to %d; %s %d is out of range", pos[0], len(evs), []string{"FROM", "TO"}[i], p)
				}
				states[i] = projection.Fold(evs[:p])
			}
			changes := projection.StateDiff(states[0], states[1], *all)
			if x.out == "json" {
				if changes == nil {
					changes = []projection.Change{}
				}
				return e.writeJSON(changes)
			}
			unit := "event"
			if *bySeq {
				unit = "seq"
			}
			if len(changes) == 0 {
				fmt.Fprintf(e.stdout, "no changes between %s %d and %s %d", unit, pts[0], unit, pts[1])
				if !*all {
					fmt.Fprint(e.stdout, " (but the fold's bookkeeping: -all shows it)")
				}
				fmt.Fprintln(e.stdout)
				return nil
			}
			show := func(b json.RawMessage) string {
				if *full {
					return orDash(string(b))
				}
				return orDash(truncate(string(b), 60))
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "PATH\tBEFORE\tAFTER")
			for _, ch := range changes {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Path, show(ch.Before), show(ch.After))
			}
			return tw.Flush()
		}}
	},
}

// printCounts prints how many runs there are of each status or graph,
// most first (ties by name).
func (e *env) printCounts(all []client.RunSummary, by, out string) error {
	counts := map[string]int{}
	for _, r := range all {
		k := r.Graph
		if by == "status" {
			k = wruns.ShownStatus(r.Status, r.Terminated)
		}
		counts[k]++
	}
	if out == "json" {
		return e.writeJSON(map[string]any{"total": len(all), "by": by, "counts": counts})
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	tw := table(e.stdout)
	fmt.Fprintf(tw, "%s\tRUNS\n", strings.ToUpper(by))
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%d\n", orDash(k), counts[k])
	}
	fmt.Fprintf(tw, "total\t%d\n", len(all))
	return tw.Flush()
}
