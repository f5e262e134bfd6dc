package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// printOutcome prints how a run ended and its shared state.
func (e *env) printOutcome(st *projection.State) {
	fmt.Fprintln(e.stdout, outcomeLine(st))
	printJSONBlock(e.stdout, "state", st.Vars)
	printJSONBlock(e.stdout, "artifacts", st.Artifacts)
}

func outcomeLine(st *projection.State) string {
	took := ""
	if st.StartedAt != nil && st.EndedAt != nil {
		took = " in " + duration(st.EndedAt.Sub(*st.StartedAt))
	}
	switch st.Status {
	case projection.RunFailed:
		line := fmt.Sprintf("run %s failed%s: %v", st.RunID, took, st.Error)
		if n := failedNode(st); n != "" {
			line += " (node " + n + ")"
		}
		return line
	case projection.RunCancelled:
		line := fmt.Sprintf("run %s %s%s", st.RunID, shownStatus(st), took)
		if st.Cancel != nil {
			line += " by " + st.Cancel.By
			if st.Cancel.Reason != "" {
				line += ": " + st.Cancel.Reason
			}
		}
		return line
	}
	return fmt.Sprintf("run %s %s%s", st.RunID, shownStatus(st), took)
}

// shownStatus is a run's status as people read it: a run that 'weft
// terminate' ends is "terminating", then "terminated", not "cancelling"
// and "cancelled" (the log and the read model keep the statuses, with
// the run marked terminated: -o json shows both).
func shownStatus(st *projection.State) string {
	return readmodel.ShownStatus(readmodel.StatusOf(st), st.Cancel != nil && st.Cancel.Terminate)
}

func failedNode(st *projection.State) string {
	for _, id := range nodeOrder(st) {
		if n := st.Nodes[id]; n != nil && n.Status == projection.NodeFailed {
			return id
		}
	}
	return ""
}

// printJSONBlock prints "name:" and v as indented JSON, if v is not empty.
func printJSONBlock(w io.Writer, name string, v map[string]json.RawMessage) {
	if len(v) == 0 {
		return
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return
	}
	fmt.Fprintf(w, "%s:\n%s\n", name, b)
}

// chainLineage says where a run stands in its chain of continuations.
func chainLineage(chain string, link int, previous, next string) string {
	s := fmt.Sprintf("link %d of chain %s", link, chain)
	if previous != "" {
		s += ", continues " + previous
	}
	if next != "" {
		s += ", continued as " + next
	}
	return s
}

// printStatus prints a run's state for people: the run, its nodes, its
// shared state. notes holds extra details by node id; pending, the run's
// unfinished activations as of now (nil for a state in the past): their
// TIME is how long they have been at it, and a section says what each
// waits for and until when.
func (e *env) printStatus(st *projection.State, notes map[string]string, pending []client.Pending, now time.Time) {
	e.printRun(st)
	fmt.Fprintln(e.stdout)
	e.printNodes(st, notes, pending, now)
	if len(pending) > 0 {
		fmt.Fprintln(e.stdout, "\npending:")
		for _, p := range pending {
			fmt.Fprintf(e.stdout, "  %s\n", pendingLine(p, now))
			if p.Answer != "" {
				fmt.Fprintf(e.stdout, "    answer: %s\n", p.Answer)
			}
		}
	}
	if len(st.Vars) > 0 || len(st.Artifacts) > 0 {
		fmt.Fprintln(e.stdout)
	}
	printJSONBlock(e.stdout, "state", st.Vars)
	printJSONBlock(e.stdout, "artifacts", st.Artifacts)
}

