package cli

import (
	"flag"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// The command skeleton. Every command runs through it (a command with
// subcommands runs each of them through it): it makes the command's flag
// set with -o, adds the connection flags its connection needs and then the
// command's own (command.flags), parses flags and min to max positional
// arguments (the "want …, got n argument(s)" usage errors), lets the
// command check them before any connection is made (action.check: a
// mistake on the command line needs no server), connects, runs the
// command (action.do) and closes the connection.
//
// A command is a table entry:
//
//	var cmdThing = &command{
//		name: "thing", args: "RUN", summary: "…", help: `…`,
//		min: 1, max: 1, conn: connClient,
//		flags: func(fs *flag.FlagSet) action {
//			n := fs.Int("n", 10, "how many")
//			return action{do: func(e *env, x *call) error {
//				… x.cl, x.args[0], *n, x.out …
//			}}
//		},
//	}
//
// The flags function is where the command's flag values live: the action
// it returns reads them once they are parsed.

// connection is what the skeleton connects a command to.
type connection int

const (
	// connNone connects to nothing (the command is offline, or starts
	// its own server); no connection flags.
	connNone connection = iota
	// connClient is a client over the existing events stream (x.cl).
	connClient
	// connCreate is a client over the events stream, created when it is
	// missing with the stream flags' settings (x.cl).
	connCreate
	// connStore is the events store and the client options the
	// environment asks for (x.store, x.opts), for a command that makes
	// more than a client of it.
	connStore
	// connUI is the events store with the UI's credentials (x.store,
	// x.opts), for 'weft ui'.
	connUI
	// connAdminStore is the events store with the admin's credentials
	// (x.store), for the commands that remove or restore runs.
	connAdminStore
	// connJetStream is JetStream with the admin's credentials (x.js),
	// for the commands that read or change the stream's settings.
	connJetStream
	// connStreamFlags is connJetStream with the stream flags (-storage,
	// -replicas, …) registered, for a command that sets them.
	connStreamFlags
	// connSelf registers the connection flags (x.nats) and connects to
	// nothing: the command connects itself, as a role its flags choose
	// (the batch jobs: the admin to write a job, the client to read).
	connSelf
)

// action is what a command does with its parsed flags and arguments.
type action struct {
	// check, if set, judges them before any connection is made.
	check func(e *env, x *call) error
	// do does the command's work, connected.
	do func(e *env, x *call) error
}

// call is one run of a command through the skeleton: what it parsed and
// what it connected to.
type call struct {
	cmd  *command
	fs   *flag.FlagSet
	out  string   // the -o format: text or json
	args []string // the positional arguments
	// nats is the connection flags' configuration, after connecting the
	// namespace's (nil with connNone).
	nats *natsconn.Config

	cl    *client.Client      // connClient, connCreate
	store events.Store        // connStore, connUI, connAdminStore
	opts  []client.Option     // connStore, connUI: the client options to open a client with
	js    jetstream.JetStream // connJetStream, connStreamFlags
}

// invoke runs the command c with args: through the skeleton, or by its
// own run for a command that dispatches to subcommands.
func (c *command) invoke(e *env, args []string) error {
	if c.run != nil {
		return c.run(e, c, args)
	}
	return e.skeleton(c, args)
}

// skeleton runs c with args: flags, arguments, check, connection, do,
// close (see above).
func (e *env) skeleton(c *command, args []string) error {
	fs, out := e.flagSet(c)
	var cfg *natsconn.Config
	switch c.conn {
	case connNone:
	case connCreate, connStreamFlags:
		cfg = natsStreamFlags(fs)
	default:
		cfg = natsFlags(fs)
	}
	var a action
	if c.flags != nil {
		a = c.flags(fs)
	}
	pos, err := e.parse(c, fs, args, c.min, c.max)
	if err != nil {
		return err
	}
	x := &call{cmd: c, fs: fs, out: *out, args: pos, nats: cfg}
	if a.check != nil {
		if err := a.check(e, x); err != nil {
			return err
		}
	}
	closeConn, err := e.connectCall(x)
	if err != nil {
		return err
	}
	defer closeConn()
	return a.do(e, x)
}

// connectCall makes the connection x's command asks for; the function it
// returns closes it.
func (e *env) connectCall(x *call) (closeConn func(), err error) {
	c := x.cmd
	switch c.conn {
	case connClient, connCreate:
		x.cl, closeConn, err = e.connect(c, x.nats, c.conn == connCreate)
	case connStore:
		x.store, x.opts, closeConn, err = e.connectStore(c, x.nats, false)
	case connUI:
		x.store, x.opts, closeConn, err = e.connectStoreAs(c, x.nats, false, natsconn.RoleUI)
	case connAdminStore:
		x.store, closeConn, err = e.adminStore(c, x.nats)
	case connJetStream, connStreamFlags:
		x.js, closeConn, err = e.dial(c, x.nats)
	default:
		closeConn = func() {}
	}
	return closeConn, err
}

// with is a copy of c that the skeleton runs with these arguments,
// connection and flags: the command of a subcommand (c is left as it is).
func (c *command) with(min, max int, conn connection, flags func(fs *flag.FlagSet) action) *command {
	sub := *c
	sub.min, sub.max, sub.conn, sub.flags, sub.run = min, max, conn, flags, nil
	return &sub
}
