package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/client"
)

var cmdFork = &command{
	name:    "fork",
	args:    "RUN",
	summary: "start a new run from the state after an event of a run (-at POS)",
	help: `Starts a new run from RUN's state after the event at position -at (POS in
'weft events'). Nodes that completed by then are not run again; nodes that
were ready or running are. -set KEY=JSON sets a key of the shared state
(repeatable), -state replaces the whole shared state (a JSON object, inline or
@FILE), -invocation-set and -invocation do the same for the invocation state,
and -graph runs the fork with another graph file, which must have every node
and pending edge the state refers to. The new run's log is self-contained:
its run-started carries the state, the graph and the parent run and position
('weft status' and 'weft list' show it). Prints the new run's id; -wait waits
for its end as 'weft run -wait' does. Nothing is written when an argument is
wrong.`,
	min: 1, max: 1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		at := fs.Int("at", 0, "fork after the event at this position of RUN (required)")
		ff := forkFlags(fs)
		var opts []client.ForkOption
		check := func(e *env, x *call) (err error) {
			c := x.cmd
			if *at <= 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-at: want the position of an event of the run (1 or more, see 'weft events'), got %d", *at)}
			}
			opts, err = ff.options(e, c)
			return err
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			run, err := cl.Fork(e.ctx, pos[0], *at, opts...)
			if err != nil {
				return runError(pos[0], err)
			}
			return e.started(cl, run, x.out, ff)
		}}
	},
}

var cmdReset = &command{
	name:    "reset",
	args:    "RUN",
	summary: "end a run and fork it from before a node ran (-to NODE)",
	help: `Resets RUN the way Temporal's reset does: forks it from just before NODE
was last activated (-to NODE), or after the event at position -at, and, if
RUN has not ended, cancels it with the reason "reset to ..., new run X",
which its log records. Takes the same edits as 'weft fork' (-set, -state,
-invocation-set, -invocation, -graph). Prints the new run's id. A node the
graph lacks or that never ran is an error, and nothing is written.`,
	min: 1, max: 1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		to := fs.String("to", "", "fork from just before this node was last activated")
		at := fs.Int("at", 0, "fork after the event at this position instead")
		ff := forkFlags(fs)
		var opts []client.ForkOption
		check := func(e *env, x *call) (err error) {
			c := x.cmd
			if (*to == "") == (*at == 0) {
				return &usageError{cmd: c, msg: "want -to NODE or -at POS (one of them)"}
			}
			if *at < 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-at: want a position (1 or more), got %d", *at)}
			}
			opts, err = ff.options(e, c)
			return err
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			run, err := cl.Reset(e.ctx, pos[0], client.ResetTarget{Node: *to, Position: *at}, opts...)
			if err != nil {
				return runError(pos[0], err)
			}
			return e.started(cl, run, x.out, ff)
		}}
	},
}

// forkFlagValues are the edit flags fork and reset share.
type forkFlagValues struct {
	set, invSet       keyValues
	state, invocation *string
	graphFile, types  *string
	id                *string
	wait              *bool
	timeout           *time.Duration
}

func forkFlags(fs *flag.FlagSet) *forkFlagValues {
	f := &forkFlagValues{}
	fs.Var(&f.set, "set", "set a key of the shared state: KEY=JSON (repeatable)")
	fs.Var(&f.invSet, "invocation-set", "set a key of the invocation state: KEY=JSON (repeatable)")
	f.state = fs.String("state", "", "replace the shared state: a JSON object, or @FILE")
	f.invocation = fs.String("invocation", "", "replace the invocation state: a JSON object, or @FILE")
	f.graphFile = fs.String("graph", "", "run the fork with this graph file instead of the run's graph")
	f.types = typesFlag(fs)
	f.id = fs.String("id", "", "the new run's id (default a new, time-ordered id)")
	f.wait = fs.Bool("wait", false, "wait for the new run to end and print its state")
	f.timeout = fs.Duration("timeout", time.Minute, "with -wait, how long to wait")
	return f
}

// options turns the flags into fork options; bad values are usage errors.
func (f *forkFlagValues) options(e *env, c *command) ([]client.ForkOption, error) {
	var opts []client.ForkOption
	st, err := e.objectArg(c, "state", *f.state)
	if err != nil {
		return nil, err
	}
	if st != nil {
		opts = append(opts, client.ReplaceState(st))
	}
	inv, err := e.objectArg(c, "invocation", *f.invocation)
	if err != nil {
		return nil, err
	}
	if inv != nil {
		opts = append(opts, client.ReplaceInvocation(inv))
	}
	for _, kv := range []struct {
		name string
		kvs  keyValues
		opt  func(string, any) client.ForkOption
	}{{"set", f.set, client.SetState}, {"invocation-set", f.invSet, client.SetInvocation}} {
		for _, p := range kv.kvs {
			k, v, _ := strings.Cut(p, "=")
			var js json.RawMessage
			if err := json.Unmarshal([]byte(v), &js); err != nil || k == "" {
				return nil, &usageError{cmd: c, msg: fmt.Sprintf("-%s %s: want KEY=JSON (a string is quoted: name=\"Ada\")", kv.name, p)}
			}
			opts = append(opts, kv.opt(k, js))
		}
	}
	if *f.graphFile != "" {
		g, err := loadGraph(*f.graphFile, *f.types)
		if err != nil {
			return nil, graphError(*f.graphFile, err)
		}
		opts = append(opts, client.WithForkGraph(g))
	}
	if *f.id != "" {
		opts = append(opts, client.WithForkRunID(*f.id))
	}
	if *f.timeout <= 0 {
		return nil, &usageError{cmd: c, msg: fmt.Sprintf("-timeout: want a positive duration, got %s", *f.timeout)}
	}
	return opts, nil
}

// started prints a new run's id, and with -wait its outcome.
func (e *env) started(cl *client.Client, run, out string, f *forkFlagValues) error {
	if !*f.wait {
		if out == "json" {
			return e.writeJSON(map[string]string{"runId": run})
		}
		fmt.Fprintln(e.stdout, run)
		return nil
	}
	if out != "json" {
		fmt.Fprintln(e.stdout, run)
	}
	return e.waitAndPrint(cl, run, out, *f.timeout)
}

// keyValues is a repeatable KEY=VALUE flag.
type keyValues []string

func (k *keyValues) String() string { return strings.Join(*k, " ") }
func (k *keyValues) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=JSON, got %q", v)
	}
	*k = append(*k, v)
	return nil
}
