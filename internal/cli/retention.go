package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Commands of the log's lifecycle: terminate and delete a run, rebuild the
// read model, and remove the runs whose retention passed (package runs).

var cmdTerminate = &command{
	name:    "terminate",
	args:    "RUN... | -q QUERY",
	summary: "end runs at once, without waiting for anything (-reason TEXT; several runs, or -q QUERY)",
	help: `Appends a terminate request to the run's log: the coordinator ends the run
at once, marked terminated ('weft status' and 'weft list' say terminated),
in the log and in the read model. Nodes in flight are stopped and their
late outcomes passed over. The run must exist and not have ended.

Several run ids, or -q QUERY, make a batch (see 'weft help cancel':
-dry-run, -yes, -rate).`,
	max: -1, conn: connClient,
	flags: requestFlags("terminate", (*client.Client).Terminate),
}

var cmdDelete = &command{
	name:    "delete",
	args:    "RUN... | -q QUERY",
	summary: "remove ended runs' logs and read-model entries (-yes: no question; several runs, or -q QUERY)",
	help: `Removes a run that ended: its events, timers, snapshot and read-model entry
(purges by the run's own subjects). A run that has not ended is refused,
before any question. It asks for confirmation unless -yes is given. With
-archive the run is archived first (an Object Store bucket name, obj:NAME,
or dir:PATH), and an archive that fails removes nothing. Purging the
events stream needs the admin's credentials.

Several run ids, or -q QUERY, make a batch: runs that have not ended are
skipped, the others removed one by one and reported (see 'weft help
cancel': -dry-run, -yes, -rate):
  weft delete -q 'status = "failed" AND ended < now - duration("720h")' -dry-run`,
	max: -1, conn: connAdminStore,
	flags: func(fs *flag.FlagSet) action {
		archive := fs.String("archive", "none", "archive the run first: none, an Object Store bucket, obj:NAME or dir:PATH")
		bf := addBatchFlags(fs)
		check := func(e *env, x *call) error {
			c, pos := x.cmd, x.args
			if err := batchPositional(c, bf, pos); err != nil {
				return err
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			c, pos, store := x.cmd, x.args, x.store
			arch, err := readmodel.ParseArchive(e.ctx, eventlog.JetStream(store), store.StreamName(), *archive, false)
			if err != nil {
				return err
			}
			cl := client.New(store)
			remove := func(ctx context.Context, run string) (*readmodel.Removed, error) {
				r, err := readmodel.Remove(ctx, store, run, arch)
				if errors.Is(err, readmodel.ErrNotEnded) {
					return nil, fmt.Errorf("%w: has not ended: cancel or terminate it first", errSkipped)
				}
				return r, err
			}
			if len(pos) == 1 && !*bf.dryRun {
				run := pos[0]
				// Refused before the question: a run that has not ended.
				if ts, _ := e.batchTargets(cl, bf, pos); len(ts) == 1 && ts[0].status != "" && !ts[0].status.Ended() {
					return fmt.Errorf("run %s not deleted: it has not ended (%s): cancel or terminate it first", run, ts[0].shown)
				}
				if !*bf.yes {
					fmt.Fprintf(e.stderr, "Remove run %s and its whole history? [y/N] ", run)
					line, _ := bufio.NewReader(e.stdin).ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
						return fmt.Errorf("run %s not deleted: not confirmed (-yes skips the question)", run)
					}
				}
				r, err := remove(e.ctx, run)
				if err != nil {
					return runError(run, err)
				}
				if x.out == "json" {
					return e.writeJSON(r)
				}
				fmt.Fprintf(e.stdout, "run %s deleted (%d events)", run, r.Events)
				if r.Archived != "" {
					fmt.Fprintf(e.stdout, ", archived to %s", r.Archived)
				}
				fmt.Fprintln(e.stdout)
				return nil
			}
			return e.runBatch(c, x.out, bf, cl, pos, batchOp{
				verb: "delete", done: "deleted", ask: true,
				skip: func(st projection.RunStatus) string {
					if !st.Ended() {
						return "has not ended (" + string(st) + ")"
					}
					return ""
				},
				do: func(ctx context.Context, run string) (string, error) {
					r, err := remove(ctx, run)
					if err != nil {
						return "", err
					}
					d := fmt.Sprintf("(%d events)", r.Events)
					if r.Archived != "" {
						d += ", archived to " + r.Archived
					}
					return d, nil
				},
			})
		}}
	},
}

