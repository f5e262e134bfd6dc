package builtin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// Human approval of tools. A tool marked `approval: required` runs only
// once a person approved the call: the agent records the step that awaits
// it (kind "await", AgentStep.Awaiting the call's id; the worker records
// it with worker.RecordAwait) and ends its attempt (worker.ErrAwait). The
// coordinator makes the activation wait for a signal, as a human node's,
// up to the tool's approvalTimeout; `weft signal RUN NODE -data
// '{"approved": true}'` (or false, with a "reason") answers it, and the
// node's next attempt goes on from the await step with the answer
// (worker.Input.Resume). An approved call is recorded as approved (a step
// of kind "approval") and then runs; a rejected one is given back to the
// model as the tool's result, an error that says a person rejected it and
// why. A deadline that passes fails the node with a Timeout, and its
// timeout edges are taken, as a human node's are.

// ApprovalRequired is AgentTool.Approval of a tool whose calls wait for a
// person's approval.
const ApprovalRequired = "required"

// approvalAnswer is the data of the signal that answers an approval.
type approvalAnswer struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// approval is what becomes of tool call tc, which needs a person's
// approval: nil, nil when it was approved (recorded, it may run); the
// result to give the model when it was rejected; worker.ErrAwait once the
// step that awaits the approval is recorded (or a recording's error).
func approval(in *worker.Input, tc ToolCall, st *AgentStep, record func(kind, tool string) error) (*Message, error) {
	if st.Awaiting == tc.ID && st.Kind == "await" && st.AwaitFor != events.AwaitTool && len(in.Resume) > 0 {
		var ans approvalAnswer
		if err := json.Unmarshal(in.Resume, &ans); err != nil {
			ans = approvalAnswer{Reason: "the answer to the approval was not {\"approved\": true|false}: " + err.Error()}
		}
		st.Awaiting, st.AwaitFor = "", ""
		if ans.Approved {
			st.Approved = append(st.Approved, tc.ID)
			return nil, record("approval", tc.Name)
		}
		reason := strings.TrimSpace(ans.Reason)
		if reason == "" {
			reason = "no reason given"
		}
		return &Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Name, IsError: true,
			Content: fmt.Sprintf("error: a person rejected this call of tool %q: %s", tc.Name, reason)}, nil
	}
	kind := "await"
	if st.Awaiting == tc.ID && st.Kind == "await" {
		kind = "" // this attempt's await, delivered again: recorded again as it is
	}
	st.Awaiting, st.AwaitFor = tc.ID, events.AwaitApproval
	if err := record(kind, tc.Name); err != nil {
		return nil, err
	}
	return nil, worker.ErrAwait
}
