package decider

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/nodeconfig"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// An attempt that ended awaiting something (a node step with Await: an
// agent's tool call that needs a person's approval, or that runs as a
// child run) leaves its activation waiting (projection.WaitingForAwait).
// The coordinator decides the wait, from the node's config in the graph,
// never from the worker's word:
//
//   - an approval: a signal, as a human node's, up to the deadline the
//     tool's approvalTimeout gives (none without one); a deadline that
//     passes fails the activation with FailureTimeout, not retryable,
//     and its timeout edges are taken as a human node's are (onFailure);
//   - a tool of another queue or a subgraph tool: a child run
//     (awaitTool), started as a subgraph node's is, under an id of the
//     activation and the attempt (ToolChildRunID).
//
// What came (the signal's data, the child's end) makes the next attempt
// due (the fold: NodeRetryDue with Resume), readied here with it
// (afterOutcome). The attempts that ended so are not failures: the retry
// policy counts attempts without them (maxAttempts).

// awaitWait decides the wait of an activation whose attempt awaits.
func (d *decider) awaitWait(n *graph.Node, ns *projection.NodeState) bool {
	if ns.Await == nil {
		return false
	}
	ref := events.NodeRef{Node: n.ID, Iteration: ns.Iteration}
	if ns.Await.For == events.AwaitTool {
		d.awaitTool(n, ns, ref)
		return true
	}
	p := &events.NodeWaitingData{NodeRef: ref, For: "signal", Attempt: ns.Attempt}
	if t := approvalTimeout(n, ns.Await.Tool); t > 0 {
		at := d.now.Add(t.D())
		p.Deadline = &at
	}
	d.emit(p, eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key(), strconv.Itoa(ns.Attempt), "await"))
	if p.Deadline != nil {
		id := projection.AwaitDeadlineTimerID(ref, ns.Attempt)
		d.timer(id, *p.Deadline, &events.TimerFiredData{TimerID: id, Purpose: "deadline", Ref: ref, Attempt: ns.Attempt})
	}
	return true
}

// agentTool is what the coordinator reads of a tool in an agent node's
// config (the graph's, never the worker's word).
type agentTool struct {
	Name            string          `json:"name"`
	Type            string          `json:"type"`
	Queue           string          `json:"queue"`
	Graph           string          `json:"graph"`
	Config          json.RawMessage `json:"config"`
	Timeout         json.RawMessage `json:"timeout"`
	MaxAttempts     int             `json:"maxAttempts"`
	ApprovalTimeout graph.Duration  `json:"approvalTimeout"`
}

// toolOf is the tool named name in agent node n's config.
func toolOf(n *graph.Node, name string) (agentTool, bool) {
	var cfg struct {
		Tools []agentTool `json:"tools"`
	}
	_ = json.Unmarshal(n.Config, &cfg) // checked when the graph was loaded
	for _, t := range cfg.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return agentTool{}, false
}

// approvalTimeout is the approvalTimeout of the tool named tool in agent
// node n's config (0: none, or no such tool).
func approvalTimeout(n *graph.Node, tool string) graph.Duration {
	t, _ := toolOf(n, tool)
	return t.ApprovalTimeout
}

// ToolGraphPrefix starts the name of the graph of a tool's child run that
// runs one node of another queue: its node is ToolNode, and the child's
// output is that node's (toolOutcome).
const (
	ToolGraphPrefix = "tool:"
	ToolNode        = "tool"
)

// awaitTool starts the child run of the tool call that attempt of
// activation ref awaits: the named subgraph, or a graph of the tool's one
// node on its queue, with the tool's config, timeout and attempts (so its
// own idempotency key, retry policy and timeout, in the child's log). Its
// input is the call's arguments. The node waits for it (For "child",
// the attempt named); its end resumes the node (the fold).
func (d *decider) awaitTool(n *graph.Node, ns *projection.NodeState, ref events.NodeRef) {
	name := ns.Await.Tool
	t, ok := toolOf(n, name)
	var child *graph.Graph
	var err error
	switch {
	case !ok || t.Queue == "" && t.Graph == "":
		err = fmt.Errorf("node %q: its attempt %d awaits tool %q, which is no tool of another queue nor a subgraph in its config", n.ID, ns.Attempt, name)
	case t.Graph != "":
		if child, ok = d.g.Subgraph(t.Graph); !ok {
			err = fmt.Errorf("node %q: tool %q: no subgraph %q", n.ID, name, t.Graph)
		}
	default:
		child, err = toolGraph(n.ID, t)
	}
	if err != nil {
		d.failRun(events.Failure{Type: events.FailureInvalidGraph, Message: err.Error()}, n.ID)
		return
	}
	id := ToolChildRunID(d.s.RunID, d.s.Nonce, ref, ns.Attempt)
	attempt := strconv.Itoa(ns.Attempt)
	d.emit(&events.NodeWaitingData{NodeRef: ref, For: "child", Attempt: ns.Attempt},
		eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key(), attempt, "await"))
	d.emit(&events.ChildRunStartedData{NodeRef: ref, ChildRunID: id, Graph: child.Definition().Name, Attempt: ns.Attempt},
		eventlog.DecisionID(d.s.RunID, events.ChildRunStarted, ref.Key(), attempt))
	input := ns.Await.Args
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	d.childStart(id, child, input, &events.ParentRef{RunID: d.s.RunID, Ref: ref, Attempt: ns.Attempt}, "run "+d.s.RunID+" (tool "+name+")")
}

// toolGraph is the graph of a tool's child run that runs the tool's node
// type on its queue: START → ToolNode → END.
func toolGraph(node string, t agentTool) (*graph.Graph, error) {
	tn := map[string]any{"id": ToolNode, "type": t.Type, "queue": t.Queue}
	if len(t.Config) > 0 {
		tn["config"] = t.Config
	}
	if len(t.Timeout) > 0 {
		d, err := nodeconfig.ParseDuration(t.Timeout)
		if err != nil {
			return nil, fmt.Errorf("node %q: tool %q: timeout: %w", node, t.Name, err)
		}
		if d > 0 {
			tn["timeout"] = d.String()
		}
	}
	if t.MaxAttempts > 0 {
		tn["retry"] = map[string]any{"maxAttempts": t.MaxAttempts}
	}
	def := map[string]any{
		"name":  ToolGraphPrefix + node + "." + t.Name,
		"nodes": []any{tn},
		"edges": []any{map[string]any{"from": graph.Start, "to": ToolNode}, map[string]any{"from": ToolNode, "to": graph.End}},
	}
	b, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	g, err := graph.Parse(b, "tool "+t.Name+" of node "+node, graph.WithTypes(t.Type))
	if err != nil {
		return nil, fmt.Errorf("node %q: tool %q: %w", node, t.Name, err)
	}
	return g, nil
}

// toolOutcome is, for an ended child run of a tool's one node
// (ToolGraphPrefix), that node's output or failure: what the tool gave,
// rather than the child's state. ok is false for any other run.
func toolOutcome(s *projection.State) (json.RawMessage, *events.Failure, bool) {
	if s.Parent == nil || s.Parent.Attempt == 0 || !strings.HasPrefix(s.GraphName, ToolGraphPrefix) {
		return nil, nil, false
	}
	n := s.Nodes[ToolNode]
	if n == nil {
		return nil, s.Error, true
	}
	if n.Error != nil {
		return nil, n.Error, true
	}
	return n.Output, s.Error, true
}
