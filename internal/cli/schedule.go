package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/client"
)

var cmdSchedule = &command{
	name:    "schedule",
	args:    "create|list|describe|pause|unpause|trigger|backfill|update|delete",
	summary: "start runs of a graph on a cron spec or an interval",
	help: `A schedule starts runs of a graph at its fire times, exactly one run per
nominal fire time, durably: the coordinators fire it with JetStream message
schedules, and a fire missed while they were down is run when they come
back if it is inside the catch-up window, and recorded as skipped beyond it.

  weft schedule create NAME -graph FILE (-cron 'SPEC' [-tz ZONE] | -every D)
        [-input JSON] [-overlap skip|buffer-one|allow-all|cancel-other]
        [-jitter D] [-catchup-window D] [-note TEXT]
  weft schedule list
  weft schedule describe NAME     spec, next 5 fire times, last runs, paused or not and why
  weft schedule pause NAME -note TEXT
  weft schedule unpause NAME
  weft schedule trigger NAME      one run now
  weft schedule backfill NAME -from T -to T
  weft schedule update NAME …     the create flags given change
  weft schedule delete NAME

A cron spec has 5 fields (minute hour day month weekday), or 6 with seconds
first, or is a descriptor (@daily, @hourly); it is read on the wall clock of
-tz (an IANA zone, default UTC). Across daylight saving, a time that happens
twice fires once, and a time that never happens fires an hour later. A
schedule's runs are listed by 'weft list -schedule NAME'.`,
	run: func(e *env, c *command, args []string) error {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
				fs, _ := e.flagSet(c)
				e.printHelp(c, fs)
				return flag.ErrHelp
			}
			return &usageError{cmd: c, msg: "want create, list, describe, pause, unpause, trigger, backfill, update or delete"}
		}
		sub := &command{name: "schedule " + args[0], args: "NAME", help: c.help}
		switch args[0] {
		case "create", "update":
			return scheduleWrite(e, sub, args[0] == "create", args[1:])
		case "list":
			sub.args = ""
			return scheduleList(e, sub, args[1:])
		case "describe":
			return scheduleDescribe(e, sub, args[1:])
		case "pause", "unpause":
			return schedulePause(e, sub, args[0] == "pause", args[1:])
		case "trigger":
			return scheduleTrigger(e, sub, args[1:])
		case "backfill":
			return scheduleBackfill(e, sub, args[1:])
		case "delete":
			return scheduleDelete(e, sub, args[1:])
		}
		return &usageError{cmd: c, msg: fmt.Sprintf("unknown schedule command %q", args[0])}
	},
}

