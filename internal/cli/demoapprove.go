package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// stdinTerminal reports whether r, demo's stdin, is a terminal a person
// can answer an approval at; tests replace it.
var stdinTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTTY(f)
}

// approver answers the approvals of tool calls that a demo run waits for:
// every one the same way (auto, from -approve), or by asking at the
// terminal (ask), or else by printing the weft signal command that
// answers it and waiting for someone to run it.
type approver struct {
	cl      *client.Client
	run     string
	natsURL string
	// clientEnv, under -roles, is the client's credentials file: the
	// printed command reads it first, or the server refuses it.
	clientEnv string
	auto    string // "yes", "no", or "" (ask, or print)
	ask     bool
	in      *bufio.Reader
	out     io.Writer
	seen    map[string]bool            // node/iteration/call answered or announced
	steps   map[string]json.RawMessage // node -> its last await step's data
}

// parseApprove checks demo's -approve value.
func parseApprove(c *command, v string) (string, error) {
	switch v {
	case "", "yes", "no":
		return v, nil
	}
	return "", &usageError{cmd: c, msg: fmt.Sprintf("-approve: want yes or no, got %q", v)}
}

// wait waits for the run's end, following its events (client.Follow)
// and answering each approval as its wait begins; it returns the run's
// final state.
func (a *approver) wait(ctx context.Context) (*projection.State, error) {
	var ferr error
	err := a.cl.Follow(ctx, a.run, func(ev client.RunEvent, st *projection.State) bool {
		a.note(ev.Event)
		for _, w := range st.Waits() {
			if w.Await == nil || w.For != "signal" {
				continue
			}
			if ferr = a.answer(ctx, w); ferr != nil {
				return false
			}
		}
		return true
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	return a.cl.Wait(ctx, a.run)
}

// note keeps the data of an await step: it has the call's arguments.
func (a *approver) note(e *events.Event) {
	if e.Type != events.NodeStep {
		return
	}
	p, err := e.Payload()
	if d, ok := p.(*events.NodeStepData); err == nil && ok && d.Await != nil {
		a.steps[d.Node] = d.Data
	}
}

// args are the arguments the model gave call of node's tool, from its
// await step, or "" when they are not known.
func (a *approver) args(node, call string) string {
	var step struct {
		Messages []struct {
			ToolCalls []struct {
				ID        string `json:"id"`
				Arguments string `json:"arguments"`
			} `json:"toolCalls"`
		} `json:"messages"`
	}
	if json.Unmarshal(a.steps[node], &step) != nil {
		return ""
	}
	for _, m := range step.Messages {
		for _, tc := range m.ToolCalls {
			if tc.ID == call {
				return tc.Arguments
			}
		}
	}
	return ""
}

// readLine reads the person's answer, lower-cased and trimmed, or gives
// up when ctx ends first (the demo's -timeout).
func (a *approver) readLine(ctx context.Context) (string, error) {
	got := make(chan string, 1)
	go func() {
		line, _ := a.in.ReadString('\n') // EOF: an empty answer, a no
		got <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case line := <-got:
		return line, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// answer answers (or, with no way to, announces) the approval w waits
// for, once.
func (a *approver) answer(ctx context.Context, w projection.Wait) error {
	key := fmt.Sprintf("%s/%d/%s", w.Node, w.Iteration, w.Await.Call)
	if a.seen[key] {
		return nil
	}
	a.seen[key] = true
	args := a.args(w.Node, w.Await.Call)
	fmt.Fprintf(a.out, "node %s: tool %q (call %s) awaits approval, arguments %s\n", w.Node, w.Await.Tool, w.Await.Call, orDash(args))
	var approved bool
	var reason string
	switch {
	case a.auto != "":
		approved = a.auto == "yes"
		reason = "rejected by weft demo -approve no"
		fmt.Fprintf(a.out, "-approve %s: answering approved=%t\n", a.auto, approved)
	case a.ask:
		fmt.Fprint(a.out, "approve? [y/N] ")
		line, err := a.readLine(ctx)
		if err != nil {
			return err
		}
		approved = line == "y" || line == "yes"
		reason = "rejected at weft demo's prompt"
	default:
		call, _ := json.Marshal(w.Await.Call)
		creds := ""
		if a.clientEnv != "" {
			creds = fmt.Sprintf("set -a; . %s; set +a; ", a.clientEnv)
		}
		fmt.Fprintf(a.out, "answer it from another terminal (demo waits for the run, up to its -timeout):\n  %sweft signal %s %s -nats %s -data '{\"approved\": true, \"call\": %s}'\n  (or {\"approved\": false, \"reason\": \"...\", \"call\": %s})\n\n", creds, a.run, w.Node, a.natsURL, call, call)
		return nil
	}
	data := map[string]any{"approved": approved, "call": w.Await.Call}
	if !approved {
		data["reason"] = reason
	}
	if err := a.cl.Signal(ctx, a.run, w.Node, data); errors.Is(err, client.ErrSignalRefused) {
		// Answered already (from another terminal): the run goes on.
		fmt.Fprintf(a.out, "approval of call %s not sent: %v\n\n", w.Await.Call, err)
		return nil
	} else if err != nil {
		return fmt.Errorf("answering the approval of tool %q: %w", w.Await.Tool, err)
	}
	fmt.Fprintf(a.out, "approval of call %s: approved=%t, signalled\n\n", w.Await.Call, approved)
	return nil
}
