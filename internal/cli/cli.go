// Package cli is the weft command: start, inspect, replay and steer runs,
// validate graph files, and run the whole engine in one process (demo, dev).
//
// Debugging by replay: 'weft events' shows each event's position in its run
// (1, 2, 3…), the points 'weft state -at', 'weft diff' and 'weft fork -at'
// take (-seq takes stream sequences instead); 'weft fork' starts a new run
// from any point with edited state or another graph, 'weft reset' ends a run
// and forks it from before a node ran, and 'weft replay' checks recorded
// runs against a changed graph (package replay).
//
// Run parses a command line and runs one subcommand; Main also prints the
// error and maps it to an exit status, which is all cmd/weft does. Every
// subcommand runs through one skeleton (skeleton.go): its own
// flag.FlagSet, with -o; flags and arguments in any order ("weft run g.yaml
// -wait" and "weft run -wait g.yaml" are the same) and counted; a check of
// them before any connection; the connection; the work; the close. A
// command is a table entry (a *command) saying its arguments, its
// connection and its flags.
// Commands that talk to NATS take the shared connection flags of package
// natsconn (-nats, -creds, -tls-*, -stream, with WEFT_* environment
// defaults). Output is for people by default (aligned columns); -o json
// gives JSON for programs.
//
// Exit statuses: 0 success; 1 failure, including a run that is not found,
// a run waited for that did not complete, and invalid graph files; 2 a
// usage error (unknown command, wrong arguments or flags).
//
// The CLI never opens the events stream with settings of its own: when the
// stream exists it adopts the stream's storage, replicas and limits, so that
// a "weft status" with default flags cannot reconfigure a production stream.
// Changing them is 'weft admin apply', which changes only the settings it
// is given and prints what changed; 'weft admin settings' shows them.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/weft-dev/weft/internal/suggest"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// ErrUsage is wrapped by errors about the command line: Main exits with
// status 2 on them.
var ErrUsage = errors.New("usage")

// command is one subcommand, run through the skeleton (skeleton.go).
type command struct {
	name    string
	args    string // the positional arguments, as usage shows them
	summary string // one line, for the command list
	help    string // a paragraph, for "weft help NAME"

	min, max int                           // how many positional arguments it takes (max -1: any)
	conn     connection                    // what it connects to
	flags    func(fs *flag.FlagSet) action // adds its own flags; the action runs with them

	// run, instead of the above, is a command made of subcommands: it
	// picks one and runs it through the skeleton.
	run func(e *env, c *command, args []string) error
}

var commands []*command

