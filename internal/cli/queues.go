package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
)

var cmdQueues = &command{
	name:    "queues",
	summary: "concurrency and rate limits in use: per limit and key, slots held, attempts waiting, next turn",
	help: `Lists the concurrency limits in use (nodes' concurrency: {max, key}) from
the flow bucket (weft-flow), which the coordinators keep by compare-and-set:
for each limit and key, the slots held of its max, the attempts waiting in
line and the oldest waiter. A key with nothing held and nothing waiting is
not listed. Rate limits (rate: {limit, per, key}) are listed first: the
rate, the attempts waiting for their turn, and when the next turn is.
-v lists the holders and waiters (run, node, iteration, attempt).`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		cfg := natsFlags(fs)
		verbose := fs.Bool("v", false, "list the holders and waiters")
		if _, err := e.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		st, _, closeConn, err := e.connectStore(c, cfg, false)
		if err != nil {
			return err
		}
		defer closeConn()
		var es []flow.Entry
		var rs []flow.RateState
		l, err := flow.Lookup(e.ctx, eventlog.JetStream(st))
		switch {
		case errors.Is(err, flow.ErrNoBucket):
		case err != nil:
			return err
		default:
			if es, err = l.Entries(e.ctx); err != nil {
				return err
			}
			if rs, err = l.Rates(e.ctx); err != nil {
				return err
			}
		}
		if *out == "json" {
			if es == nil {
				es = []flow.Entry{}
			}
			if rs == nil {
				rs = []flow.RateState{}
			}
			return e.writeJSON(map[string]any{"limits": es, "rates": rs})
		}
		if len(rs) > 0 {
			tw := table(e.stdout)
			fmt.Fprintln(tw, "RATE LIMIT\tKEY\tRATE\tWAITING\tNEXT TURN")
			for _, r := range rs {
				next := "now"
				if d := time.Until(r.NextTurn); d > 0 {
					next = "in " + d.Round(time.Millisecond).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%d\t%s\n", r.Limit, orDash(r.Key), r.Rate, r.Per, r.Waiting, next)
			}
			_ = tw.Flush()
			if len(es) > 0 {
				fmt.Fprintln(e.stdout)
			}
		}
		if len(es) == 0 {
			if len(rs) == 0 {
				fmt.Fprintln(e.stdout, "no concurrency limit is in use")
			}
			return nil
		}
		tw := table(e.stdout)
		fmt.Fprintln(tw, "LIMIT\tKEY\tHELD\tWAITING\tOLDEST WAITER")
		for _, en := range es {
			oldest := "-"
			if len(en.Waiters) > 0 {
				oldest = en.Waiters[0].Since.Local().Format("15:04:05")
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\n", en.Limit, orDash(en.Key), len(en.Holders), en.Max, len(en.Waiters), oldest)
			if *verbose {
				for _, h := range en.Holders {
					fmt.Fprintf(tw, "\t  holds\t%s\t\t\n", h.ID())
				}
				for _, h := range en.Waiters {
					fmt.Fprintf(tw, "\t  waits\t%s\t\t\n", h.ID())
				}
			}
		}
		return tw.Flush()
	},
}
