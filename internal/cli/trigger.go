package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
)

var cmdTrigger = &command{
	name:    "trigger",
	args:    "create|list|describe|pause|unpause|delete",
	summary: "start a run for every message on a NATS subject",
	help: `An event trigger starts one run of a graph per message on a subject of a
JetStream stream you own, consumed durably, so nothing is lost while the
coordinators are down.

  weft trigger create NAME -subject SUBJ [-stream STREAM] -graph FILE
        [-filter CEL] [-input CEL] [-id CEL] [-webhook NAME]
  weft trigger list
  weft trigger describe NAME      counts, pending messages, the latest bad messages
  weft trigger pause NAME [-note TEXT]   its messages wait in the stream
  weft trigger unpause NAME
  weft trigger delete NAME

The expressions see input (the message body as JSON) and local
(local.subject, local.headers, local.id: the Nats-Msg-Id). -filter gives a
bool; -input the run's input object (default: the body); -id the message's
identity (default: its Nats-Msg-Id, else its stream sequence). A message
that comes again with the same identity starts no second run. A message
the expressions cannot handle is counted and shown by describe, and the
trigger goes on. A trigger's runs are listed by 'weft list -trigger NAME'.
-webhook NAME says the subject is fed by webhook NAME of 'weft serve'
(-webhook NAME=SUBJ there): the runs are then labelled as that webhook's
('weft list -webhook NAME', origin "webhook NAME (trigger TRIGGER)").`,
	run: func(e *env, c *command, args []string) error {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
				fs, _ := e.flagSet(c)
				e.printHelp(c, fs)
				return flag.ErrHelp
			}
			return &usageError{cmd: c, msg: "want create, list, describe, pause, unpause or delete"}
		}
		sub := &command{name: "trigger " + args[0], args: "NAME", help: c.help}
		switch args[0] {
		case "create":
			return triggerCreate(e, sub, args[1:])
		case "list":
			sub.args = ""
			return triggerList(e, sub, args[1:])
		case "describe":
			return triggerDescribe(e, sub, args[1:])
		case "pause", "unpause", "delete":
			return triggerControl(e, sub, args[0], args[1:])
		}
		return &usageError{cmd: c, msg: fmt.Sprintf("unknown trigger command %q", args[0])}
	},
}

func triggerCreate(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		subject := fs.String("subject", "", "the subject whose messages start runs")
		// -stream names the user's stream here, as the command line
		// has it; the events stream comes from WEFT_STREAM (default WEFT).
		fs.Lookup("stream").Usage = "the stream to read the messages from (default: the one that captures -subject); here the events stream is WEFT_STREAM's"
		fs.Lookup("stream").DefValue = ""
		graphFile := fs.String("graph", "", "the graph file its runs run")
		types := fs.String("types", "", "node types of your own workers the graph uses, comma separated")
		filter := fs.String("filter", "", "CEL: only messages for which this is true")
		input := fs.String("input", "", "CEL: the run's input object (default: the message body)")
		id := fs.String("id", "", "CEL: the message's identity (default: its Nats-Msg-Id)")
		webhook := fs.String("webhook", "", "the webhook of 'weft serve' that publishes on -subject: its runs are labelled as that webhook's")
		stream := new(string) // the user's stream, from -stream
		var g *graph.Graph
		check := func(e *env, x *call) (err error) {
			c, cfg := x.cmd, x.nats
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "stream" {
					*stream = cfg.Stream
					cfg.Stream = os.Getenv("WEFT_STREAM")
					if cfg.Stream == "" {
						cfg.Stream = "WEFT"
					}
				}
			})
			if *subject == "" {
				return &usageError{cmd: c, msg: "-subject: required"}
			}
			if *graphFile == "" {
				return &usageError{cmd: c, msg: "-graph: required"}
			}
			if g, err = loadGraph(*graphFile, *types); err != nil {
				return graphError(*graphFile, err)
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			d, err := cl.CreateTrigger(e.ctx, pos[0], *subject, g, client.TriggerOptions{Stream: *stream, Filter: *filter, Input: *input, ID: *id, Webhook: *webhook})
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(d)
			}
			fmt.Fprintf(e.stdout, "trigger %s created: messages on %s in stream %s start runs of %s\n", d.Name, d.Subject, d.Stream, d.GraphName)
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

