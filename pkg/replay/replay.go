// Package replay checks a graph change against recorded runs, the way
// Temporal's workflow replayer does: it walks a run's log, folds it event
// by event, and at every decision the coordinator recorded asks the engine
// what the given graph decides from the same state at the same time. A run
// replays cleanly when every recorded decision is one the graph still
// makes, with the same data; otherwise the Result names the first event
// where they differ and shows both sides.
//
// Use it before deploying a changed graph (weft replay -graph NEW.yaml
// RUN..., client.Replay), and in tests over recorded histories:
//
//	func TestGraphChangeIsSafe(t *testing.T) {
//		g, _ := graph.LoadFile("flow.yaml")
//		for _, h := range recordedHistories(t) { // []*events.Event each
//			replay.Check(t, g, h)
//		}
//	}
//
// How decisions are compared: a decision is identified by what it decides
// (its type, the node activation and the attempt: node-ready b/1 attempt
// 1, node-routed a/1, run-completed, …), as the engine's event ids are,
// and compared by its data (failure messages aside: they are text for
// people, worded differently by versions of the engine). A routing
// counts as a decision of its own whether it was written alone or carried
// by the activation that followed it. The engine is asked from the state
// before the decision, and, when that disagrees, from the state where the
// previous decision was made, since a coordinator decides from the state it
// has folded and a worker's event can land between its decision and the
// append. A recorded decision the fold passed over as stale (a duplicate
// written around a coordinator takeover) changed nothing and is not
// compared. At the end of a log whose run has not ended, what the recorded
// graph would decide next is compared with what the new graph decides.
//
// Limits: a history is checked in memory, one Decide per recorded decision
// (plus one per mismatch); graphs whose conditions are Go functions must be
// given with them (graph.WithConditions) for the recorded graph's side of
// the end-of-log check, which is otherwise skipped.
//
// What it offers: Run (one history, a Result), Check (the same in a test,
// through TB, which *testing.T satisfies), Result (OK) and Divergence.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Result is what replaying one run found.
type Result struct {
	RunID string `json:"runId"`
	// Events is the number of events replayed; Decisions the number of
	// recorded decisions compared (a routing carried by an activation
	// counts on its own).
	Events    int `json:"events"`
	Decisions int `json:"decisions"`
	// Diff is the first difference, nil when the run replays cleanly.
	Diff *Divergence `json:"diff,omitempty"`
}

// OK reports whether every recorded decision is what the graph decides.
func (r *Result) OK() bool { return r.Diff == nil }

// Divergence is the first point where the recorded run and the graph
// disagree.
type Divergence struct {
	// Position is the event's position in the run (1-based), Seq its
	// stream sequence (0 for a history not read from a stream). At the
	// end of the log Position is one past the last event.
	Position int    `json:"position"`
	Seq      uint64 `json:"seq,omitempty"`
	// Recorded describes the recorded decision ("" at the end of the log),
	// Decided what the graph decides at that point, one decision a line.
	Recorded string   `json:"recorded,omitempty"`
	Decided  []string `json:"decided"`
	// Changes lists, when both sides make the same decision with different
	// data, the fields that differ (Before recorded, After decided).
	Changes []projection.Change `json:"changes,omitempty"`
	// Message says it in a sentence.
	Message string `json:"message"`
}

// String is a readable account of the difference.
func (d *Divergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", d.Message)
	if d.Recorded != "" {
		fmt.Fprintf(&b, "  recorded: %s\n", d.Recorded)
	}
	if len(d.Decided) == 0 {
		fmt.Fprintf(&b, "  decided:  nothing\n")
	}
	for i, s := range d.Decided {
		label := "          "
		if i == 0 {
			label = "decided: "
		}
		fmt.Fprintf(&b, "  %s %s\n", label, s)
	}
	for _, c := range d.Changes {
		fmt.Fprintf(&b, "  %s: %s -> %s\n", c.Path, orNone(c.Before), orNone(c.After))
	}
	return strings.TrimRight(b.String(), "\n")
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "(none)"
	}
	return string(b)
}

// unit is one decision: an event, or a routing an activation carries.
type unit struct {
	key  string
	desc string
	data json.RawMessage
}

// Run replays history (one run's events in log order) against g and
// returns what it found. It never writes anything.
func Run(g *graph.Graph, history []*events.Event) Result {
	rp := &replayer{g: g, s: &projection.State{}}
	for i, e := range history {
		rp.r.Events++
		if rp.r.RunID == "" {
			rp.r.RunID = e.RunID
		}
		if e.IsDecision() && e.Refused == nil && rp.s.Status != projection.RunPending && !rp.s.Status.Ended() {
			if rp.r.Diff = rp.decision(i, e); rp.r.Diff != nil {
				return rp.r
			}
			continue
		}
		_ = rp.s.Apply(e)
	}
	rp.r.Diff = rp.next(len(history))
	return rp.r
}

