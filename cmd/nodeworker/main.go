// Command nodeworker is Weft's worker daemon: it runs the nodes of workflow
// runs, with the built-in executors, from NATS JetStream task queues. See
// package internal/nodeworker; run with -h for the flags.
package main

import (
	"github.com/weft-dev/weft/internal/daemon"
	"github.com/weft-dev/weft/internal/nodeworker"
)

func main() { daemon.Main("nodeworker", nodeworker.ErrUsage, nodeworker.Run) }
