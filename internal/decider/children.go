package decider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// ChildRunID is the id of the child run a subgraph node's activation ref
// starts, in the run parent whose run-started carried nonce: derived from
// them, so that starting it twice starts it once, whichever coordinator
// decides, and replaying the parent's log gives it again. It is
// "<parent>-<node>-<iteration>-<tag>", where tag is 16 characters (80
// bits) of a digest over the nonce, the parent and the activation: only
// who can read the parent's run-started can know it before the
// coordinator writes the child's start. (What keeps another writer from
// passing a run off as the child is not the tag but where the start is
// written: see startChild.) A parent without a nonce, started by a Weft
// before nonces or by a client that sets none, gets
// "<parent>-<node>-<iteration>", the ids its recorded decisions hold.
//
// An id longer than a subject token (eventlog.MaxTokenLen), as nested
// subgraphs under a long run id make, keeps a prefix of itself and ends in
// a digest of the whole, so it stays a token, stays readable, and stays
// distinct.
func ChildRunID(parent, nonce string, ref events.NodeRef) string {
	id := parent + "-" + ref.Node + "-" + strconv.Itoa(ref.Iteration)
	if nonce != "" {
		sum := sha256.Sum256([]byte("weft child run id\x00" + nonce + "\x00" + parent + "\x00" + ref.Key()))
		id += "-" + eventlog.B32.EncodeToString(sum[:10])
	}
	if len(id) <= eventlog.MaxTokenLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:16])
	return id[:eventlog.MaxTokenLen-1-len(digest)] + "-" + digest
}

// ToolChildRunID is the id of the child run that runs the tool call
// attempt of activation ref awaits (an agent's tool on another queue, or
// a subgraph tool): as ChildRunID, for the activation and the attempt.
func ToolChildRunID(parent, nonce string, ref events.NodeRef, attempt int) string {
	return ChildRunID(parent, nonce, events.NodeRef{Node: ref.Node + "-t" + strconv.Itoa(attempt), Iteration: ref.Iteration})
}

// childNonce is the nonce of a child run: derived from its parent's, so
// that the child's own child runs' ids are as hard to guess; none when the
// parent has none.
func childNonce(parentNonce, child string) string {
	if parentNonce == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("weft child run nonce\x00" + parentNonce + "\x00" + child))
	return eventlog.B32.EncodeToString(sum[:16])
}

// startChild starts a child run for a subgraph node: config {"graph":
// name} names a graph in the parent's Graphs; the child gets the node's view
// of the state as input and the parent's invocation state.
//
// The child's run-started is a decision: it is written on the child's
// decision subject (eventlog.ChildStartedSubject), which NATS permissions
// let only the coordinator write, and it is the only start that may name a
// parent (a client's that does is refused by events.Decode, and by
// events.Store.Append). The coordinator appends it first, on a child run
// that must have no events yet; one whose subjects another writer wrote on
// first is not taken for the child (the coordinator fails the node with
// PreemptedNotice), so the parent only ever hears from the run it started.
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
	id := ChildRunID(d.s.RunID, d.s.Nonce, ref)
	d.emit(&events.NodeWaitingData{NodeRef: ref, Consumed: consumed, Owed: owed, Local: local, For: "child"},
		eventlog.DecisionID(d.s.RunID, events.NodeWaiting, ref.Key()))
	d.emit(&events.ChildRunStartedData{NodeRef: ref, ChildRunID: id, Graph: cfg.Graph},
		eventlog.DecisionID(d.s.RunID, events.ChildRunStarted, ref.Key()))
	d.childStart(id, child, d.input(n), &events.ParentRef{RunID: d.s.RunID, Ref: ref}, "run "+d.s.RunID)
}

// childStart decides the start of child run id of the graph child, with
// input, under parent (a subgraph node's, or an agent tool's attempt):
// on the child's decision subject (MarkDecision), where no client may
// write a start naming a parent; it inherits the run's invocation,
// priority and fairness key, and its nonce derives from the run's.
func (d *decider) childStart(id string, child *graph.Graph, input json.RawMessage, parent *events.ParentRef, by string) {
	start, err := events.New(id, id, d.now, &events.RunStartedData{
		GraphName:   child.Definition().Name,
		GraphDigest: child.Digest(),
		Graph:       child.Canonical(),
		Input:       input,
		Invocation:  d.s.Invocation,
		Parent:      parent,
		StartedBy:   by,
		Nonce:       childNonce(d.s.Nonce, id),
		Priority:    d.s.Priority,
		FairnessKey: d.s.FairnessKey,
	})
	if err != nil {
		d.err = err
		return
	}
	eventlog.MarkDecision(start)
	d.out.Children = append(d.out.Children, start)
}

// WaitingChild is a child run a node of a run waits for; Attempt is set
// for a tool's child run (the attempt that awaits it).
type WaitingChild struct {
	Ref     events.NodeRef
	RunID   string
	Attempt int
}

