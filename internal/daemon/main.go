// Package daemon is what every Weft daemon shares: its main (Main: run
// until SIGINT or SIGTERM, then map the error to an exit code: 0 done, 2
// usage, 1 other; ParseFlags) and its bootstrap (Boot: the JSON logger,
// telemetry, the NATS connection that waits for a server, the /metrics,
// /healthz and /readyz server, and the events store), so that the
// coordinator daemon (internal/coordinatord) and the worker daemon
// (internal/nodeworker) differ only in what they run.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a program's body: it runs with the arguments until ctx ends.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main runs run with os.Args and exits: 0 on success, 2 when the error
// wraps usage, 1 otherwise, printing the error prefixed with name.
func Main(name string, usage error, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(Code(os.Stderr, name, usage, err))
}

// Code is the exit code for err, which it prints to w.
func Code(w io.Writer, name string, usage, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(w, name+":", err)
	if errors.Is(err, usage) {
		return 2
	}
	return 1
}

// ParseFlags parses a daemon's args into fs. The flag package would print
// a mistake, then every flag, and the daemon would print the mistake again
// on its way out; here -h prints the flags to help, and any other mistake
// is only returned, once, naming -h.
func ParseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(help)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(help)
		fmt.Fprintf(help, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return err
	case err != nil:
		return fmt.Errorf("%v (run '%s -h' for the flags)", err, fs.Name())
	}
	return nil
}
