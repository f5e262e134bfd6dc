// Command weftbench measures Weft against the raw JetStream floor of the
// same message pattern, on the same server, in the same run. See package
// internal/bench and bench/README.md; run with -h for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-dev/weft/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, bench.ErrUsage):
		fmt.Fprintln(os.Stderr, "weftbench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "weftbench:", err)
		os.Exit(1)
	}
}