var cmdAdminReindex = &command{
	name: "admin reindex",
	help: `Rebuilds the read model of runs (KV bucket weft-runs) from the log: every
run is folded and its summary put; entries of runs the log does not have
are removed. -retention is the default retention the coordinators run
with, for runs that name none.`,
}

var cmdAdminRetention = &command{
	name: "admin retention",
	help: `Removes the ended runs whose retention passed, each by purging its own
subjects (events, timers, snapshot, read-model entry); a run that has not
ended is never removed. Each is archived first unless -archive none: to
the Object Store bucket weft-archive by default (-create-archive creates
it), another bucket (obj:NAME), or a directory (dir:PATH). An archive that
fails leaves its run as it was. -every D repeats the sweep until
interrupted (a daemon, with the admin's credentials: purges need them).`,
}

var cmdAdminRestore = &command{
	name: "admin restore",
	args: "RUN...",
	help: `Puts archived runs back into the events stream, live again: each run's
messages republished in order on their subjects, with their ids, headers
and original times (the fold of a restored run is the fold it had), its
snapshot dropped and its read-model entry written, kept for its retention
counted from the restore (-retention: the coordinators' default, for runs
that name none). A run that is in the log already is refused; one that is
not in the archive is an error. -archive names the archive: the Object
Store bucket weft-archive by default, another bucket (obj:NAME), or a
directory (dir:PATH). The engine passes restored messages over: no node
runs again. Needs the admin's credentials.`,
}

// adminStore opens the events store for an admin command.
func (e *env) adminStore(c *command, cfg *natsconn.Config) (events.Store, func(), error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, &usageError{cmd: c, msg: err.Error()}
	}
	nc, err := e.dialAs(c, cfg, natsconn.RoleAdmin)
	if err != nil {
		return nil, nil, err
	}
	store, err := openStore(e.ctx, cfg, nc, false)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return store, nc.Close, nil
}

func adminReindex(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		retention := fs.String("retention", readmodel.DefaultRetention.String(), "the coordinators' default retention")
		var def time.Duration // -retention
		check := func(e *env, x *call) (err error) {
			c := x.cmd
			def, err = readmodel.ParseRetention(*retention)
			if err != nil {
				return &usageError{cmd: c, msg: "-" + err.Error()}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			store := x.store
			res, err := readmodel.Reindex(e.ctx, store, def, nil)
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(res)
			}
			fmt.Fprintf(e.stdout, "reindexed %d runs; dropped %d entries of runs not in the log\n", res.Indexed, res.Dropped)
			return nil
		}}
	}
	return e.skeleton(c.with(0, 0, connAdminStore, flags), args)
}

func adminRetention(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		archive := fs.String("archive", readmodel.ArchiveBucket, "archive runs before removing them: an Object Store bucket, obj:NAME, dir:PATH, or none")
		create := fs.Bool("create-archive", false, "create the archive bucket if it is missing")
		every := fs.Duration("every", 0, "sweep again at this interval until interrupted (0: once)")
		limit := fs.Int("limit", 0, "remove at most this many runs per sweep (0: all)")
		orphans := fs.Bool("orphans", false, "after each sweep, delete the large payloads no run needs (lists the whole payloads bucket; objects under an hour old are left)")
		check := func(e *env, x *call) error {
			c := x.cmd
			if *every < 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-every: must not be negative, got %s", *every)}
			}
			if *limit < 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-limit: want 0 or more, got %d", *limit)}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			store := x.store
			arch, err := readmodel.ParseArchive(e.ctx, eventlog.JetStream(store), store.StreamName(), *archive, *create)
			if err != nil {
				return err
			}
			for {
				res, err := readmodel.Sweep(e.ctx, store, arch, time.Now(), *limit, nil)
				if err != nil {
					return err
				}
				if *orphans {
					if res.Payloads, err = readmodel.SweepPayloads(e.ctx, store, arch, time.Now(), readmodel.OrphanGrace); err != nil {
						return err
					}
				}
				if err := reportSweep(e, x, res); err != nil {
					return err
				}
				if *every == 0 {
					if len(res.Failed) > 0 {
						return fmt.Errorf("%d runs were not removed", len(res.Failed))
					}
					if p := res.Payloads; p != nil && len(p.Failed) > 0 {
						return fmt.Errorf("the payloads of %d runs were not swept", len(p.Failed))
					}
					return nil
				}
				if !sleepFor(e.ctx, *every) {
					return nil
				}
			}
		}}
	}
	return e.skeleton(c.with(0, 0, connAdminStore, flags), args)
}