// WaitingChildren lists the child runs the nodes of run s wait for, in
// node id order: the child run each names (or, if its child-run-started
// is not folded yet, the id its activation derives).
func WaitingChildren(s *projection.State) []WaitingChild {
	var out []WaitingChild
	for _, id := range slices.Sorted(maps.Keys(s.Nodes)) {
		n := s.Nodes[id]
		if n.Status != projection.NodeWaiting || n.WaitingFor != "child" {
			continue
		}
		ref := events.NodeRef{Node: id, Iteration: n.Iteration}
		w := WaitingChild{Ref: ref, RunID: n.Child}
		if n.Await != nil {
			w.Attempt = n.Attempt
		}
		if w.RunID == "" && w.Attempt > 0 {
			w.RunID = ToolChildRunID(s.RunID, s.Nonce, ref, w.Attempt)
		} else if w.RunID == "" {
			w.RunID = ChildRunID(s.RunID, s.Nonce, ref)
		}
		out = append(out, w)
	}
	return out
}

// IsChildStart reports whether e, read from the log, is the start of child
// run child that run parent's node activation ref wrote: a decision (only
// the coordinator writes the child's decision subject) naming that parent
// and activation.
func IsChildStart(e *events.Event, parent string, ref events.NodeRef, child string) bool {
	if e == nil || e.Refused != nil || e.Type != events.RunStarted || !e.IsDecision() || e.RunID != child {
		return false
	}
	p, err := e.Payload()
	if err != nil {
		return false
	}
	pr := p.(*events.RunStartedData).Parent
	return pr != nil && pr.RunID == parent && pr.Ref.Key() == ref.Key()
}

// PreemptedNotice is the event that fails the activation ref of run
// parent whose child run could not be started as its own: the child's
// subjects held another writer's events before the coordinator wrote its
// start (or, from a Weft before child starts were decisions, its start is
// a client's). The parent's fold takes it as the child's end (a
// child-run-finished, failed with FailureChildRunPreempted, not
// retryable), so the node's fallback or the run's failure follows, saying
// why; the run that holds the id is never taken for the child. Its data
// depends only on what it names, so the coordinators that find the same
// thing write it once. Its id is the one the child's real end would have
// had (there is none); claimed is set when what was found is a start that
// claims the parent from a client's subject, which may come before the
// node waits (and then changes nothing): that notice gets an id of its
// own, so that it never stands in for the one written once the node
// waits.
func PreemptedNotice(parent string, ref events.NodeRef, child string, claimed bool, at time.Time) *events.Event {
	return PreemptedNoticeFor(parent, WaitingChild{Ref: ref, RunID: child}, claimed, at)
}

// PreemptedNoticeFor is PreemptedNotice for child w, which may be a
// tool's (w.Attempt set).
func PreemptedNoticeFor(parent string, w WaitingChild, claimed bool, at time.Time) *events.Event {
	ref, child := w.Ref, w.RunID
	p := &events.ChildRunFinishedData{NodeRef: ref, Attempt: w.Attempt, ChildRunID: child, Status: string(projection.RunFailed), Error: &events.Failure{
		Type: events.FailureChildRunPreempted,
		Message: fmt.Sprintf("child run %s has no start written by the coordinator: another writer wrote on its subjects first "+
			"(a run-started of its own, or anything else, under the id the engine derives), or its start is on a client's subject "+
			"(as a Weft before this one wrote it); a run the engine did not start is never taken for the node's child", child),
	}}
	id := childFinishedID(parent, ref, w.Attempt)
	if claimed {
		id += ":claimed"
	}
	e, err := events.New(parent, id, at, p)
	if err != nil {
		return nil
	}
	return e
}

// ParentNotice is the event that brings an ended child run's outcome back
// to its parent, or nil when s is not an ended child run.
func ParentNotice(s *projection.State) *events.Event {
	if s.Parent == nil || !s.Status.Ended() {
		return nil
	}
	p := &events.ChildRunFinishedData{NodeRef: s.Parent.Ref, Attempt: s.Parent.Attempt, ChildRunID: s.RunID, Status: string(s.Status), Output: s.Output, Error: s.Error}
	if s.Status == projection.RunCancelled {
		p.Error = &events.Failure{Type: events.FailureCancelled, Message: "child run " + s.RunID + " was cancelled"}
	}
	if out, f, ok := toolOutcome(s); ok {
		p.Output, p.Error = out, f
	}
	e, err := events.New(s.Parent.RunID, childFinishedID(s.Parent.RunID, s.Parent.Ref, s.Parent.Attempt), *s.EndedAt, p)
	if err != nil {
		return nil
	}
	return e
}

// childFinishedID is the id of the end of the child run activation ref
// of run parent waits for: one per activation, or, for a tool's child
// run, one per attempt that awaits it.
func childFinishedID(parent string, ref events.NodeRef, attempt int) string {
	if attempt > 0 {
		return eventlog.DecisionID(parent, events.ChildRunFinished, ref.Key(), strconv.Itoa(attempt))
	}
	return eventlog.DecisionID(parent, events.ChildRunFinished, ref.Key())
}
