package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

var cmdRun = &command{
	name:    "run",
	args:    "GRAPHFILE",
	summary: "start a run of a graph file; -wait for its end",
	help: `Loads and validates the graph in GRAPHFILE (.yaml, .yml or .json), starts a
run of it and prints the run's id. -input seeds the run's shared state and
-invocation sets its read-only runtime context; both are JSON objects, inline
or @FILE (@- for standard input). With -wait it waits for the run's end and
prints its status and state; a run that fails or is cancelled exits 1. It
waits until the run ends, or -timeout passes (default: no limit). On a
terminal, -wait shows the run's progress meanwhile (nodes done of nodes
known, and those running); piped, it prints only the outcome.
Node types other than the built-in ones are load errors unless -types names
them (the types your own workers serve).`,
	min: 1, max: 1, conn: connCreate,
	flags: func(fs *flag.FlagSet) action {
		input := fs.String("input", "", "the run's input: a JSON object, or @FILE")
		invocation := fs.String("invocation", "", "the run's invocation state: a JSON object, or @FILE")
		id := fs.String("id", "", "the run id (default a new, time-ordered id)")
		wait := fs.Bool("wait", false, "wait for the run to end and print its state")
		timeout := fs.Duration("timeout", 0, "with -wait, how long to wait at most (default: until the run ends)")
		types := typesFlag(fs)
		var in, inv json.RawMessage // -input, -invocation
		var g *graph.Graph
		check := func(e *env, x *call) (err error) {
			c, pos := x.cmd, x.args
			if in, err = e.objectArg(c, "input", *input); err != nil {
				return err
			}
			if inv, err = e.objectArg(c, "invocation", *invocation); err != nil {
				return err
			}
			if *timeout < 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("-timeout: want a positive duration, or 0 for none, got %s", *timeout)}
			}
			if *id != "" && !eventlog.ValidToken(*id) {
				return &usageError{cmd: c, msg: fmt.Sprintf("-id: %q is not a valid run id (letters, digits, '-' and '_', at most 128, starting with a letter or digit)", *id)}
			}
			if g, err = loadGraph(pos[0], *types); err != nil {
				return graphError(pos[0], err)
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			c, cl := x.cmd, x.cl
			opts := []client.StartOption{client.WithInput(in), client.WithInvocation(inv)}
			if *id != "" {
				opts = append(opts, client.WithRunID(*id))
			}
			sctx, span := commandSpan(e.ctx, c.name)
			run, err := cl.Start(sctx, g, opts...)
			span.End()
			if err != nil {
				return err
			}
			if span.SpanContext().IsValid() {
				// Exported now, not at exit: a -wait may be cut short.
				_ = telemetry.Flush(e.ctx)
				fmt.Fprintf(e.stderr, "trace %s\n", span.SpanContext().TraceID())
			}
			if !*wait {
				if x.out == "json" {
					return e.writeJSON(map[string]string{"runId": run})
				}
				fmt.Fprintln(e.stdout, run)
				return nil
			}
			if x.out != "json" {
				fmt.Fprintln(e.stdout, run)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			if *timeout > 0 {
				ctx, cancel = context.WithTimeout(e.ctx, *timeout)
			}
			defer cancel()
			st, err := e.waitRun(ctx, cl, run, x.out != "json" && terminal(e.stdout))
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("run %s has not ended after %s; see 'weft status %s'", run, *timeout, run)
			}
			if err != nil {
				return err
			}
			if x.out == "json" {
				if err := e.writeJSON(st); err != nil {
					return err
				}
			} else {
				e.printOutcome(st)
				if err := endedError(st); err != nil {
					// The outcome line said it: once is enough.
					return &reportedError{err: err}
				}
			}
			return endedError(st)
		}}
	},
}

