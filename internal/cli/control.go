package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

var cmdSignal = &command{
	name:    "signal",
	args:    "RUN... NODE | -q QUERY NODE",
	summary: "send a signal to a node of a run (-data JSON), e.g. a human node; several runs, or -q QUERY",
	help: `Appends a signal for NODE to the run's log: the input a human node waits
for. -data is any JSON value, inline or @FILE (@- for standard input). The
run must exist, not have ended, and have the node.

A signal is applied once: -id names it (letters, digits, '_' and '-'), and
sending the same id again changes nothing. Without -id it is derived from
the run, the node, the activation it is for and the data, so running the
same command again after an error (or a lost answer) does not answer the
node's next wait too; to send the same data again on purpose within two
minutes, give each its own -id.

A signal is refused (exit 1, with why) when NODE is not a human node,
does not wait for a signal now, or does not accept the data: its
outputSchema and config.checks (the message names the field or check).
-wait DURATION waits up to that long for NODE to wait first (a script
that starts a run and answers it at once).

Several run ids before NODE, or -q QUERY (the language of 'weft help
list'), signal NODE of each run: a batch, reported run by run (see 'weft
help cancel': -dry-run, -yes, -rate).`,
	min: 1, max: -1, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		data := fs.String("data", "", "the signal's data: JSON, or @FILE")
		id := fs.String("id", "", "the signal's id, so that sending it again is harmless (default: derived)")
		wait := fs.Duration("wait", 0, "wait up to this long for the node to wait for a signal (default: not at all)")
		bf := addBatchFlags(fs)
		var node string  // NODE
		var ids []string // the runs before it
		var raw json.RawMessage
		check := func(e *env, x *call) (err error) {
			node, ids = x.args[len(x.args)-1], x.args[:len(x.args)-1]
			if err := batchPositional(x.cmd, bf, ids); err != nil {
				return err
			}
			raw, err = e.jsonArg(x.cmd, "data", *data)
			return err
		}
		return action{check: check, do: func(e *env, x *call) error {
			c, cl := x.cmd, x.cl
			var payload any
			if raw != nil {
				payload = raw
			}
			var opts []client.SignalOption
			if *id != "" {
				opts = append(opts, client.WithSignalID(*id))
			}
			send := func(ctx context.Context, run string) error {
				if *wait > 0 {
					if err := awaitSignalWait(ctx, cl, run, node, *wait); err != nil {
						return err
					}
				}
				return cl.Signal(ctx, run, node, payload, opts...)
			}
			if len(ids) == 1 && !*bf.dryRun {
				if err := send(e.ctx, ids[0]); err != nil {
					return runError(ids[0], err)
				}
				if x.out == "json" {
					return e.writeJSON(map[string]string{"runId": ids[0], "node": node, "signal": "sent"})
				}
				fmt.Fprintf(e.stdout, "signal sent to node %s of run %s\n", node, ids[0])
				return nil
			}
			return e.runBatch(c, x.out, bf, cl, ids, batchOp{
				verb: "signal", done: "signal sent to node " + node, skip: endedSkip,
				do: func(ctx context.Context, run string) (string, error) { return "", send(ctx, run) },
			})
		}}
	},
}

