// Command nodeworker is Weft's worker daemon: it runs the nodes of workflow
// runs, with the built-in executors, from NATS JetStream task queues. See
// package internal/nodeworker; run with -h for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-dev/weft/internal/nodeworker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := nodeworker.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, nodeworker.ErrUsage):
		fmt.Fprintln(os.Stderr, "nodeworker:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "nodeworker:", err)
		os.Exit(1)
	}
}