// endedError is nil for a completed run and an error saying how it ended
// otherwise.
func endedError(st *projection.State) error {
	switch st.Status {
	case projection.RunCompleted:
		return nil
	case projection.RunFailed:
		return fmt.Errorf("run %s failed: %v", st.RunID, st.Error)
	case projection.RunCancelled:
		return fmt.Errorf("run %s was %s", st.RunID, shownStatus(st))
	}
	return fmt.Errorf("run %s is %s", st.RunID, shownStatus(st))
}

// typesFlag adds the -types flag: node types of the user's own workers.
func typesFlag(fs *flag.FlagSet) *string {
	return fs.String("types", os.Getenv("WEFT_NODE_TYPES"), "node types your own workers serve, besides the built-in ones, comma separated (env WEFT_NODE_TYPES)")
}

// loadGraph loads a graph file, accepting the extra node types.
func loadGraph(file, types string) (*graph.Graph, error) {
	var extra []string
	for t := range strings.SplitSeq(types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			extra = append(extra, t)
		}
	}
	return graph.LoadFile(file, graph.WithTypes(extra...), graph.WithTypeHint(typeHint), graph.WithConditionHint(conditionHint))
}

// What a graph error tells a user of the command line to do.
const (
	typeHint      = "name a worker's own types with -types"
	conditionHint = "a Go condition needs a program that registers it, which the CLI is not: write the condition in CEL, or run the graph with pkg/weft's WithConditions"
)

// graphError lists a graph file's problems, one per line; each names the
// file, and the node, edge and field where it applies.
func graphError(file string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("graph file %s does not exist", file)
	}
	probs := problems(err)
	if len(probs) == 1 {
		return err
	}
	msg := fmt.Sprintf("%d problems in %s:", len(probs), file)
	for _, p := range probs {
		msg += "\n  " + p
	}
	return errors.New(msg)
}

// problems splits a joined error into its messages.
func problems(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, problems(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

var cmdValidate = &command{
	name:    "validate",
	args:    "GRAPHFILE...",
	summary: "check graph files (no NATS needed)",
	help: `Loads, validates and compiles each graph file and reports every problem,
each with the file, node, edge and field it is in. Node types other than the
built-in ones are errors unless -types names them. An edge condition that
reads a field its source cannot provide (an output property its
outputSchema does not list, any output on an edge from START) is a problem
too, unless has(...) guards it. Exits 1 if any file is invalid.`,
	min: 1, max: -1,
	flags: func(fs *flag.FlagSet) action {
		types := typesFlag(fs)
		return action{do: func(e *env, x *call) error {
			files := x.args
			type report struct {
				File     string   `json:"file"`
				Valid    bool     `json:"valid"`
				Graph    string   `json:"graph,omitempty"`
				Nodes    int      `json:"nodes,omitempty"`
				Digest   string   `json:"digest,omitempty"`
				Problems []string `json:"problems,omitempty"`
			}
			var reports []report
			bad := 0
			for _, f := range files {
				g, err := loadGraph(f, *types)
				if err == nil {
					// Conditions that read a field nothing provides.
					err = graph.CheckConditionReads(g)
				}
				r := report{File: f, Valid: err == nil}
				if err != nil {
					bad++
					r.Problems = problems(err)
					if errors.Is(err, os.ErrNotExist) {
						r.Problems = []string{f + ": no such file"}
					}
				} else {
					r.Graph, r.Nodes, r.Digest = g.Definition().Name, len(g.Nodes()), g.Digest()
				}
				reports = append(reports, r)
				if x.out == "json" {
					continue
				}
				if r.Valid {
					fmt.Fprintf(e.stdout, "%s: ok (graph %s, %d nodes, %s)\n", f, r.Graph, r.Nodes, shortDigest(r.Digest))
					continue
				}
				for _, p := range r.Problems {
					fmt.Fprintln(e.stdout, p)
				}
			}
			if x.out == "json" {
				if err := e.writeJSON(reports); err != nil {
					return err
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d graph files invalid", bad, len(files))
			}
			return nil
		}}
	},
}

func shortDigest(d string) string { return truncate(d, 20) }
