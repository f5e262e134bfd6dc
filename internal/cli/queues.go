package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/worker"
)

var cmdQueues = &command{
	name:    "queues",
	summary: "task queues (workers, types, work in flight and waiting) and the concurrency and rate limits in use",
	help: `Lists the task queues: on each, the live workers, the node types they
serve there, and the work in flight (delivered to a worker, not yet
acknowledged) and waiting (not yet delivered). The work counts come from
the queues' consumers, which Weft's client role may not list: then they
are "?", and a note says so ('weft workers' lists the workers one by one).

Then the concurrency limits in use (nodes' concurrency: {max, key}, a
graph's limits by type and queue, type/<type> and queue/<queue>, and a
graph's run limit, whose holders and waiters are runs, node START) from
the flow bucket (weft-flow), which the coordinators keep by compare-and-set:
for each limit and key, the slots held of its max, the attempts waiting in
line and the oldest waiter. A key with nothing held and nothing waiting is
not listed. Rate limits (rate: {limit, per, key}) are listed first: the
rate, the tokens left (the units that may start at once now), the units
waiting for their turn, when the next turn is, and, while a RateLimited
failure (an HTTP 429's Retry-After) holds the key back, until when.
-v lists the holders and waiters (run, node, iteration, attempt).`,
	conn: connStore,
	flags: func(fs *flag.FlagSet) action {
		verbose := fs.Bool("v", false, "list the holders and waiters")
		return action{do: func(e *env, x *call) error {
			st, opts := x.store, x.opts
			queues, note, err := client.New(st, opts...).Queues(e.ctx)
			if err != nil {
				return err
			}
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
			if x.out == "json" {
				if es == nil {
					es = []flow.Entry{}
				}
				if rs == nil {
					rs = []flow.RateState{}
				}
				if queues == nil {
					queues = []client.Queue{}
				}
				return e.writeJSON(map[string]any{"queues": queues, "queuesNote": note, "limits": es, "rates": rs})
			}
			e.printQueues(queues, note)
			if len(rs) > 0 {
				tw := table(e.stdout)
				fmt.Fprintln(tw, "RATE LIMIT\tKEY\tRATE\tTOKENS\tWAITING\tNEXT TURN\tBACKING OFF")
				for _, r := range rs {
					fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%d\t%d\t%s\t%s\n", r.Limit, orDash(r.Key), r.Rate, r.Per, r.Tokens, r.Waiting, rateNext(r), rateBackoff(r))
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
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\n", en.Limit, orDash(en.Key), len(en.Holders), en.Max, en.Waiting(), oldest)
				if *verbose {
					for _, h := range en.Holders {
						fmt.Fprintf(tw, "\t  holds\t%s\t\t\n", h.ID())
					}
					for _, h := range en.Waiters {
						fmt.Fprintf(tw, "\t  waits\t%s\t\t\n", h.ID())
					}
					for _, p := range en.Parked {
						fmt.Fprintf(tw, "\t  parked\t%d more (priority %d, fairness %q)\t\t\n", p.Count, p.Priority, p.Fairness)
					}
				}
			}
			return tw.Flush()
		}}
	},
}

// rateNext says when a rate key's next turn is.
func rateNext(r flow.RateState) string {
	if d := time.Until(r.NextTurn); d > 0 {
		return "in " + d.Round(time.Millisecond).String()
	}
	return "now"
}

// rateBackoff says until when an outside refusal holds a rate key back.
func rateBackoff(r flow.RateState) string {
	if r.BackoffUntil == nil {
		return "-"
	}
	return "until " + r.BackoffUntil.Local().Format("15:04:05.000")
}

// printQueues prints the task queues, then a blank line.
func (e *env) printQueues(queues []client.Queue, note string) {
	if len(queues) == 0 {
		fmt.Fprintln(e.stdout, "no task queue has a live worker or work")
	} else {
		count := func(n *uint64) string {
			if n == nil {
				return "?"
			}
			return strconv.FormatUint(*n, 10)
		}
		tw := table(e.stdout)
		fmt.Fprintln(tw, "QUEUE\tWORKERS\tTYPES\tIN FLIGHT\tWAITING")
		for _, q := range queues {
			types := strings.Join(q.Types, ", ")
			if len(q.Workers) == 0 {
				types = "(no live worker)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", q.Name, len(q.Workers), orDash(types), count(q.InFlight), count(q.Waiting))
		}
		_ = tw.Flush()
	}
	if note != "" {
		fmt.Fprintln(e.stdout, "note: "+note)
	}
	fmt.Fprintln(e.stdout)
}

var cmdWorkers = &command{
	name:    "workers",
	summary: "the live workers: queues, node types, when each started and was last seen; and whether a coordinator is alive",
	help: `Lists the workers that announced themselves recently (the KV bucket the
workers heartbeat into): each one's name, task queues, node types, when it
started and when it was last seen; then whether a coordinator is alive.
'weft queues' shows the work on each queue.`,
	conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			cl := x.cl
			live, err := cl.LiveWorkers(e.ctx)
			if err != nil {
				return err
			}
			co, err := cl.Coordinators(e.ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			if x.out == "json" {
				if live == nil {
					live = []worker.Announcement{}
				}
				return e.writeJSON(map[string]any{"workers": live, "coordinatorAlive": co.AliveAt(now), "coordinatorLastSeen": co.LastSeen})
			}
			if len(live) == 0 {
				fmt.Fprintln(e.stdout, "no live worker")
			} else {
				tw := table(e.stdout)
				fmt.Fprintln(tw, "WORKER\tQUEUES\tTYPES\tSTARTED\tLAST SEEN")
				for _, a := range live {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s ago\n", a.Name, strings.Join(a.Queues, ", "), strings.Join(a.Types, ", "),
						duration(now.Sub(a.Started).Round(time.Second)), duration(now.Sub(a.Heartbeat).Round(time.Second)))
				}
				_ = tw.Flush()
			}
			switch {
			case co.LastSeen.IsZero():
				fmt.Fprintln(e.stdout, "coordinators: none has ever run here")
			case co.AliveAt(now):
				fmt.Fprintf(e.stdout, "coordinators: alive (last seen %s ago)\n", duration(now.Sub(co.LastSeen).Round(time.Second)))
			default:
				fmt.Fprintf(e.stdout, "coordinators: none alive (last seen %s ago)\n", duration(now.Sub(co.LastSeen).Round(time.Second)))
			}
			return nil
		}}
	},
}