// replayer is one replay's state: the fold so far and what g decided at
// the last point it was asked.
type replayer struct {
	g      *graph.Graph
	r      Result
	s      *projection.State
	expect []unit
}

// decision compares decision e, the i-th event (0-based), with what g
// decides, and folds it.
func (rp *replayer) decision(i int, e *events.Event) *Divergence {
	// A decision the fold passes over (stale: a coordinator's duplicate
	// after a takeover) changed nothing: not compared.
	before := rp.s.Clone()
	if rp.s.Apply(e) != nil {
		return nil
	}
	after := rp.s
	rp.s = before
	defer func() { rp.s = after }()
	units, err := unitsOf(e)
	if err != nil {
		return &Divergence{Position: i + 1, Seq: e.Seq, Message: fmt.Sprintf("event %d (%s) is unreadable: %v", i+1, e.Type, err)}
	}
	fresh := false
	var now []unit
	for _, u := range units {
		rp.r.Decisions++
		got, ok, same := match(rp.expect, u)
		if !same && !fresh {
			// Ask again from the state before this event; keep the old
			// answer too (see the package doc).
			now, err = decide(rp.g, rp.s, e.Time)
			if err != nil {
				return &Divergence{Position: i + 1, Seq: e.Seq, Recorded: u.desc, Message: fmt.Sprintf("event %d: %v", i+1, err)}
			}
			rp.expect, fresh = append(now, rp.expect...), true
			got, ok, _ = match(rp.expect, u)
		}
		if !ok {
			return &Divergence{Position: i + 1, Seq: e.Seq, Recorded: u.desc, Decided: descs(now),
				Message: fmt.Sprintf("event %d: the run recorded %s; the graph does not decide it", i+1, u.desc)}
		}
		if !bytes.Equal(got.data, u.data) && !same {
			return &Divergence{Position: i + 1, Seq: e.Seq, Recorded: u.desc, Decided: []string{got.desc}, Changes: projection.DiffJSON(u.data, got.data),
				Message: fmt.Sprintf("event %d: the run recorded %s with other data than the graph decides", i+1, u.desc)}
		}
		rp.expect = remove(rp.expect, u.key)
	}
	return nil
}

// next compares, for a run that goes on after its n events, what its own
// graph decides next with what g decides.
func (rp *replayer) next(n int) *Divergence {
	s := rp.s
	if s.Status == projection.RunPending || s.Status.Ended() {
		return nil
	}
	old, err := graph.Parse(s.Graph, "run "+s.RunID, graph.AllowAnyType())
	if err != nil {
		return nil
	}
	now := time.Now()
	if s.UpdatedAt != nil {
		now = *s.UpdatedAt
	}
	want, err1 := decide(old, s, now)
	got, err2 := decide(rp.g, s, now)
	if err2 != nil {
		return &Divergence{Position: n + 1, Message: fmt.Sprintf("at the end of the log: %v", err2)}
	}
	if err1 != nil {
		return nil
	}
	if !sameUnits(want, got) {
		return &Divergence{Position: n + 1, Recorded: strings.Join(descs(want), "; "), Decided: descs(got),
			Message: fmt.Sprintf("after the last event (%d): the run's graph decides %s next; the graph decides otherwise", n, orNothing(descs(want)))}
	}
	return nil
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// decide asks the engine what g decides from a copy of s at now, and turns
// the answer into units. An engine panic (a graph the state does not fit)
// is an error.
func decide(g *graph.Graph, s *projection.State, now time.Time) (out []unit, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the engine failed on the graph: %v", p)
		}
	}()
	d := decider.Decide(g, s.Clone(), now)
	for _, e := range d.Events {
		us, err := unitsOf(e)
		if err != nil {
			return nil, err
		}
		out = append(out, us...)
	}
	return out, nil
}

