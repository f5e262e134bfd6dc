package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// followTimeline prints a run's events as they are stored, until the run
// ends: rows of fixed-width columns (a table cannot be aligned before its
// last row is known), or one JSON row a line.
//
// With tokens, the text the run's nodes stream (an agent's model tokens,
// which are not events) is printed as it comes too, between the rows: a
// line "~ NODE step N: " and the text, or with JSON one object
// {"token": {"node", "step", "text"}} a piece.
func (e *env) followTimeline(cl *client.Client, run string, asJSON, tokens bool) error {
	var tl timeliner
	if !asJSON {
		fmt.Fprintf(e.stdout, followFormat, "POS", "SEQ", "TIME", "EVENT", "NODE", "ITER", "ATTEMPT", "DETAILS")
	}
	enc := json.NewEncoder(e.stdout)
	var mu sync.Mutex // rows and tokens come from two goroutines
	streaming := ""   // the node and step whose text is being printed
	if tokens {
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		go func() {
			_ = cl.FollowTokens(ctx, run, func(t client.Token) bool {
				mu.Lock()
				defer mu.Unlock()
				if asJSON {
					_ = enc.Encode(map[string]any{"token": map[string]any{"node": t.Node, "step": t.Step, "text": t.Text}})
					return true
				}
				if at := t.Node + " step " + strconv.Itoa(t.Step); at != streaming {
					if streaming != "" {
						fmt.Fprintln(e.stdout)
					}
					streaming = at
					fmt.Fprintf(e.stdout, "~ %s: ", at)
				}
				fmt.Fprint(e.stdout, t.Text)
				return true
			})
		}()
	}
	return cl.Follow(e.ctx, run, func(ev client.RunEvent, _ *projection.State) bool {
		mu.Lock()
		defer mu.Unlock()
		r := tl.row(ev.Event)
		if asJSON {
			_ = enc.Encode(r)
			return true
		}
		if streaming != "" {
			fmt.Fprintln(e.stdout)
			streaming = ""
		}
		printFollowRow(e.stdout, r)
		return true
	})
}

const followFormat = "%-5s %-7s %-10s %-16s %-14s %-4s %-7s %s\n"

func printFollowRow(w io.Writer, r timelineRow) {
	for _, rd := range r.Routed {
		fmt.Fprintf(w, followFormat, "", "", "", "node.routed", rd.Node, num(rd.Iteration), "", rd.Summary+" (with the next event)")
	}
	node := orDash(r.Node)
	if r.Item != nil {
		node += "[" + strconv.Itoa(*r.Item) + "]"
	}
	details := r.Summary
	if r.Fold != "" {
		details = strings.TrimSpace("[" + r.Fold + "] " + details)
	}
	at := "+" + offset(r.Offset)
	if r.Clock != "" {
		at += " (" + r.Clock + ")"
	}
	fmt.Fprintf(w, followFormat, strconv.Itoa(r.Position), strconv.FormatUint(r.Seq, 10), at, orDash(shortType(r.Type)), node, num(r.Iteration), num(r.Attempt), details)
}

// isTerminal reports whether w is a terminal (a character device), where
// progress can be redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress says how far a run is: nodes done of nodes known, and what
// runs now.
func progress(st *projection.State) string {
	known := nodeOrder(st)
	done := 0
	var active []string
	for _, id := range known {
		n := st.Nodes[id]
		switch {
		case n == nil:
		case n.Status.Active():
			active = append(active, id+" "+string(n.Status))
		case n.Status != projection.NodeIdle:
			done++
		}
	}
	s := fmt.Sprintf("%d of %d nodes done", done, len(known))
	if len(active) > 0 {
		s += "; " + strings.Join(active, ", ")
	}
	return s
}

// terminal is isTerminal; tests replace it.
var terminal = isTerminal

// waitRun waits for a run's end. With show, it redraws a progress line on
// stdout at each of the run's events, and ends it before returning.
func (e *env) waitRun(ctx context.Context, cl *client.Client, run string, show bool) (*projection.State, error) {
	if !show {
		return cl.Wait(ctx, run)
	}
	last := ""
	err := cl.Follow(ctx, run, func(_ client.RunEvent, st *projection.State) bool {
		if p := progress(st); p != last {
			fmt.Fprintf(e.stdout, "\r\033[K%s", p)
			last = p
		}
		return true
	})
	fmt.Fprint(e.stdout, "\r\033[K")
	if err != nil {
		return nil, err
	}
	return cl.Get(ctx, run)
}

// waitAndPrint waits for a run's end (with progress on a terminal) and
// prints its outcome; a run that did not complete is an error.
func (e *env) waitAndPrint(cl *client.Client, run, out string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	st, err := e.waitRun(ctx, cl, run, out != "json" && terminal(e.stdout))
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("run %s has not ended after %s; see 'weft status %s'", run, timeout, run)
	}
	if err != nil {
		return err
	}
	if out == "json" {
		if err := e.writeJSON(st); err != nil {
			return err
		}
	} else {
		e.printOutcome(st)
	}
	return endedError(st)
}