// scheduleWrite is create and update: the same flags; update changes
// only those given.
func scheduleWrite(e *env, c *command, create bool, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		f := newScheduleFlags(fs)
		set := map[string]bool{} // the flags given
		var in json.RawMessage   // -input
		check := func(e *env, x *call) (err error) {
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			in, err = e.objectArg(x.cmd, "input", *f.input)
			return err
		}
		return action{check: check, do: func(e *env, x *call) (err error) {
			c, name, cl := x.cmd, x.args[0], x.cl
			var d *client.Schedule
			verb := "updated"
			if create {
				verb = "created"
				d, err = f.create(e.ctx, c, cl, name, in)
			} else {
				d, err = f.update(e.ctx, cl, name, set, in)
			}
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(d)
			}
			fmt.Fprintf(e.stdout, "schedule %s %s\n", name, verb)
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

// scheduleFlags are the flags of schedule create and update.
type scheduleFlags struct {
	graphFile, types, cronSpec, tz, input, overlap, note *string
	every, jitter, catchup                               *time.Duration
}

// newScheduleFlags defines the flags of schedule create and update on fs.
func newScheduleFlags(fs *flag.FlagSet) *scheduleFlags {
	f := &scheduleFlags{}
	f.graphFile = fs.String("graph", "", "the graph file its runs run")
	f.types = fs.String("types", "", "node types of your own workers the graph uses, comma separated")
	f.cronSpec = fs.String("cron", "", "cron spec: 5 fields, 6 with seconds first, or @daily, @hourly…")
	f.tz = fs.String("tz", "", "the time zone of -cron (IANA name, default UTC)")
	f.every = fs.Duration("every", 0, "fire every D instead of on a cron spec")
	f.input = fs.String("input", "", "each run's input: a JSON object, @FILE or @-")
	f.overlap = fs.String("overlap", "", "while its runs run: skip (default), buffer-one, allow-all, cancel-other")
	f.jitter = fs.Duration("jitter", 0, "delay each fire by up to D (the same delay on every coordinator)")
	f.catchup = fs.Duration("catchup-window", 0, "how late a missed fire may still start (default 10m)")
	f.note = fs.String("note", "", "a note kept with the schedule")
	return f
}

// create creates schedule name from the flags; in is -input, read.
func (f *scheduleFlags) create(ctx context.Context, c *command, cl *client.Client, name string, in json.RawMessage) (*client.Schedule, error) {
	if *f.graphFile == "" {
		return nil, &usageError{cmd: c, msg: "-graph: required"}
	}
	g, err := loadGraph(*f.graphFile, *f.types)
	if err != nil {
		return nil, graphError(*f.graphFile, err)
	}
	var inv any
	if in != nil {
		inv = in
	}
	return cl.CreateSchedule(ctx, name, g, client.ScheduleOptions{
		Cron: *f.cronSpec, TimeZone: *f.tz, Every: *f.every, Input: inv, Overlap: client.Overlap(*f.overlap),
		Jitter: *f.jitter, CatchupWindow: *f.catchup, Note: *f.note,
	})
}

// update changes schedule name as the flags set (the names in set) say;
// in is -input, read.
func (f *scheduleFlags) update(ctx context.Context, cl *client.Client, name string, set map[string]bool, in json.RawMessage) (*client.Schedule, error) {
	var u client.ScheduleUpdate
	if set["graph"] {
		g, err := loadGraph(*f.graphFile, *f.types)
		if err != nil {
			return nil, graphError(*f.graphFile, err)
		}
		u.Graph = g
	}
	if set["cron"] {
		u.Cron = f.cronSpec
	}
	if set["tz"] {
		u.TimeZone = f.tz
	}
	if set["every"] {
		u.Every = f.every
	}
	if in != nil {
		u.Input = in
	}
	if set["overlap"] {
		o := client.Overlap(*f.overlap)
		u.Overlap = &o
	}
	if set["jitter"] {
		u.Jitter = f.jitter
	}
	if set["catchup-window"] {
		u.CatchupWindow = f.catchup
	}
	if set["note"] {
		u.Note = f.note
	}
	return cl.UpdateSchedule(ctx, name, u)
}

func scheduleList(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			cl := x.cl
			ds, err := cl.ListSchedules(e.ctx)
			if err != nil {
				return err
			}
			if x.out == "json" {
				if ds == nil {
					ds = []*client.Schedule{}
				}
				return e.writeJSON(ds)
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "NAME\tGRAPH\tSPEC\tOVERLAP\tPAUSED\tNEXT")
			for _, d := range ds {
				next := "-"
				if tm, err := d.Timing(); err == nil && !d.Paused {
					next = tm.Next(time.Now()).Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.GraphName, specOf(d), d.Policy(), yesNo(d.Paused), next)
			}
			return tw.Flush()
		}}
	}
	return e.skeleton(c.with(0, 0, connClient, flags), args)
}

func specOf(d *client.Schedule) string {
	if d.Cron != "" {
		tz := d.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("cron %q %s", d.Cron, tz)
	}
	return "every " + time.Duration(d.Every).String()
}

func scheduleDescribe(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			desc, err := cl.DescribeSchedule(e.ctx, pos[0])
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(desc)
			}
			e.printSchedule(desc)
			fmt.Fprintln(e.stdout)
			tw := table(e.stdout)
			fmt.Fprintln(tw, "FIRE TIME\tOUTCOME\tRUN\tSTATUS")
			for _, r := range desc.Runs {
				st := r.Status
				if st == "" {
					st = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Nominal.Format(time.RFC3339), r.Outcome, r.RunID, st)
			}
			return tw.Flush()
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