// unitsOf splits a decision into units: the routings it carries, then
// itself without them.
func unitsOf(e *events.Event) ([]unit, error) {
	// A copy: the event's own payload is what the fold applies.
	p, ok := events.NewPayload(e.Type)
	if !ok {
		return nil, fmt.Errorf("unknown event type %s", e.Type)
	}
	if err := json.Unmarshal(e.Data, p); err != nil {
		return nil, err
	}
	var routed *[]events.NodeRoutedData
	switch d := p.(type) {
	case *events.NodeReadyData:
		routed = &d.Routed
	case *events.NodeWaitingData:
		routed = &d.Routed
	case *events.NodeSkippedData:
		routed = &d.Routed
	case *events.NodeRoutedData:
		return []unit{routingUnit(d)}, nil
	}
	var out []unit
	if routed != nil {
		for i := range *routed {
			out = append(out, routingUnit(&(*routed)[i]))
		}
		*routed = nil
	}
	switch d := p.(type) {
	case *events.NodeReadyData:
		// Written into work items by older versions and now read from the
		// run's start (see engine.readyWith): not a decision's content.
		d.Config, d.Invocation, d.InputSchema, d.OutputSchema = nil, nil, nil, nil
		// Where the run's start sits in the stream: a pointer for the
		// worker, not a decision's content (and absent from runs that
		// older engines recorded).
		d.StartSeq = 0
		// Run by the coordinator or by a worker of the default queue:
		// the same node, run the same way (coordinators of older
		// versions, or with other local types, put local nodes on
		// the default queue).
		if d.Queue == events.LocalQueue {
			d.Queue = graph.DefaultQueue
		}
	case *events.RunFailedData:
		plainFailure(&d.Error)
	case *events.NodeFailedData:
		plainFailure(&d.Error)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	d := describe(p)
	return append(out, unit{key: d, desc: d, data: data}), nil
}

// plainFailure drops a failure's messages, text for people that versions
// of the engine word differently; its type, retryability and causes'
// types are the decision.
func plainFailure(f *events.Failure) {
	for ; f != nil; f = f.Cause {
		f.Message = ""
	}
}

func routingUnit(d *events.NodeRoutedData) unit {
	data, _ := json.Marshal(d)
	return unit{key: "routed " + d.Key(), desc: describe(d), data: data}
}

// describe names a decision for people: "node.ready b/1 attempt 1".
func describe(p events.Payload) string {
	t := strings.TrimPrefix(string(p.EventType()), "dev.weft.")
	if i := strings.LastIndex(t, ".v"); i > 0 {
		t = t[:i]
	}
	switch d := p.(type) {
	case *events.NodeReadyData:
		return fmt.Sprintf("%s %s attempt %d", t, d.Key(), d.Attempt)
	case *events.NodeWaitingData:
		return fmt.Sprintf("%s %s for %s", t, d.Key(), d.For)
	case *events.NodeSkippedData:
		return fmt.Sprintf("%s %s", t, d.Key())
	case *events.NodeRoutedData:
		var taken, not []string
		for _, s := range d.Signals {
			if s.Taken {
				taken = append(taken, s.To)
			} else {
				not = append(not, s.To)
			}
		}
		s := fmt.Sprintf("%s %s -> %s", t, d.Key(), orNothing(taken))
		if len(not) > 0 {
			s += " (not " + strings.Join(not, ", ") + ")"
		}
		return s
	case *events.NodeInvokedData:
		return fmt.Sprintf("%s %s attempt %d", t, d.Key(), d.Attempt)
	case *events.NodeFailedData:
		return fmt.Sprintf("%s %s attempt %d", t, d.Key(), d.Attempt)
	case *events.RetryScheduledData:
		return fmt.Sprintf("%s %s attempt %d", t, d.Key(), d.Attempt)
	case *events.ChildRunStartedData:
		return fmt.Sprintf("%s %s run %s", t, d.Key(), d.ChildRunID)
	}
	return t
}

// match finds the decision u among us: one with the same key and data
// (same), else the first with the same key (ok).
func match(us []unit, u unit) (got unit, ok, same bool) {
	for _, x := range us {
		if x.key != u.key {
			continue
		}
		if bytes.Equal(x.data, u.data) {
			return x, true, true
		}
		if !ok {
			got, ok = x, true
		}
	}
	return got, ok, false
}

func remove(us []unit, key string) []unit {
	return slices.DeleteFunc(us, func(u unit) bool { return u.key == key })
}

func descs(us []unit) []string {
	out := make([]string, 0, len(us))
	seen := map[string]bool{}
	for _, u := range us {
		if !seen[u.key] {
			seen[u.key] = true
			out = append(out, u.desc)
		}
	}
	return out
}

func sameUnits(a, b []unit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || !bytes.Equal(a[i].data, b[i].data) {
			return false
		}
	}
	return true
}

// TB is the part of testing.TB that Check uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Check replays history against g and reports the first difference, if
// any, as a test error with a readable account of both sides.
func Check(t TB, g *graph.Graph, history []*events.Event) Result {
	t.Helper()
	r := Run(g, history)
	if r.Diff != nil {
		t.Errorf("run %s does not replay on graph %s (%s):\n%s", r.RunID, g.Definition().Name, g.Digest(), r.Diff)
	}
	return r
}
