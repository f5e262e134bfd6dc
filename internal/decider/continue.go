package decider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Continue-as-new. A run continues as new when an edge to CONTINUE was
// taken (projection.State.ContinueFrom) or, for a graph with
// continueAsNew.onHistoryBudget, when its history passed DrainFraction of
// the budget (Options.HistoryBudget): from then on it starts no new
// activation (it drains). Once at rest, as a run ends at END, it
// completes naming its continuation (events.RunCompletedData.ContinuedAs),
// and the decision carries the continuation's start (Decision.Continue):
// a run-started on the continuation's decision subject, with the run's
// shared state as input, its invocation state, and its place in the chain
// (events.ChainRef). The coordinator appends that start first, on a run
// that must have no events, then the completion: a crash in between
// decides the same again, and the start, whose id derives from the ending
// run (ContinuationRunID), is written once.

// DrainFraction is the part of the history budget after which a run whose
// graph continues as new on its budget starts nothing new, so that it
// comes to rest, and continues, before the budget's end.
const DrainFraction = 0.9

// DefaultHistoryBudget is the history budget coordinators hold runs to
// unless configured otherwise (internal/coordinator WithHistoryBudget):
// replay decides with it.
var DefaultHistoryBudget = HistoryBudget{Events: DefaultHistoryEvents, Bytes: DefaultHistoryBytes}

// The default history budget: 100,000 events, 64 MiB of payloads.
const (
	DefaultHistoryEvents       = 100_000
	DefaultHistoryBytes  int64 = 64 << 20
)

// HistoryBudget is the history budget the coordinator holds runs to
// (events and payload bytes, as projection.Stats counts them).
type HistoryBudget struct {
	Events int
	Bytes  int64
}

// ContinuationRunID is the id of the continuation of run prev, link link
// of chain chain, where prev's run-started carried nonce: derived from
// them, so that it is the same whichever coordinator decides, and however
// often, and cannot be guessed by who cannot read prev's start. It is
// "<chain>-<link>-<tag>" (tag: 16 characters over the nonce and prev), or
// "<chain>-<link>" for a run with no nonce; one longer than a subject
// token keeps a prefix and ends in a digest of the whole, as ChildRunID.
func ContinuationRunID(prev, nonce, chain string, link int) string {
	id := chain + "-" + strconv.Itoa(link)
	if nonce != "" {
		sum := sha256.Sum256([]byte("weft continuation run id\x00" + nonce + "\x00" + prev))
		id += "-" + eventlog.B32.EncodeToString(sum[:10])
	}
	if len(id) <= eventlog.MaxTokenLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:16])
	return id[:eventlog.MaxTokenLen-1-len(digest)] + "-" + digest
}

// continuationNonce is the nonce of a continuation: derived from its
// predecessor's; none when that has none.
func continuationNonce(prevNonce, next string) string {
	if prevNonce == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("weft continuation nonce\x00" + prevNonce + "\x00" + next))
	return eventlog.B32.EncodeToString(sum[:16])
}

// draining reports whether the run starts no new activation: its graph
// continues as new on its history budget, and its history passed
// DrainFraction of it.
func (d *decider) draining() bool {
	spec := d.g.Definition().ContinueAsNew
	if spec == nil || !spec.OnHistoryBudget || d.budget.Events <= 0 {
		return false
	}
	st := d.s.Stats
	return float64(st.Events+st.Refused) >= DrainFraction*float64(d.budget.Events) ||
		(d.budget.Bytes > 0 && float64(st.Bytes) >= DrainFraction*float64(d.budget.Bytes))
}

// continueAsNew ends the run at rest by continuing it as new (see above),
// or fails it, saying where the continuation was asked for, when it
// cannot be made.
func (d *decider) continueAsNew() {
	s := d.s
	spec := d.g.Definition().ContinueAsNew
	where := "the history budget (continueAsNew.onHistoryBudget)"
	node := ""
	if cf := s.ContinueFrom; cf != nil {
		where = fmt.Sprintf("node %q, edge %d (to CONTINUE)", cf.Node, cf.Edge+1)
		node = cf.Node
	}
	fail := func(format string, args ...any) {
		d.failRun(events.Failure{Type: events.FailureContinueAsNew, Message: "continue-as-new asked by " + where + ": " + fmt.Sprintf(format, args...)}, node)
	}
	if s.Parent != nil {
		fail("run %s is a child run of run %s, and only a top-level run continues as new", s.RunID, s.Parent.RunID)
		return
	}
	name, digest, canonical := s.GraphName, s.GraphDigest, s.Graph
	if spec != nil && spec.Graph != "" {
		next, ok := d.g.Subgraph(spec.Graph)
		if !ok {
			fail("no graph %q in graphs (continueAsNew.graph)", spec.Graph)
			return
		}
		name, digest, canonical = next.Definition().Name, next.Digest(), next.Canonical()
	}
	var input json.RawMessage
	if len(s.Vars) > 0 {
		input = mustJSON(s.Vars)
	}
	if limit := spec.MaxStateBytesOf(); len(input) > limit {
		fail("the state it would carry is %d bytes, over the limit of %d (continueAsNew.maxStateBytes): keep less in the state, or raise the limit within the server's max_payload", len(input), limit)
		return
	}
	chain, link := s.ChainID(), s.ChainLink()+1
	id := ContinuationRunID(s.RunID, s.Nonce, chain, link)
	start, err := events.New(id, id, d.now, &events.RunStartedData{
		GraphName:   name,
		GraphDigest: digest,
		Graph:       canonical,
		Input:       input,
		Invocation:  s.Invocation,
		StartedBy:   "run " + s.RunID,
		Retention:   s.Retention,
		Nonce:       continuationNonce(s.Nonce, id),
		Priority:    s.Priority,
		FairnessKey: s.FairnessKey,
		Chain:       &events.ChainRef{ID: chain, Link: link, Previous: s.RunID},
	})
	if err != nil {
		d.err = err
		return
	}
	eventlog.MarkDecision(start)
	d.out.Continue = start
	d.emit(&events.RunCompletedData{Output: mustJSON(s.VarsMap()), ContinuedAs: id}, eventlog.DecisionID(s.RunID, events.RunCompleted))
}

// IsContinuationStart reports whether e, read from the log, is the start
// of continuation next that run prev's completion wrote: a decision (only
// the coordinator writes a run's decision subject) naming prev in its
// chain.
func IsContinuationStart(e *events.Event, prev, next string) bool {
	if e == nil || e.Refused != nil || e.Type != events.RunStarted || !e.IsDecision() || e.RunID != next {
		return false
	}
	p, err := e.Payload()
	if err != nil {
		return false
	}
	c := p.(*events.RunStartedData).Chain
	return c != nil && c.Previous == prev
}
