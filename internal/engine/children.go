package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// ChildRunID is the id of the child run a subgraph node's activation
// starts: derived from the parent, so starting it twice starts it once. It
// is "<parent>-<node>-<iteration>" while that is a subject token
// (eventlog.MaxTokenLen); a longer one, as nested subgraphs under a long run
// id make, keeps a prefix of it and ends in a digest of the whole, so it
// stays a token, stays readable, and stays distinct.
func ChildRunID(parent string, ref events.NodeRef) string {
	id := parent + "-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
	if len(id) <= eventlog.MaxTokenLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:16])
	return id[:eventlog.MaxTokenLen-1-len(digest)] + "-" + digest
}

// startChild starts a child run for a subgraph node: config {"graph":
// name} names a graph in the parent's Graphs; the child gets the node's view
// of the state as input and the parent's invocation state.
func (d *decider) startChild(n *graph.Node, ref events.NodeRef, consumed, owed []int, local json.RawMessage) {
	var cfg struct {
		Graph string `json:"graph"`
	}
	_ = json.Unmarshal(n.Config, &cfg)
	child, ok := d.g.Subgraph(cfg.Graph)
	if !ok {
		d.failRun(events.Failure{Type: events.FailureInvalidGraph, Message: fmt.Sprintf("node %q: no subgraph %q", n.ID, cfg.Graph)}, n.ID)
		return
	}
	id := ChildRunID(d.s.RunID, ref)
	d.emit(&events.NodeWaitingData{NodeRef: ref, Consumed: consumed, Owed: owed, Local: local, For: "child"},
		eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key()))
	d.emit(&events.ChildRunStartedData{NodeRef: ref, ChildRunID: id, Graph: cfg.Graph},
		eventlog.DecisionID(d.s.RunID, events.ChildRunStarted, ref.Key()))
	start, err := events.New(id, id, d.now, &events.RunStartedData{
		GraphName:   child.Definition().Name,
		GraphDigest: child.Digest(),
		Graph:       child.Canonical(),
		Input:       d.input(n),
		Invocation:  d.s.Invocation,
		Parent:      &events.ParentRef{RunID: d.s.RunID, Ref: ref},
		StartedBy:   "run " + d.s.RunID,
	})
	if err != nil {
		d.err = err
		return
	}
	d.out.Children = append(d.out.Children, start)
}

// ParentNotice is the event that brings an ended child run's outcome back
// to its parent, or nil when s is not an ended child run.
func ParentNotice(s *projection.State) *events.Event {
	if s.Parent == nil || !s.Status.Ended() {
		return nil
	}
	p := &events.ChildRunFinishedData{NodeRef: s.Parent.Ref, ChildRunID: s.RunID, Status: string(s.Status), Output: s.Output, Error: s.Error}
	if s.Status == projection.RunCancelled {
		p.Error = &events.Failure{Type: events.FailureCancelled, Message: "child run " + s.RunID + " was cancelled"}
	}
	e, err := events.New(s.Parent.RunID, eventlog.DecisionID(s.Parent.RunID, events.ChildRunFinished, s.Parent.Ref.Key()), *s.EndedAt, p)
	if err != nil {
		return nil
	}
	return e
}