// printSchedule prints scheduleDescribe's first table: the schedule's
// settings, its next fires and its state.
func (e *env) printSchedule(desc *client.ScheduleDescription) {
	d := desc.Schedule
	tw := table(e.stdout)
	fmt.Fprintf(tw, "schedule\t%s\n", d.Name)
	fmt.Fprintf(tw, "graph\t%s (%s)\n", d.GraphName, d.GraphDigest)
	fmt.Fprintf(tw, "spec\t%s\n", specOf(d))
	fmt.Fprintf(tw, "overlap\t%s\n", d.Policy())
	fmt.Fprintf(tw, "catch-up window\t%s\n", d.CatchUp())
	if d.Jitter > 0 {
		fmt.Fprintf(tw, "jitter\t%s\n", time.Duration(d.Jitter))
	}
	if len(d.Input) > 0 {
		fmt.Fprintf(tw, "input\t%s\n", d.Input)
	}
	if d.Note != "" {
		fmt.Fprintf(tw, "note\t%s\n", d.Note)
	}
	if d.Paused {
		fmt.Fprintf(tw, "paused\tyes: %s\n", d.PauseNote)
	} else {
		fmt.Fprintf(tw, "paused\tno\n")
	}
	for i, n := range desc.Next {
		label := ""
		if i == 0 {
			label = "next fires"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, n.Format(time.RFC3339))
	}
	for k, v := range desc.State.Skipped {
		fmt.Fprintf(tw, "%s\t%d\n", k, v)
	}
	if desc.State.Buffer != nil {
		fmt.Fprintf(tw, "buffered fire\t%s\n", desc.State.Buffer.Format(time.RFC3339))
	}
	_ = tw.Flush()
}

func schedulePause(e *env, c *command, pause bool, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		note := fs.String("note", "", "why (shown by describe)")
		return action{do: func(e *env, x *call) (err error) {
			pos, cl := x.args, x.cl
			verb := "paused"
			if pause {
				err = cl.PauseSchedule(e.ctx, pos[0], *note)
			} else {
				verb = "unpaused"
				err = cl.UnpauseSchedule(e.ctx, pos[0], *note)
			}
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(map[string]any{"schedule": pos[0], "paused": pause})
			}
			fmt.Fprintf(e.stdout, "schedule %s %s\n", pos[0], verb)
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

func scheduleTrigger(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			run, err := cl.TriggerSchedule(e.ctx, pos[0])
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(map[string]string{"schedule": pos[0], "runId": run})
			}
			fmt.Fprintln(e.stdout, run)
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

func scheduleBackfill(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		fromS := fs.String("from", "", "first fire time (RFC 3339), inclusive")
		toS := fs.String("to", "", "last fire time (RFC 3339), inclusive")
		var from, to time.Time
		check := func(e *env, x *call) (err error) {
			c := x.cmd
			if from, err = time.Parse(time.RFC3339, *fromS); err != nil {
				return &usageError{cmd: c, msg: fmt.Sprintf("-from: want an RFC 3339 time, got %q", *fromS)}
			}
			if to, err = time.Parse(time.RFC3339, *toS); err != nil {
				return &usageError{cmd: c, msg: fmt.Sprintf("-to: want an RFC 3339 time, got %q", *toS)}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			runs, err := cl.BackfillSchedule(e.ctx, pos[0], from, to)
			if err != nil {
				return err
			}
			if x.out == "json" {
				if runs == nil {
					runs = []string{}
				}
				return e.writeJSON(map[string]any{"schedule": pos[0], "runs": runs})
			}
			for _, r := range runs {
				fmt.Fprintln(e.stdout, r)
			}
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

func scheduleDelete(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			if err := cl.DeleteSchedule(e.ctx, pos[0]); err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(map[string]any{"schedule": pos[0], "deleted": true})
			}
			fmt.Fprintf(e.stdout, "schedule %s deleted\n", pos[0])
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}
