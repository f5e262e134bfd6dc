package client

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Pending is a node activation, or one item of a map activation, that has
// not finished: what it waits for and until when, so that "where is this
// run stuck" has an answer without reading the log by hand (Temporal's
// pending activities). Times are absolute; a reader shows them relative to
// now.
type Pending struct {
	Node      string                `json:"node"`
	Iteration int                   `json:"iteration"`
	Item      *int                  `json:"item,omitempty"`
	Status    projection.NodeStatus `json:"status"`
	// WaitingFor is what a waiting node waits for: "signal" (a person),
	// "child", "map", "slot", "rate".
	WaitingFor string `json:"waitingFor,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Worker     string `json:"worker,omitempty"`
	// Since is when the activation entered its status: readied, taken by
	// a worker (the live attempt's latest invoking), began to wait, failed.
	Since *time.Time `json:"since,omitempty"`
	// HeartbeatAt and HeartbeatDetails are the live attempt's last
	// heartbeat and what it reported.
	HeartbeatAt      *time.Time      `json:"heartbeatAt,omitempty"`
	HeartbeatDetails json.RawMessage `json:"heartbeatDetails,omitempty"`
	// TimeoutAt is when the live attempt times out (the node's timeout,
	// from its latest invoking); HeartbeatTimeoutAt, when it is failed
	// for want of a heartbeat.
	TimeoutAt          *time.Time `json:"timeoutAt,omitempty"`
	HeartbeatTimeoutAt *time.Time `json:"heartbeatTimeoutAt,omitempty"`
	// RetryAt is when the next attempt is due; LastError, why the last
	// one failed.
	RetryAt   *time.Time      `json:"retryAt,omitempty"`
	LastError *events.Failure `json:"lastError,omitempty"`
	// Deadline is when a wait ends: a human node's deadline, a rate
	// limit's turn.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Child is the child run a subgraph node waits for.
	Child string `json:"child,omitempty"`
	// Answer is the command that answers a node waiting for a signal:
	// "weft signal RUN NODE -data '{...}'", its data shaped by the node's
	// outputSchema when it has one.
	Answer string `json:"answer,omitempty"`
}

// Describe returns a run's state and its pending nodes (PendingOf).
func (c *Client) Describe(ctx context.Context, runID string) (*projection.State, []Pending, error) {
	evs, err := c.History(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	st := projection.Fold(evs)
	return st, PendingOf(st, evs), nil
}

// PendingOf lists the activations of a run that have not finished, in
// graph order (map items after their node), from its folded state and
// its history (the history has what the state keeps no copy of: a
// heartbeat's details, when an item's attempt was taken). A run that
// ended has none.
func PendingOf(st *projection.State, history []*events.Event) []Pending {
	if st.Status.Ended() {
		return nil
	}
	seen := scanAttempts(history)
	var def *graph.Definition // decoded when a node waits for a signal
	answer := func(node string) string {
		if def == nil {
			def = &graph.Definition{}
			_ = json.Unmarshal(st.Graph, def) // the fold read it already
		}
		return answerCommand(st.RunID, node, def)
	}
	var out []Pending
	for _, id := range nodeOrder(st) {
		n := st.Nodes[id]
		if n == nil || !n.Status.Active() {
			continue
		}
		p := nodePending(id, n, answer)
		attemptDetails(&p, st, events.NodeRef{Node: id, Iteration: n.Iteration}, seen)
		out = append(out, p)
		for i, it := range n.Items {
			if it == nil || !it.Status.Active() {
				continue
			}
			ip := Pending{Node: id, Iteration: n.Iteration, Item: &i, Status: it.Status, Attempt: it.Attempt, HeartbeatAt: it.HeartbeatAt}
			if it.Status == projection.NodeRetrying || it.Status == projection.NodeRetryDue {
				ip.LastError = it.Error
			}
			attemptDetails(&ip, st, events.NodeRef{Node: id, Iteration: n.Iteration, Item: &i}, seen)
			out = append(out, ip)
		}
	}
	return out
}

// nodePending is what a node's active activation n says of itself, by its
// status; answer gives the command that answers a node waiting for a
// signal.
func nodePending(id string, n *projection.NodeState, answer func(node string) string) Pending {
	p := Pending{Node: id, Iteration: n.Iteration, Status: n.Status, WaitingFor: n.WaitingFor, Attempt: n.Attempt, Worker: n.Worker, Child: n.Child}
	switch n.Status {
	case projection.NodeReady:
		p.Since, p.Worker = n.ReadyAt, ""
	case projection.NodeRunning:
		p.Since = n.StartedAt
		p.HeartbeatAt = n.HeartbeatAt
	case projection.NodeWaiting:
		p.Since, p.Deadline = n.StartedAt, n.Deadline
		if n.WaitingFor == "slot" || n.WaitingFor == "rate" {
			p.Attempt++ // the attempt that waits (NodeState.WaitingFor)
		}
		if n.WaitingFor == "signal" {
			p.Answer = answer(id)
		}
	case projection.NodeRetrying, projection.NodeRetryDue:
		p.Since, p.LastError = n.EndedAt, n.Error
	}
	return p
}

// attemptSeen is what the history says of one attempt: its latest
// invoking, and its last heartbeat.
type attemptSeen struct {
	invokingAt  time.Time
	worker      string
	heartbeatAt time.Time
	details     json.RawMessage
}

// scanAttempts reads the invokings and heartbeats of a history, by
// attempt ("node/iteration[/item]#attempt").
func scanAttempts(history []*events.Event) map[string]*attemptSeen {
	seen := map[string]*attemptSeen{}
	at := func(ref events.NodeRef, attempt int) *attemptSeen {
		k := ref.Key() + "#" + strconv.Itoa(attempt)
		if seen[k] == nil {
			seen[k] = &attemptSeen{}
		}
		return seen[k]
	}
	for _, e := range history {
		if e.Type != events.NodeInvoking && e.Type != events.Heartbeat {
			continue
		}
		p, err := e.Payload()
		if err != nil {
			continue
		}
		t := e.Stored
		if t.IsZero() {
			t = e.Time
		}
		switch d := p.(type) {
		case *events.NodeInvokingData:
			a := at(d.NodeRef, d.Attempt)
			a.invokingAt, a.worker = t, d.Worker
		case *events.HeartbeatData:
			a := at(d.NodeRef, d.Attempt)
			a.heartbeatAt, a.details = t, d.Details
		}
	}
	return seen
}

// attemptDetails fills in what the history and the pending timers say of
// p's live attempt.
func attemptDetails(p *Pending, st *projection.State, ref events.NodeRef, seen map[string]*attemptSeen) {
	if a := seen[ref.Key()+"#"+strconv.Itoa(p.Attempt)]; a != nil && p.Status == projection.NodeRunning {
		if !a.invokingAt.IsZero() {
			p.Since = &a.invokingAt
		}
		if a.worker != "" {
			p.Worker = a.worker
		}
		if !a.heartbeatAt.IsZero() {
			p.HeartbeatAt, p.HeartbeatDetails = &a.heartbeatAt, a.details
		}
	}
	timerDetails(p, st, ref)
}

// timerDetails fills in when the pending timers of ref's activation fire:
// p's attempt's timeout and heartbeat timeout, a retry, a deadline.
func timerDetails(p *Pending, st *projection.State, ref events.NodeRef) {
	for _, t := range st.Timers {
		if t.Ref.Node != ref.Node || t.Ref.Iteration != ref.Iteration || !sameItem(t.Ref.Item, ref.Item) {
			continue
		}
		at := t.At
		switch {
		case t.Purpose == projection.PurposeTimeout && t.Attempt == p.Attempt:
			p.TimeoutAt = &at
		case t.Purpose == projection.PurposeHeartbeat && t.Attempt == p.Attempt:
			p.HeartbeatTimeoutAt = &at
		case t.Purpose == "retry":
			p.RetryAt = &at
		case t.Purpose == "deadline" && p.Deadline == nil:
			p.Deadline = &at
		}
	}
}

func sameItem(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// nodeOrder lists the run's nodes in graph order, then any others by id.
func nodeOrder(st *projection.State) []string {
	ids, _ := nodeIDs(st.Graph) // the fold read the graph already
	var extra []string
	for id := range st.Nodes {
		if !slices.Contains(ids, id) {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	return append(ids, extra...)
}

// answerCommand is the weft command that sends node of run its signal,
// its data shaped as graph.SignalExample shapes it (the read model's
// waits show the same: readmodel.SignalCommand).
func answerCommand(run, node string, def *graph.Definition) string {
	data := graph.SignalExample(def, node)
	// Run and node ids are subject tokens: no quoting needed; the data is
	// single-quoted for a POSIX shell.
	return "weft signal " + run + " " + node + " -data '" + strings.ReplaceAll(data, "'", `'\''`) + "'"
}
