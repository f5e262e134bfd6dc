// Command weftbench measures Weft against the raw JetStream floor of the
// same message pattern, on the same server, in the same run. See package
// internal/bench and bench/README.md; run with -h for the flags.
package main

import (
	"github.com/weft-dev/weft/internal/bench"
	"github.com/weft-dev/weft/internal/daemon"
)

func main() { daemon.Main("weftbench", bench.ErrUsage, bench.Run) }
