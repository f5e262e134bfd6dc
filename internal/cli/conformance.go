package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"time"

	"github.com/weft-dev/weft/internal/conformance"
	"github.com/weft-dev/weft/pkg/events"
)

var cmdConformance = &command{
	name:    "conformance",
	summary: "check a worker SDK against the wire protocol (-worker 'CMD ARGS')",
	help: `Runs the worker conformance kit (docs/conformance.md) against a worker
program: starts an embedded NATS server under Weft's roles, a coordinator
and a client in this process, and the program as a separate process under
the worker role's credentials (WEFT_NATS_URL, WEFT_NATS_USER,
WEFT_NATS_PASSWORD, WEFT_STREAM, WEFT_QUEUE, WEFT_WORKER_NAME,
WEFT_CONF_EFFECTS), then runs graphs of the conformance node types against
it and injects faults: retries, timeouts, a cancel, SIGKILL and redelivery
to a second process, duplicate and junk items, items of ended runs, a
drain, a NATS restart. Prints one line per case (PASS name, FAIL name: why,
SKIP name: why) and exits 1 when any case failed.

-worker is the program and its arguments, split on spaces ('...' and "..."
quote), run from the current directory without a shell. -short runs the
quick subset, -run REGEXP the cases whose name matches, -v shows the
engine's and the worker's logs, -keep keeps the kit's directory (logs,
effects file, store).`,
	flags: func(fs *flag.FlagSet) action {
		workerCmd := fs.String("worker", "", "the worker program and its arguments (required)")
		short := fs.Bool("short", false, "run the quick subset of the cases")
		match := fs.String("run", "", "run only the cases whose name matches this regular expression")
		verbose := fs.Bool("v", false, "show the engine's and the worker's logs")
		keep := fs.Bool("keep", false, "keep the kit's directory (printed at the end)")
		dir := fs.String("dir", "", "the kit's directory (default a temporary one)")
		timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole suite")
		return action{do: func(e *env, x *call) error {
			c := x.cmd
			if *workerCmd == "" {
				return &usageError{cmd: c, msg: "-worker: the worker's command is required"}
			}
			argv, err := conformance.SplitCommand(*workerCmd)
			if err != nil {
				return &usageError{cmd: c, msg: "-worker: " + err.Error()}
			}
			o := conformance.Options{Worker: argv, Short: *short, Out: e.stdout, Keep: *keep, Dir: *dir}
			if *match != "" {
				if o.Match, err = regexp.Compile(*match); err != nil {
					return &usageError{cmd: c, msg: "-run: " + err.Error()}
				}
			}
			if *verbose {
				o.Log = e.stderr
			}
			// A key ring in WEFT_ENCRYPT_KEYS runs the kit sealed: the kit's
			// engine seals and opens events with it, and the worker under test
			// inherits the variable.
			ring, err := events.LoadKeys("")
			if err == nil && ring != nil {
				err = events.UseKeys(ring)
			}
			if err != nil {
				return &usageError{cmd: c, msg: err.Error()}
			}
			ctx, cancel := context.WithTimeout(e.ctx, *timeout)
			defer cancel()
			results, err := conformance.Run(ctx, o)
			var pass, fail, skip int
			for _, r := range results {
				switch r.Status {
				case conformance.Pass:
					pass++
				case conformance.Fail:
					fail++
				case conformance.Skip:
					skip++
				}
			}
			if len(results) > 0 {
				fmt.Fprintf(e.stdout, "%d passed, %d failed, %d skipped\n", pass, fail, skip)
			}
			if errors.Is(err, conformance.ErrFailed) {
				return errors.New("conformance: the worker failed a case")
			}
			return err
		}}
	},
}