func triggerList(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			cl := x.cl
			ts, err := cl.ListTriggers(e.ctx)
			if err != nil {
				return err
			}
			if x.out == "json" {
				if ts == nil {
					ts = []*client.Trigger{}
				}
				return e.writeJSON(ts)
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "NAME\tSUBJECT\tSTREAM\tGRAPH\tPAUSED")
			for _, d := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Name, d.Subject, d.Stream, d.GraphName, yesNo(d.Paused))
			}
			return tw.Flush()
		}}
	}
	return e.skeleton(c.with(0, 0, connClient, flags), args)
}

func triggerDescribe(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			pos, cl := x.args, x.cl
			desc, err := cl.DescribeTrigger(e.ctx, pos[0])
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(desc)
			}
			d, st := desc.Trigger, desc.State
			tw := table(e.stdout)
			fmt.Fprintf(tw, "trigger\t%s\n", d.Name)
			fmt.Fprintf(tw, "subject\t%s (stream %s)\n", d.Subject, d.Stream)
			fmt.Fprintf(tw, "graph\t%s (%s)\n", d.GraphName, d.GraphDigest)
			for _, x := range [][2]string{{"webhook", d.Webhook}, {"filter", d.Filter}, {"input", d.Input}, {"id", d.ID}} {
				if x[1] != "" {
					fmt.Fprintf(tw, "%s\t%s\n", x[0], x[1])
				}
			}
			if d.Paused {
				fmt.Fprintf(tw, "paused\tyes: %s\n", d.PauseNote)
			} else {
				fmt.Fprintf(tw, "paused\tno\n")
			}
			fmt.Fprintf(tw, "runs started\t%d\n", st.Started)
			fmt.Fprintf(tw, "duplicates\t%d\n", st.Duplicates)
			fmt.Fprintf(tw, "filtered out\t%d\n", st.Filtered)
			fmt.Fprintf(tw, "bad messages\t%d\n", st.Bad)
			if desc.Pending >= 0 {
				fmt.Fprintf(tw, "pending\t%d\n", desc.Pending)
			}
			_ = tw.Flush()
			if len(st.LastBad) > 0 {
				fmt.Fprintln(e.stdout)
				tw = table(e.stdout)
				fmt.Fprintln(tw, "BAD MESSAGE\tSUBJECT\tAT\tERROR")
				for i := len(st.LastBad) - 1; i >= 0; i-- {
					b := st.LastBad[i]
					fmt.Fprintf(tw, "%s#%d\t%s\t%s\t%s\n", b.Stream, b.Seq, b.Subject, b.At.Format(time.RFC3339), b.Error)
				}
				return tw.Flush()
			}
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}

func triggerControl(e *env, c *command, verb string, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		note := fs.String("note", "", "why (pause; shown by describe)")
		return action{do: func(e *env, x *call) (err error) {
			pos, cl := x.args, x.cl
			switch verb {
			case "pause":
				err = cl.PauseTrigger(e.ctx, pos[0], *note)
			case "unpause":
				err = cl.UnpauseTrigger(e.ctx, pos[0])
			case "delete":
				err = cl.DeleteTrigger(e.ctx, pos[0])
			}
			if err != nil {
				return err
			}
			done := map[string]string{"pause": "paused", "unpause": "unpaused", "delete": "deleted"}[verb]
			if x.out == "json" {
				return e.writeJSON(map[string]string{"trigger": pos[0], "done": done})
			}
			fmt.Fprintf(e.stdout, "trigger %s %s\n", pos[0], done)
			return nil
		}}
	}
	return e.skeleton(c.with(1, 1, connClient, flags), args)
}
