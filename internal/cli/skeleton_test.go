package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestSkeletonOrder runs a command through the skeleton: its flags and
// arguments are parsed and counted, its check runs before any connection
// (a refused command line needs no server: the one given here does not
// listen), and do sees what was parsed.
func TestSkeletonOrder(t *testing.T) {
	var checked, did int
	var seen *call
	c := &command{
		name: "thing", args: "RUN",
		min: 1, max: 1, conn: connClient,
		flags: func(fs *flag.FlagSet) action {
			n := fs.Int("n", 1, "a number")
			return action{
				check: func(e *env, x *call) error {
					checked++
					if *n < 0 {
						return &usageError{cmd: x.cmd, msg: "-n: want 0 or more"}
					}
					return nil
				},
				do: func(e *env, x *call) error { did++; seen = x; return nil },
			}
		},
	}
	e := &env{ctx: context.Background(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, help: &bytes.Buffer{}, output: "text"}
	noServer := []string{"-nats", "nats://127.0.0.1:1"}

	err := e.skeleton(c, append([]string{"r1", "-n", "-1"}, noServer...))
	var ue *usageError
	if !errors.As(err, &ue) || ue.cmd.name != "thing" || !strings.Contains(ue.msg, "-n") || checked != 1 || did != 0 {
		t.Fatalf("a refused check: err %v, checked %d, did %d; want the check's usage error, before connecting", err, checked, did)
	}
	err = e.skeleton(c, append([]string{"r1", "r2"}, noServer...))
	if !errors.As(err, &ue) || !strings.Contains(ue.msg, "want RUN, got 2 argument(s)") || checked != 1 {
		t.Fatalf("two arguments: err %v, checked %d; want the argument count's usage error, before the check", err, checked)
	}
	err = e.skeleton(c, append([]string{"r1", "-o", "yaml"}, noServer...))
	if !errors.As(err, &ue) || checked != 1 {
		t.Fatalf("-o yaml: err %v, checked %d; want a usage error, before the check", err, checked)
	}
	err = e.skeleton(c, append([]string{"r1"}, noServer...))
	if err == nil || errors.As(err, &ue) || checked != 2 || did != 0 {
		t.Fatalf("no server: err %v, checked %d, did %d; want the connection's error, after the check, and no do", err, checked, did)
	}

	c.conn = connNone
	if err := e.skeleton(c, []string{"-o", "json", "r9", "-n", "3"}); err != nil || did != 1 {
		t.Fatalf("offline command: err %v, did %d", err, did)
	}
	if seen.out != "json" || len(seen.args) != 1 || seen.args[0] != "r9" || seen.cl != nil || seen.nats != nil {
		t.Fatalf("do saw -o %q, args %q, client %v, nats %v; want json, [r9], none, none", seen.out, seen.args, seen.cl, seen.nats)
	}
}

// TestWithLeavesTheCommand: a subcommand's command is a copy, so that
// commands run at once (tests run them in parallel) never share one.
func TestWithLeavesTheCommand(t *testing.T) {
	run := func(*env, *command, []string) error { return nil }
	c := &command{name: "group", args: "NAME", run: run}
	sub := c.with(1, 2, connClient, func(*flag.FlagSet) action { return action{} })
	if sub == c || sub.name != "group" || sub.args != "NAME" || sub.min != 1 || sub.max != 2 || sub.conn != connClient || sub.flags == nil || sub.run != nil {
		t.Fatalf("with: got %+v", sub)
	}
	if c.min != 0 || c.max != 0 || c.conn != connNone || c.flags != nil || c.run == nil {
		t.Fatalf("with changed the command it copied: %+v", c)
	}
}
