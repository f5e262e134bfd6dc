// Command coordinator is Weft's coordinator daemon: it folds every run from
// the JetStream log and appends the decisions that move runs forward. See
// package internal/coordinatord; run with -h for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-dev/weft/internal/coordinatord"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := coordinatord.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, coordinatord.ErrUsage):
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}
