// Command coordinator is Weft's coordinator daemon: it folds every run from
// the JetStream log and appends the decisions that move runs forward. See
// package internal/coordinatord; run with -h for the flags.
package main

import (
	"github.com/weft-dev/weft/internal/coordinatord"
	"github.com/weft-dev/weft/internal/daemon"
)

func main() { daemon.Main("coordinator", coordinatord.ErrUsage, coordinatord.Run) }