// reportSweep writes what a retention sweep did: as JSON, or a line (and
// one per run that failed), and its payloads sweep's, if there was one.
func reportSweep(e *env, x *call, res *readmodel.SweepResult) error {
	if x.out == "json" {
		return e.writeJSON(res)
	}
	fmt.Fprintf(e.stdout, "%s: %d runs past their retention, %d removed, %d failed\n",
		time.Now().Format(time.DateTime), res.Expired, len(res.Removed), len(res.Failed))
	for run, why := range res.Failed {
		fmt.Fprintf(e.stdout, "  %s: %s\n", run, why)
	}
	p := res.Payloads
	if p == nil {
		return nil
	}
	fmt.Fprintf(e.stdout, "payloads: %d objects, %d deleted, %d archives rewritten to carry theirs, %d runs failed\n",
		p.Objects, p.Deleted, len(p.Migrated), len(p.Failed))
	for run, why := range p.Failed {
		fmt.Fprintf(e.stdout, "  %s: %s\n", run, why)
	}
	return nil
}

func adminRestore(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		archive := fs.String("archive", readmodel.ArchiveBucket, "the archive: an Object Store bucket, obj:NAME or dir:PATH")
		retention := fs.String("retention", readmodel.DefaultRetention.String(), "the coordinators' default retention")
		var def time.Duration // -retention
		check := func(e *env, x *call) (err error) {
			c, pos := x.cmd, x.args
			def, err = readmodel.ParseRetention(*retention)
			if err != nil {
				return &usageError{cmd: c, msg: "-" + err.Error()}
			}
			if *archive == "" || *archive == "none" {
				return &usageError{cmd: c, msg: fmt.Sprintf("-archive: want the archive to restore from, got %q", *archive)}
			}
			if err := checkRunIDs(c, pos...); err != nil {
				return err
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, store := x.args, x.store
			arch, err := readmodel.ParseArchive(e.ctx, eventlog.JetStream(store), store.StreamName(), *archive, false)
			if err != nil {
				return err
			}
			var done []*readmodel.Restored
			failed := 0
			for _, run := range pos {
				r, err := readmodel.Restore(e.ctx, store, arch, run, def)
				if err != nil {
					failed++
					fmt.Fprintf(e.stderr, "weft admin restore: %v\n", err)
					continue
				}
				done = append(done, r)
				if x.out != "json" {
					fmt.Fprintf(e.stdout, "run %s restored from %s (%d events, %s), kept until %s\n",
						run, r.From, r.Events, r.Status, r.ExpiresAt.Format(time.RFC3339))
				}
			}
			if x.out == "json" {
				if err := e.writeJSON(done); err != nil {
					return err
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d runs were not restored", failed, len(pos))
			}
			return nil
		}}
	}
	return e.skeleton(c.with(1, -1, connAdminStore, flags), args)
}

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// checkRunIDs refuses, as a usage error, an argument that cannot be a
// run id.
func checkRunIDs(c *command, ids ...string) error {
	for _, run := range ids {
		if !eventlog.ValidToken(run) {
			return &usageError{cmd: c, msg: fmt.Sprintf("run id %q: not a run id", run)}
		}
	}
	return nil
}
