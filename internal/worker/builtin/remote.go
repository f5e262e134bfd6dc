package builtin

import (
	"encoding/json"
	"fmt"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// toolOutcome is a tool's child run's end, as the work item's resume
// carries it (projection.ToolOutcome; not imported: the fold's package
// imports the graph's, whose tests import this one).
type toolOutcome struct {
	ChildRunID string          `json:"childRunId"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *events.Failure `json:"error,omitempty"`
}

// Tools of other queues and subgraph tools. A tool with a queue (its type
// run by that queue's workers, in any language) or a graph (a subgraph of
// the agent's graph) does not run in the agent's worker: the agent records
// the step that awaits it (kind "await", AwaitFor events.AwaitTool, the
// call's arguments in AwaitArgs) and ends its attempt (worker.ErrAwait).
// The coordinator starts a child run for the call, from the graph's
// config of the tool (never the worker's): a graph of the tool's one node
// on its queue, with the tool's config, timeout and maxAttempts as the
// node's (so the call has its own idempotency key, retry policy and
// timeout, and its own run in the log and the timeline), or the named
// subgraph; the arguments are the child's input. The child's end makes
// the agent's next attempt due, its work item carrying the outcome
// (toolOutcome, as worker.Input.Resume): the tool node's
// output (a subgraph's: the child's state), or its failure, given back to
// the model as the tool's result. The agent goes on from its steps: the
// model call that asked for the tool is not made again.

// remote reports whether the tool runs as a child run.
func (t *compiledTool) remote() bool { return t.Queue != "" || t.Graph != "" }

// remoteTool is the result of call tc of a tool that runs as a child run
// (args its checked arguments): the child's outcome, when the attempt
// goes on from the step that awaited it; else the step that awaits the
// child is recorded and worker.ErrAwait returned.
func remoteTool(in *worker.Input, tc ToolCall, args map[string]any, st *AgentStep, record func(kind, tool string) error) (*Message, error) {
	awaited := st.Awaiting == tc.ID && st.Kind == "await" && st.AwaitFor == events.AwaitTool
	if awaited && len(in.Resume) > 0 {
		st.Awaiting, st.AwaitFor, st.AwaitArgs = "", "", nil
		return toolResult(tc, in.Resume), nil
	}
	kind := "await"
	if awaited {
		kind = "" // this attempt's await, delivered again: recorded again as it is
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, worker.NonRetryable(events.FailureValidation, fmt.Sprintf("tool %q: its arguments do not encode: %v", tc.Name, err))
	}
	st.Awaiting, st.AwaitFor, st.AwaitArgs = tc.ID, events.AwaitTool, raw
	if err := record(kind, tc.Name); err != nil {
		return nil, err
	}
	return nil, worker.ErrAwait
}

// toolResult is the tool result message of call tc from its child run's
// outcome.
func toolResult(tc ToolCall, resume json.RawMessage) *Message {
	res := &Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Name}
	var out toolOutcome
	if err := json.Unmarshal(resume, &out); err != nil {
		res.Content, res.IsError = fmt.Sprintf("error: tool %q: its run's outcome could not be read: %v", tc.Name, err), true
		return res
	}
	if out.Status != "completed" {
		why := out.Status
		if out.Error != nil {
			why = out.Error.Error()
		}
		res.Content, res.IsError = fmt.Sprintf("error: tool %q failed (run %s): %s", tc.Name, out.ChildRunID, why), true
		return res
	}
	res.Content = string(out.Output)
	if res.Content == "" {
		res.Content = "null"
	}
	return res
}