// printRun prints printStatus's first table: the run itself, a row for
// each thing it says.
func (e *env) printRun(st *projection.State) {
	tw := table(e.stdout)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("run", st.RunID)
	row("graph", fmt.Sprintf("%s (%s)", st.GraphName, shortDigest(st.GraphDigest)))
	if st.Parent != nil {
		row("parent", fmt.Sprintf("%s (node %s)", st.Parent.RunID, st.Parent.Ref.Node))
	}
	if st.Fork != nil {
		row("lineage", lineage(st.Fork))
	}
	if st.Trigger != nil {
		row("origin", origin(st.Trigger))
	}
	if st.Chain != nil || st.ContinuedAs != "" {
		prev := ""
		if st.Chain != nil {
			prev = st.Chain.Previous
		}
		row("chain", chainLineage(st.ChainID(), st.ChainLink(), prev, st.ContinuedAs)+" (weft list -chain "+st.ChainID()+")")
	}
	row("status", shownStatus(st))
	for _, w := range readmodel.WaitsOf(st) {
		row("waits on", waitLine(st.RunID, w, time.Now()))
	}
	if st.StartedAt != nil {
		row("started", st.StartedAt.Local().Format(time.DateTime+".000"))
	}
	if st.EndedAt != nil {
		row("ended", fmt.Sprintf("%s (took %s)", st.EndedAt.Local().Format(time.DateTime+".000"), duration(st.EndedAt.Sub(*st.StartedAt))))
	}
	if st.Error != nil {
		row("error", st.Error.Error())
	}
	if st.Cancel != nil {
		what := "cancel"
		if st.Cancel.Terminate {
			what = "terminate"
		}
		row(what, strings.TrimSuffix("requested by "+st.Cancel.By+": "+st.Cancel.Reason, ": "))
	}
	row("events", fmt.Sprintf("%d up to seq %d (%d executions, %d failures, %d retries)", st.Stats.Events, st.LastSeq, st.Stats.Executions, st.Stats.Failures, st.Stats.Retries))
	_ = tw.Flush()
}