var cmdUpdate = &command{
	name:    "update",
	args:    "RUN NODE",
	summary: "send input to a waiting human node and wait for the verdict (-data JSON)",
	help: `Sends -data (JSON, inline or @FILE, @- for standard input) to NODE, a
human node that waits now, and prints the verdict: accepted, with the
node's output and the run's state after it, or refused, with why (exit 1).
The update is recorded in the run's log either way; a refused one moves
nothing.

NODE must declare what it accepts (its outputSchema and config.checks), and
the data must fit it. An update is applied once: -id names it (letters,
digits, '_' and '-'; default: generated and printed), and sending the same
-id again prints the verdict recorded the first time; the same -id with
other data is refused. -wait DURATION waits up to that long for NODE to
wait first.`,
	min: 2, max: 2, conn: connClient,
	flags: func(fs *flag.FlagSet) action {
		data := fs.String("data", "", "the update's data: JSON, or @FILE")
		id := fs.String("id", "", "the update's id, so that sending it again returns the same verdict (default: generated)")
		wait := fs.Duration("wait", 0, "wait up to this long for the node to wait for input (default: not at all)")
		var raw json.RawMessage
		check := func(e *env, x *call) (err error) {
			raw, err = e.jsonArg(x.cmd, "data", *data)
			return err
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			var payload any
			if raw != nil {
				payload = raw
			}
			var opts []client.UpdateOption
			if *id != "" {
				opts = append(opts, client.WithUpdateID(*id))
			}
			if *wait > 0 {
				if err := awaitSignalWait(e.ctx, cl, pos[0], pos[1], *wait); err != nil {
					return runError(pos[0], err)
				}
			}
			res, err := cl.Update(e.ctx, pos[0], pos[1], payload, opts...)
			if res == nil {
				return runError(pos[0], err)
			}
			if x.out == "json" {
				if werr := e.writeJSON(map[string]any{"runId": pos[0], "node": pos[1], "update": res.ID, "accepted": res.Accepted,
					"reason": res.Reason, "output": res.Output, "state": res.State.Vars, "seq": res.Seq}); werr != nil {
					return werr
				}
				return err
			}
			if err != nil {
				return fmt.Errorf("update %s refused by run %s (recorded at sequence %d): %s", res.ID, pos[0], res.Seq, res.Reason)
			}
			fmt.Fprintf(e.stdout, "update %s accepted by node %s of run %s (sequence %d)\noutput: %s\nstate:  %s\n",
				res.ID, pos[1], pos[0], res.Seq, orNone(res.Output), orNone(varsJSON(res.State)))
			return nil
		}}
	},
}

// varsJSON is a state's shared state as JSON.
func varsJSON(s *projection.State) []byte {
	if s == nil || len(s.Vars) == 0 {
		return nil
	}
	b, _ := json.Marshal(s.Vars)
	return b
}

// orNone is JSON text, or "(none)".
func orNone(raw []byte) string {
	if len(raw) == 0 {
		return "(none)"
	}
	return string(raw)
}

var cmdCancel = &command{
	name:    "cancel",
	args:    "RUN... | -q QUERY",
	summary: "ask for runs to be cancelled (-reason TEXT; several runs, or -q QUERY)",
	help: `Appends a cancel request to the run's log. The coordinator ends the run as
cancelled and workers stop its nodes in flight; 'weft status' shows when it
has.

Several run ids, or -q QUERY (every run the query selects: the language of
'weft help list'), make a batch: each run is reported as it is done
(cancel requested, skipped because it ended, or failed and why), at most
-rate runs a second. A batch of a query asks first (-yes does not);
-dry-run lists the runs and what would be done, and does nothing:
  weft cancel -q 'status = "running" AND graph = "billing"' -dry-run
For a batch that survives its process's crash and can be resumed, and
whose progress others can read, 'weft batch cancel' (see 'weft help
batch').`,
	max: -1, conn: connClient,
	flags: requestFlags("cancel", (*client.Client).Cancel),
}

// requestFlags is the flags function of cancel and terminate: it appends the
// request send makes, with its -reason, to one run, several, or a
// query's, and says it did.
func requestFlags(verb string, send func(cl *client.Client, ctx context.Context, run, reason string) error) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		reason := fs.String("reason", "", "why, recorded in the log")
		bf := addBatchFlags(fs)
		check := func(e *env, x *call) error {
			return batchPositional(x.cmd, bf, x.args)
		}
		return action{check: check, do: func(e *env, x *call) error {
			c, pos, cl := x.cmd, x.args, x.cl
			if len(pos) == 1 && !*bf.dryRun {
				if err := send(cl, e.ctx, pos[0], *reason); err != nil {
					return runError(pos[0], err)
				}
				if x.out == "json" {
					return e.writeJSON(map[string]string{"runId": pos[0], verb: "requested"})
				}
				fmt.Fprintf(e.stdout, "%s requested for run %s\n", verb, pos[0])
				return nil
			}
			return e.runBatch(c, x.out, bf, cl, pos, batchOp{
				verb: verb, done: verb + " requested", skip: endedSkip,
				do: func(ctx context.Context, run string) (string, error) { return "", send(cl, ctx, run, *reason) },
			})
		}}
	}
}

// awaitSignalWait waits up to d for node of run to wait for a signal, or
// for the run to end (Signal then says so).
func awaitSignalWait(ctx context.Context, cl *client.Client, run, node string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		st, err := cl.Get(ctx, run)
		if err != nil {
			if ctx.Err() != nil {
				return nil // Signal says why not
			}
			return err
		}
		if ns := st.Nodes[node]; st.Status.Ended() || ns != nil && ns.Status == projection.NodeWaiting && ns.WaitingFor == "signal" {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
