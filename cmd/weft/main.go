// Command weft is Weft's command line: start, inspect, replay and steer
// workflow runs, validate graph files, and run the whole engine in one
// process (weft demo, weft dev). See package internal/cli; run "weft help"
// for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-dev/weft/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