// printNodes prints printStatus's table of the run's nodes, in graph order.
func (e *env) printNodes(st *projection.State, notes map[string]string, pending []client.Pending, now time.Time) {
	tw := table(e.stdout)
	fmt.Fprintln(tw, "NODE\tSTATUS\tITER\tATTEMPT\tWORKER\tTIME\tDETAILS")
	for _, id := range nodeOrder(st) {
		n := st.Nodes[id]
		if n == nil {
			fmt.Fprintf(tw, "%s\t-\t\t\t\t\t\n", id)
			continue
		}
		took := ""
		if n.StartedAt != nil && n.EndedAt != nil && !n.Status.Active() {
			took = duration(n.EndedAt.Sub(*n.StartedAt))
		}
		if i := slices.IndexFunc(pending, func(p client.Pending) bool { return p.Node == id && p.Item == nil }); i >= 0 && pending[i].Since != nil {
			took = duration(now.Sub(*pending[i].Since)) + " so far"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", id, orDash(string(n.Status)), n.Iteration, num(n.Attempt), n.Worker, took, truncate(nodeDetails(n, notes[id], now), 80))
	}
	_ = tw.Flush()
}

// nodeDetails is the DETAILS column of a node's row: its error, what it
// waits for, or note.
func nodeDetails(n *projection.NodeState, note string, now time.Time) string {
	switch {
	case n.Error != nil:
		return n.Error.Error()
	case n.Status == projection.NodeWaiting && n.WaitingFor == projection.WaitingForTimer && n.Deadline != nil:
		return "a wait, ends " + deadline(*n.Deadline, now)
	case n.Status == projection.NodeWaiting && n.WaitingFor == "slot" && n.Slot != nil:
		return fmt.Sprintf("waiting for a slot of %s, key %q (max %d)", n.Slot.Limit, n.Slot.Key, n.Slot.Max)
	case n.WaitingFor != "":
		return "waiting for " + n.WaitingFor
	case n.Fallback:
		return "fallback output"
	}
	return note
}

// pendingLine says where a pending activation is: "charge/1 attempt 2 on
// worker w1: running for 1m3s; last heartbeat 4s ago {"page":3}; times out
// in 26s (15:04:05)".
func pendingLine(p client.Pending, now time.Time) string {
	what := pendingState(p)
	if p.Since != nil {
		what += " for " + duration(now.Sub(*p.Since))
	}
	parts := []string{what}
	if p.Status == projection.NodeRunning {
		parts = append(parts, heartbeatPart(p, now))
	}
	parts = append(parts, pendingTimes(p, now)...)
	return pendingName(p) + ": " + strings.Join(parts, "; ")
}

// pendingName names a pending activation: "charge[2] (iteration 3)
// attempt 2 on worker w1".
func pendingName(p client.Pending) string {
	name := p.Node
	if p.Item != nil {
		name += "[" + strconv.Itoa(*p.Item) + "]"
	}
	if p.Iteration > 1 {
		name += " (iteration " + strconv.Itoa(p.Iteration) + ")"
	}
	if p.Attempt > 0 {
		name += " attempt " + strconv.Itoa(p.Attempt)
	}
	if p.Worker != "" && p.Status == projection.NodeRunning {
		name += " on worker " + p.Worker
	}
	return name
}

// pendingState says in words what a pending activation's status is.
func pendingState(p client.Pending) string {
	switch p.Status {
	case projection.NodeReady:
		return "ready, no worker took it yet"
	case projection.NodeWaiting:
		what := "waiting for " + p.WaitingFor
		switch p.WaitingFor {
		case "signal":
			what = "waiting for a signal (a person)"
		case projection.WaitingForAwait:
			what = "its attempt ended awaiting something; the coordinator decides the wait"
		case projection.WaitingForTimer:
			what = "waiting for its time (a wait node, on a durable timer)"
		}
		if p.Child != "" {
			what += " run " + p.Child
		}
		return what
	case projection.NodeRetrying:
		return "failed, retry scheduled"
	case projection.NodeRetryDue:
		return "retry due"
	}
	return string(p.Status)
}

// heartbeatPart says when a running attempt last heartbeat, with what.
func heartbeatPart(p client.Pending, now time.Time) string {
	if p.HeartbeatAt == nil {
		return "no heartbeat yet"
	}
	hb := "last heartbeat " + ago(*p.HeartbeatAt, now)
	if len(p.HeartbeatDetails) > 0 && string(p.HeartbeatDetails) != "null" {
		hb += " " + truncate(string(p.HeartbeatDetails), 60)
	}
	return hb
}

// pendingTimes says what comes next for a pending activation, and when:
// its timeouts, its retry, its deadline.
func pendingTimes(p client.Pending, now time.Time) []string {
	var parts []string
	if p.TimeoutAt != nil {
		parts = append(parts, "times out "+deadline(*p.TimeoutAt, now))
	}
	if p.HeartbeatTimeoutAt != nil {
		parts = append(parts, "fails without a heartbeat "+deadline(*p.HeartbeatTimeoutAt, now))
	}
	if p.RetryAt != nil {
		parts = append(parts, "next attempt "+deadline(*p.RetryAt, now))
	}
	if p.LastError != nil {
		parts = append(parts, "after "+truncate(p.LastError.Error(), 80))
	}
	if p.Deadline != nil && p.WaitingFor == projection.WaitingForTimer {
		parts = append(parts, "ends "+deadline(*p.Deadline, now))
	} else if p.Deadline != nil {
		parts = append(parts, "deadline "+deadline(*p.Deadline, now))
	} else if p.WaitingFor == "signal" {
		parts = append(parts, "no deadline")
	}
	return parts
}

// ago says how long before now t was: "4s ago (15:04:01)".
func ago(t, now time.Time) string {
	return duration(now.Sub(t)) + " ago (" + t.Local().Format(time.DateTime) + ")"
}

// waitLine says what a run waits on: a wait node's time, or a human
// node's signal, its deadline and the command that answers it.
func waitLine(run string, w readmodel.Waiting, now time.Time) string {
	if w.Slot != nil {
		return "a slot of its run limit " + slotName(w.Slot) + " (before its first node)"
	}
	if w.For == projection.WaitingForTimer {
		s := "node " + w.Node + ": a wait"
		if w.Deadline != nil {
			s += ", ends " + deadline(*w.Deadline, now)
		}
		return s
	}
	s := "node " + w.Node + ": a signal"
	if w.Await != nil {
		s = fmt.Sprintf("node %s: the approval of tool %q (call %s); reject with {\"approved\": false, \"reason\": \"...\"}", w.Node, w.Await.Tool, w.Await.Call)
	}
	if w.Deadline != nil {
		s += " (deadline " + deadline(*w.Deadline, now) + ")"
	}
	return s + "; answer: " + readmodel.SignalCommand(run, w)
}

// waitCell is the WAITING cell of a run in 'weft list'.
func waitCell(ws []readmodel.Waiting, now time.Time) string {
	if len(ws) == 0 {
		return "-"
	}
	parts := make([]string, len(ws))
	for i, w := range ws {
		what := "signal"
		switch {
		case w.Slot != nil:
			what = "slot of " + slotName(w.Slot)
		case w.For == projection.WaitingForTimer:
			what = "wait"
		}
		parts[i] = w.Node + " (" + what
		if w.Deadline != nil {
			parts[i] += ", until " + w.Deadline.Local().Format(time.DateTime)
		}
		parts[i] += ")"
	}
	return strings.Join(parts, ", ")
}

// nodeOrder lists the run's nodes in graph order, then any others.
func nodeOrder(st *projection.State) []string {
	var def struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	_ = json.Unmarshal(st.Graph, &def)
	var ids []string
	for _, n := range def.Nodes {
		ids = append(ids, n.ID)
	}
	var extra []string
	for id := range st.Nodes {
		if !slices.Contains(ids, id) {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	return append(ids, extra...)
}

// timelineRow is one event of a run's timeline.
type timelineRow struct {
	// Position is the event's position in the run (1, 2, 3, ...): the
	// point 'weft state -at' and 'weft diff' take. Seq is the stream's
	// sequence, which also counts other runs' events.
	Position int           `json:"position"`
	Seq      uint64        `json:"seq"`
	Offset   time.Duration `json:"offsetNs"`
	Time     time.Time     `json:"time"`
	// Clock says why the event's time is earlier than an event before it
	// in the log, when it is; empty when times run forward.
	Clock     string          `json:"clock,omitempty"`
	Type      events.Type     `json:"type"`
	Node      string          `json:"node,omitempty"`
	Iteration int             `json:"iteration,omitempty"`
	Item      *int            `json:"item,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Summary   string          `json:"summary"`
	Data      json.RawMessage `json:"data"`
	// Routed lists the routings an activation carries: decided with it,
	// about the nodes before it ("greet -> shout"). The text timeline
	// prints each on a row of its own, above the event.
	Routed []routedRow `json:"routed,omitempty"`
	// Fold says what the fold made of an event it did not apply: "stale:
	// attempt 1 of a/1 is succeeded", "refused: ...",
	// "rejected: ...". Empty for an event that counted.
	Fold string `json:"fold,omitempty"`
}

// routedRow is one routing an activation carries.
type routedRow struct {
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	Summary   string `json:"summary"`
}

// timeliner turns a run's events into timeline rows one at a time, folding
// them as it goes so that each row says whether its event counted (see
// projection.ErrStale, ErrRefused). Times are the stream's own where the
// events carry them.
type timeliner struct {
	s      projection.State
	start  time.Time
	latest time.Time
	pos    int
}

func (tl *timeliner) row(e *events.Event) timelineRow {
	tl.pos++
	at := eventTime(e)
	if tl.pos == 1 {
		tl.start = at
	}
	r := timelineRow{Position: tl.pos, Seq: e.Seq, Offset: at.Sub(tl.start), Time: at, Type: e.Type, Node: e.NodeID, Attempt: e.Attempt, Data: e.Data}
	if at.Before(tl.latest) {
		who := "its writer's clock"
		if !e.Stored.IsZero() {
			who = "the stream's clock"
		}
		r.Clock = fmt.Sprintf("%s before an earlier event: %s", duration(tl.latest.Sub(at)), who)
	} else {
		tl.latest = at
	}
	r.Fold = foldNote(tl.s.Apply(e))
	if e.Refused == nil {
		r.Summary = eventSummary(e, &r, at)
	}
	return r
}

// timeline lists a run's events.
func timeline(evs []*events.Event) []timelineRow {
	var tl timeliner
	rows := make([]timelineRow, len(evs))
	for i, e := range evs {
		rows[i] = tl.row(e)
	}
	return rows
}

// eventSummary says what an event states, and fills in the node execution
// it concerns and the routings it carries.
func eventSummary(e *events.Event, r *timelineRow, at time.Time) string {
	p, err := e.Payload()
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if ref, ok := refOf(p); ok {
		r.Node, r.Iteration, r.Item = ref.Node, ref.Iteration, ref.Item
	}
	for _, rd := range carried(p) {
		r.Routed = append(r.Routed, routedRow{Node: rd.Node, Iteration: rd.Iteration, Summary: routing(&rd)})
	}
	if d, ok := p.(*events.NodeWaitingData); ok && d.For == projection.WaitingForTimer && e.IsDecision() {
		// A wait is measured from the decision's own time, as the fold
		// measures it (the stream stamps the event a little later).
		at = e.Time
	}
	return summary(p, at)
}

// carried returns the routings an activation event carries.
func carried(p events.Payload) []events.NodeRoutedData {
	switch d := p.(type) {
	case *events.NodeReadyData:
		return d.Routed
	case *events.NodeSkippedData:
		return d.Routed
	case *events.NodeWaitingData:
		return d.Routed
	}
	return nil
}

// foldNote is the timeline's note on what the fold made of an event.
func foldNote(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, projection.ErrStale), errors.Is(err, projection.ErrRefused):
		return err.Error()
	}
	return "rejected: " + err.Error()
}

// eventTime is the stream's timestamp of an event read from it, else the
// writer's time.
func eventTime(e *events.Event) time.Time {
	if !e.Stored.IsZero() {
		return e.Stored
	}
	return e.Time
}

// printTimeline prints a run's events as a table; an event the fold did
// not count is marked with why, e.g. "[stale: attempt 1 of a/1 is
// succeeded]". The routings an activation carries get rows of their own,
// above it, marked "(with the next event)".
func (e *env) printTimeline(evs []*events.Event) {
	tw := table(e.stdout)
	fmt.Fprintln(tw, timelineHeader)
	rows := timeline(evs)
	for _, r := range rows {
		printRow(tw, r)
	}
	_ = tw.Flush()
	if note := seqNote(rows); note != "" {
		fmt.Fprintln(e.stdout, note)
	}
}

const timelineHeader = "POS\tSEQ\tTIME\tEVENT\tNODE\tITER\tATTEMPT\tDETAILS"

// printRow prints one timeline row, and the routings it carries before it.
func printRow(w io.Writer, r timelineRow) {
	for _, rd := range r.Routed {
		fmt.Fprintf(w, "\t\t\t%s\t%s\t%s\t\t%s (with the next event)\n", "node.routed", rd.Node, num(rd.Iteration), rd.Summary)
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
	fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Position, r.Seq, at, orDash(shortType(r.Type)), node, num(r.Iteration), num(r.Attempt), details)
}

// seqNote explains gaps between the stream sequences of a run's events.
func seqNote(rows []timelineRow) string {
	for i := 1; i < len(rows); i++ {
		if rows[i].Seq > rows[i-1].Seq+1 {
			return "SEQ is the stream's sequence; it skips the events of other runs in between. POS is the event's position in this run."
		}
	}
	return ""
}

// shortType is the type without the family prefix and version:
// "node.invoked".
func shortType(t events.Type) string {
	s := strings.TrimPrefix(string(t), "dev.weft.")
	if i := strings.LastIndex(s, ".v"); i > 0 {
		s = s[:i]
	}
	return s
}

// refOf returns the node execution an event payload concerns.
//
// Size: the catalogue, one case per event type that concerns a node.
func refOf(p events.Payload) (events.NodeRef, bool) {
	switch d := p.(type) {
	case *events.NodeReadyData:
		return d.NodeRef, true
	case *events.NodeInvokingData:
		return d.NodeRef, true
	case *events.NodeInvokedData:
		return d.NodeRef, true
	case *events.NodeFailedData:
		return d.NodeRef, true
	case *events.NodeSkippedData:
		return d.NodeRef, true
	case *events.NodeWaitingData:
		return d.NodeRef, true
	case *events.NodeRoutedData:
		return d.NodeRef, true
	case *events.NodeCancelledData:
		return d.NodeRef, true
	case *events.HeartbeatData:
		return d.NodeRef, true
	case *events.NodeStepData:
		return d.NodeRef, true
	case *events.RetryScheduledData:
		return d.NodeRef, true
	case *events.TimerFiredData:
		return d.Ref, true
	case *events.ChildRunStartedData:
		return d.NodeRef, true
	case *events.ChildRunFinishedData:
		return d.NodeRef, true
	case *events.SignalReceivedData:
		return events.NodeRef{Node: d.Node}, true
	}
	return events.NodeRef{}, false
}

// summary says in a few words what an event states; at is the event's
// time, from which its deadlines are given.
//
// Size: the catalogue, one case per event type; the long cases are
// functions of their own (startedSummary, invokedSummary, waitingSummary).
func summary(p events.Payload, at time.Time) string {
	switch d := p.(type) {
	case *events.RunStartedData:
		return startedSummary(d)
	case *events.RunCompletedData:
		if d.ContinuedAs != "" {
			return "continued as new: " + d.ContinuedAs
		}
		if len(d.Output) > 0 {
			return "output " + truncate(string(d.Output), 80)
		}
		return ""
	case *events.RunFailedData:
		s := d.Error.Error()
		if d.Node != "" {
			s += " (node " + d.Node + ")"
		}
		return s
	case *events.RunCancelRequestedData:
		s := strings.TrimSuffix("by "+d.By+": "+d.Reason, ": ")
		if d.Terminate {
			s = "terminate " + s
		}
		return s
	case *events.RunCancelledData:
		s := strings.TrimSuffix("by "+d.By+": "+d.Reason, ": ")
		if d.Terminated {
			s = "terminated " + s
		}
		return s
	case *events.NodeReadyData:
		return fmt.Sprintf("type %s, queue %s", d.Type, d.Queue)
	case *events.NodeInvokingData:
		s := "worker " + d.Worker
		if d.Delivery > 1 {
			s += fmt.Sprintf(", delivery %d", d.Delivery)
		}
		return s
	case *events.NodeInvokedData:
		return invokedSummary(d)
	case *events.NodeFailedData:
		s := d.Error.Error()
		if d.Error.Retryable {
			s += " (retryable)"
		}
		if d.Worker != "" {
			s += "; worker " + d.Worker
		}
		return s
	case *events.NodeSkippedData:
		return d.Reason
	case *events.NodeWaitingData:
		return waitingSummary(d, at)
	case *events.NodeRoutedData:
		return routing(d)
	case *events.NodeCancelledData:
		return strings.TrimSuffix("by "+d.By+": "+d.Reason, ": ")
	case *events.HeartbeatData:
		return ""
	case *events.NodeStepData:
		s := strings.TrimSuffix(fmt.Sprintf("step %d %s", d.Step, d.Kind), " ")
		if a := d.Await; a != nil {
			s += fmt.Sprintf(": attempt %d ends awaiting %s of tool %q (call %s)", d.Attempt, a.For, a.Tool, a.Call)
		}
		return s
	case *events.RetryScheduledData:
		return fmt.Sprintf("attempt %d %s, after %v", d.Attempt, deadline(d.At, at), &d.LastFailure)
	case *events.TimerFiredData:
		return d.Purpose + " timer " + d.TimerID
	case *events.SignalReceivedData:
		s := "by " + d.By
		if len(d.Data) > 0 {
			s += ", data " + truncate(string(d.Data), 60)
		}
		return s
	case *events.ChildRunStartedData:
		if d.Attempt > 0 {
			return fmt.Sprintf("child run %s of graph %s, for the tool attempt %d awaits", d.ChildRunID, d.Graph, d.Attempt)
		}
		return fmt.Sprintf("child run %s of graph %s", d.ChildRunID, d.Graph)
	case *events.ChildRunFinishedData:
		s := fmt.Sprintf("child run %s %s", d.ChildRunID, d.Status)
		if d.Error != nil {
			s += ": " + d.Error.Error()
		}
		return s
	}
	return ""
}

// startedSummary is a run-started's line: graph, starter, input, lineage.
func startedSummary(d *events.RunStartedData) string {
	s := fmt.Sprintf("graph %s (%s)", d.GraphName, shortDigest(d.GraphDigest))
	if d.StartedBy != "" {
		s += " by " + d.StartedBy
	}
	if len(d.Input) > 0 {
		s += ", input " + truncate(string(d.Input), 60)
	}
	if d.Parent != nil {
		s += ", child of " + d.Parent.RunID
	}
	if d.Fork != nil {
		s += ", " + lineage(d.Fork)
	}
	if d.Chain != nil {
		s += fmt.Sprintf(", link %d of chain %s, continues %s", d.Chain.Link, d.Chain.ID, d.Chain.Previous)
	}
	return s
}

// invokedSummary is a node-invoked's line: worker, duration, the state
// keys it updated, its actions, a fallback.
func invokedSummary(d *events.NodeInvokedData) string {
	var parts []string
	if d.Worker != "" {
		parts = append(parts, "worker "+d.Worker)
	}
	if d.DurationMs > 0 {
		parts = append(parts, duration(time.Duration(d.DurationMs)*time.Millisecond))
	}
	if len(d.Updates) > 0 {
		keys := make([]string, 0, len(d.Updates))
		for k := range d.Updates {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts = append(parts, "updates "+strings.Join(keys, ", "))
	}
	if len(d.Actions) > 0 {
		names := make([]string, len(d.Actions))
		for i, a := range d.Actions {
			names[i] = a.Name
		}
		parts = append(parts, "actions "+strings.Join(names, ", "))
	}
	if d.Fallback {
		parts = append(parts, "fallback")
	}
	return strings.Join(parts, "; ")
}

// waitingSummary is a node-waiting's line, at the event's time at: what it
// waits for and until when.
func waitingSummary(d *events.NodeWaitingData, at time.Time) string {
	if d.For == projection.WaitingForTimer && d.Deadline != nil {
		if !d.Deadline.After(at) {
			return "wait until " + d.Deadline.Local().Format(time.DateTime) + ": already reached, ended at once"
		}
		return "wait " + duration(d.Deadline.Sub(at)) + ", until " + d.Deadline.Local().Format(time.DateTime) + ", on a durable timer"
	}
	s := "for " + d.For
	if d.Deadline != nil {
		s += ", deadline " + deadline(*d.Deadline, at)
	}
	return s
}

// deadline says when t is, from the time at of the event that set it: "in
// 24h0m0s (2026-11-24 06:00:00)"; wall-clock times are local.
func deadline(t, at time.Time) string {
	when := t.Local().Format(time.DateTime)
	if d := t.Sub(at); d >= 0 {
		return "in " + duration(d) + " (" + when + ")"
	}
	return "at " + when
}

// lineage says what a run was forked from: "forked from RUN@5 (reset to
// node b)".
func lineage(f *events.ForkRef) string {
	s := fmt.Sprintf("forked from %s@%d", f.RunID, f.Position)
	if f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s
}

// origin says what started a run the engine started: "schedule nightly,
// fire of 2026-05-01T02:00:00Z", "webhook github (trigger gh), message
// m-17".
func origin(t *events.TriggerRef) string {
	s := t.Origin()
	if !t.FireTime.IsZero() {
		s += ", fire of " + t.FireTime.UTC().Format(time.RFC3339)
	}
	if t.Key != "" && t.Kind != events.TriggerSchedule {
		s += ", message " + truncate(t.Key, 60)
	}
	return s
}

// duration rounds d for people: 12ms, 1.204s, 2m3s.
func duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// offset formats a time offset from the start of a run: 0.012s.
func offset(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func num(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// routing summarises a routing: the edges taken, and those not.
func routing(d *events.NodeRoutedData) string {
	var taken, not []string
	for _, sig := range d.Signals {
		if sig.Taken {
			taken = append(taken, sig.To)
		} else {
			not = append(not, sig.To)
		}
	}
	s := "no edge taken"
	if len(taken) > 0 {
		s = "-> " + strings.Join(taken, ", ")
	}
	if len(not) > 0 {
		s += " (not " + strings.Join(not, ", ") + ")"
	}
	return s
}

// slotName names a limit's slot: "limit" key "key" (max N).
func slotName(s *events.SlotRef) string {
	name := strconv.Quote(s.Limit)
	if s.Key != "" {
		name += " key " + strconv.Quote(s.Key)
	}
	return name + " (max " + strconv.Itoa(s.Max) + ")"
}