func init() {
	commands = []*command{
		cmdRun, cmdStatus, cmdDescribe, cmdList, cmdEvents, cmdState, cmdDiff,
		cmdFork, cmdReset, cmdReplay,
		cmdSignal, cmdUpdate, cmdCancel, cmdTerminate, cmdDelete, cmdBatch, cmdQueues, cmdWorkers, cmdValidate, cmdSchedule, cmdTrigger, cmdServe, cmdDemo, cmdDev, cmdUI, cmdAdmin, cmdRoles, cmdKeys, cmdConformance,
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// help receives a command's help: stderr for "-h", stdout for "help".
	help io.Writer
	// output is the default of every command's -o flag.
	output string
}

// Run runs the weft command line args (without the program name). Errors
// about the command line wrap ErrUsage; a run that is not found wraps
// events.ErrRunNotFound.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, help: stderr}
	global := flag.NewFlagSet("weft", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.StringVar(&e.output, "o", "text", "output format: text or json")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil
		}
		return &usageError{msg: err.Error()}
	}
	if err := checkOutput(e.output); err != nil {
		return err
	}
	args = global.Args()
	if len(args) == 0 {
		usage(stderr)
		return &usageError{msg: "no command"}
	}
	name, args := args[0], args[1:]
	if name == "help" {
		return e.helpCommand(args)
	}
	c := lookup(name)
	if c == nil {
		return &usageError{msg: fmt.Sprintf("unknown command %q%s", name, commandSuggestion(name))}
	}
	err := c.invoke(e, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commandSuggestion is " (did you mean status?)" for a name close to a
// command's, else "".
func commandSuggestion(name string) string {
	names := []string{"help"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	if s := suggest.Closest(name, names); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// Main runs args like Run, prints the error, if any, on stderr, and
// returns the exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Traces and metrics as the OTEL_* variables say (off by default); a
	// bad setting is reported, not fatal.
	shutdown, err := telemetry.Setup(ctx, "weft")
	if err != nil {
		fmt.Fprintf(stderr, "weft: telemetry off: %v\n", err)
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	err = Run(ctx, args, stdin, stdout, stderr)
	// Spans are exported as soon as the command is done, before its
	// output is read: a CLI killed by a closed pipe loses nothing.
	_ = telemetry.Flush(context.WithoutCancel(ctx))
	if err == nil {
		return 0
	}
	if re := (*reportedError)(nil); errors.As(err, &re) {
		return 1 // said on stdout already
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.cmd != nil {
			fmt.Fprintf(stderr, "weft %s: %s\nusage: weft %s\nRun 'weft help %s' for its flags.\n", ue.cmd.name, ue.msg, ue.cmd.synopsis(), ue.cmd.name)
		} else {
			fmt.Fprintf(stderr, "weft: %s\nRun 'weft help' for usage.\n", ue.msg)
		}
		return 2
	}
	fmt.Fprintf(stderr, "weft: %v\n", err)
	return 1
}

// usageError is a mistake on the command line.
type usageError struct {
	cmd *command
	msg string
}

func (e *usageError) Error() string {
	if e.cmd != nil {
		return "weft " + e.cmd.name + ": " + e.msg
	}
	return e.msg
}

func (e *usageError) Is(target error) bool { return target == ErrUsage }

// reportedError is a failure the command's output already said (a run
// -wait waited for that failed): Main exits 1 without saying it again.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// notFoundError says a run has no events.
type notFoundError struct {
	run string
	err error
}

func (e *notFoundError) Error() string { return "run " + e.run + " not found" }
func (e *notFoundError) Unwrap() error { return e.err }

// runError turns a client error about run into the CLI's message for it.
func runError(run string, err error) error {
	if errors.Is(err, events.ErrRunNotFound) {
		return &notFoundError{run: run, err: err}
	}
	var fse *projection.ForkStateError
	if errors.As(err, &fse) {
		return &forkStateError{err: err, fse: fse}
	}
	return err
}

// forkStateError says what is wrong with a fork's state one problem a
// line (node, field, what).
type forkStateError struct {
	err error
	fse *projection.ForkStateError
}

func (e *forkStateError) Error() string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(e.err.Error(), e.fse.Error()))
	fmt.Fprintf(&b, "%s, %d problem(s); nothing was written:", projection.ErrInvalidForkState, len(e.fse.Problems))
	for _, p := range e.fse.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

func (e *forkStateError) Unwrap() error { return e.err }

func (c *command) synopsis() string {
	s := c.name
	if c.args != "" {
		s += " " + c.args
	}
	return s + " [flags]"
}

const intro = `Weft runs workflow graphs on NATS JetStream: every fact about a run is an
event in the log, and a run's state is the fold of its events.

Usage:
  weft [-o json] <command> [arguments] [flags]

Commands:
`

const outro = `
Commands that talk to NATS take -nats URL (default nats://127.0.0.1:4222),
-user NAME and -password (or -creds FILE, -nkey FILE), -tls-ca/-tls-cert/
-tls-key FILE and -stream NAME, with the environment defaults WEFT_NATS_URL,
WEFT_NATS_USER, WEFT_NATS_PASSWORD, WEFT_NATS_CREDS, WEFT_NATS_NKEY,
WEFT_NATS_TLS_CA, WEFT_NATS_TLS_CERT, WEFT_NATS_TLS_KEY and WEFT_STREAM
('weft roles' makes per-role users). Every command takes -o json for
machine-readable output.

Quick start:
  weft demo                       run examples/hello.yaml in one process
  weft dev                        keep an embedded NATS, coordinator and worker up
  weft run examples/hello.yaml -input '{"name":"Ada"}' -wait

Run 'weft help <command>' for a command's flags.
`

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString(intro)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-24s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintf(&b, "  %-24s %s\n", "help [COMMAND]", "show this help, or a command's")
	b.WriteString(outro)
	fmt.Fprint(w, b.String())
}

// helpCommand is "weft help [COMMAND]": the usage, or a command's help on
// stdout.
func (e *env) helpCommand(args []string) error {
	switch len(args) {
	case 0:
		usage(e.stdout)
		return nil
	case 2:
		if c := lookup(args[0]); c == cmdAdmin || c == cmdUI && args[1] == "hash-password" {
			e.help = e.stdout
			if err := c.invoke(e, []string{args[1], "-h"}); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
	case 1:
		c := lookup(args[0])
		if c == nil {
			return &usageError{msg: fmt.Sprintf("help: unknown command %q", args[0])}
		}
		e.help = e.stdout
		if err := c.invoke(e, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil
	}
	return &usageError{msg: "help takes at most one command"}
}
