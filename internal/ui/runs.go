package ui

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Listing limits.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

type runList struct {
	Runs   []readmodel.Summary `json:"runs"`
	Next   string              `json:"next"`
	Counts map[string]int      `json:"counts"`
}

// listRuns answers GET /api/runs from the read model of runs.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readCtx(r)
	defer cancel()
	rq, err := parseRunQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := runList{Runs: []readmodel.Summary{}, Counts: map[string]int{}}
	if rq.prefix != "" {
		err = s.runsByPrefix(ctx, rq, &out)
	} else {
		err = s.runsPage(ctx, rq, &out)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Counts per status, under the same filters but the status.
	for _, st := range readmodel.Statuses {
		n, err := s.cl.Count(ctx, append(slices.Clone(rq.filters), client.WithStatus(st))...)
		if err != nil && !errors.Is(err, readmodel.ErrNoReadModel) {
			s.fail(w, r, err)
			return
		}
		out.Counts[string(st)] = n
	}
	writeJSON(w, http.StatusOK, out)
}

// runQuery is GET /api/runs's query, read and checked.
type runQuery struct {
	statuses     []projection.RunStatus
	graph        string
	filter       *readmodel.Filter // query=, compiled
	since, until time.Time
	limit        int
	cursor       string
	prefix       string // q=: a run id or its prefix
	// filters are the list options of every filter but the status (the
	// counts per status take them).
	filters []client.ListOption
}

// options are the list options of the whole query, its page not included.
func (rq *runQuery) options() []client.ListOption {
	opts := slices.Clone(rq.filters)
	if len(rq.statuses) > 0 {
		opts = append(opts, client.WithStatus(rq.statuses...))
	}
	return opts
}

// parseRunQuery reads GET /api/runs's parameters; a bad one is a
// badParam error that names it.
func parseRunQuery(q url.Values) (*runQuery, error) {
	rq := &runQuery{graph: q.Get("graph"), cursor: q.Get("cursor"), prefix: q.Get("q")}
	var err error
	if rq.statuses, err = statusParam(q); err != nil {
		return nil, err
	}
	if rq.graph != "" {
		rq.filters = append(rq.filters, client.WithGraph(rq.graph))
	}
	if c := q.Get("chain"); c != "" {
		rq.filters = append(rq.filters, client.WithChain(c))
	}
	if expr := q.Get("query"); expr != "" {
		// The query language of 'weft list -q' (readmodel.FilterHelp); a
		// query that does not compile is answered with where.
		if rq.filter, err = readmodel.ParseFilter(expr); err != nil {
			return nil, badParam("query", "%s", err.Error())
		}
		rq.filters = append(rq.filters, client.WithQuery(expr))
	}
	if rq.since, rq.until, err = timeRange(q); err != nil {
		return nil, err
	}
	if !rq.since.IsZero() || !rq.until.IsZero() {
		rq.filters = append(rq.filters, client.WithStartedBetween(rq.since, rq.until))
	}
	if rq.limit, err = intParam(q, "limit", defaultListLimit, 1, maxListLimit); err != nil {
		return nil, err
	}
	if _, err := readmodel.ParseCursor(rq.cursor); rq.cursor != "" && err != nil {
		return nil, badParam("cursor", "%q is not a cursor this server gave", rq.cursor)
	}
	return rq, nil
}

// timeRange reads since and until, each optional; until must be after
// since.
func timeRange(q url.Values) (since, until time.Time, err error) {
	if since, err = timeParam(q, "since"); err != nil {
		return since, until, err
	}
	if until, err = timeParam(q, "until"); err != nil {
		return since, until, err
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return since, until, badParam("until", "%s is not after since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	return since, until, nil
}

// statusParam reads the status parameters (repeated, or comma lists).
func statusParam(q url.Values) ([]projection.RunStatus, error) {
	var statuses []projection.RunStatus
	for _, v := range q["status"] {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			if !slices.Contains(readmodel.Statuses, projection.RunStatus(st)) {
				return nil, badParam("status", "unknown status %q (want one of %s)", st, statusList())
			}
			statuses = append(statuses, projection.RunStatus(st))
		}
	}
	return statuses, nil
}

// runsByPrefix puts in out the runs rq.prefix names: a whole run id is
// one get. The read model has no index by id prefix: for a prefix, it
// reads the selection and keeps the matches (a page of them).
func (s *server) runsByPrefix(ctx context.Context, rq *runQuery, out *runList) error {
	if !eventlog.ValidToken(rq.prefix) {
		return nil // no run id has it as a prefix either
	}
	sum, err := s.cl.Summary(ctx, rq.prefix)
	switch {
	case err == nil:
		if matches(sum, rq.statuses, rq.since, rq.until, rq.graph) && (rq.filter == nil || rq.filter.Match(sum, time.Now())) {
			out.Runs = append(out.Runs, *sum)
		}
		return nil
	case !errors.Is(err, readmodel.ErrNotFound) && !errors.Is(err, readmodel.ErrNoReadModel):
		return err
	}
	page, err := s.cl.ListPage(ctx, rq.options()...)
	if err != nil && !errors.Is(err, readmodel.ErrNoReadModel) {
		return err
	}
	for _, sum := range pageRuns(page) {
		if strings.HasPrefix(sum.RunID, rq.prefix) && len(out.Runs) < rq.limit {
			out.Runs = append(out.Runs, sum)
		}
	}
	return nil
}

// runsPage puts in out a page of the runs rq selects, and the next
// page's cursor.
func (s *server) runsPage(ctx context.Context, rq *runQuery, out *runList) error {
	opts := append(rq.options(), client.WithLimit(rq.limit))
	if rq.cursor != "" {
		opts = append(opts, client.WithCursor(rq.cursor))
	}
	page, err := s.cl.ListPage(ctx, opts...)
	switch {
	case errors.Is(err, readmodel.ErrNoReadModel):
		// No coordinator ever ran here: no runs yet.
		return nil
	case err != nil:
		return err
	}
	out.Runs, out.Next = append(out.Runs, page.Runs...), page.Next // [] for none, not null
	return nil
}

func statusList() string {
	names := make([]string, len(readmodel.Statuses))
	for i, st := range readmodel.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// timeParam reads an optional RFC 3339 time.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badParam(name, "want an RFC 3339 time (2026-11-23T09:00:00Z), got %q", v)
	}
	return t, nil
}

// intParam reads an optional integer within [lo, hi].
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, "want a whole number from %d to %d, got %q", lo, hi, v)
	}
	return n, nil
}

// runID reads the {id} of the path.
func runID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !eventlog.ValidToken(id) {
		return "", badParam("id", "%q is not a run id (letters, digits, '-' and '_')", id)
	}
	return id, nil
}

// runLog reads the log of the run the path names (through the cache);
// when it cannot, it answers the request and returns false.
func (s *server) runLog(ctx context.Context, w http.ResponseWriter, r *http.Request) (string, *runLog, bool) {
	id, err := runID(r)
	if err == nil {
		var l *runLog
		if l, err = s.logs.get(ctx, id); err == nil {
			return id, l, true
		}
	}
	s.fail(w, r, err)
	return "", nil, false
}

type runView struct {
	Summary readmodel.Summary `json:"summary"`
	// Waiting is what the run waits on (Summary.Waiting), each human
	// node's with the command that answers it.
	Waiting    []waitView        `json:"waiting,omitempty"`
	State      *projection.State `json:"state"`
	Graph      *graphView        `json:"graph"`
	GraphError string            `json:"graphError,omitempty"`
	TraceID    string            `json:"traceId"`
	TraceURL   string            `json:"traceUrl"`
	Children   []string          `json:"children"`
	Events     int               `json:"events"`
	// Pending are the nodes that have not finished, and where each is
	// (client.Pending): where the run is stuck.
	Pending []client.Pending `json:"pending"`
}

// waitView is one wait of a run, for the run's page.
type waitView struct {
	readmodel.Waiting
	// Command answers a human node's wait: weft signal RUN NODE -data DATA.
	Command string `json:"command,omitempty"`
}

// getRun answers GET /api/runs/{id}: the run folded from its log.
func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readCtx(r)
	defer cancel()
	id, log, ok := s.runLog(ctx, w, r)
	if !ok {
		return
	}
	hist, st := log.events, log.final
	v := runView{State: st, Events: len(hist), Children: []string{}, Pending: client.PendingOf(st, hist)}
	if v.Pending == nil {
		v.Pending = []client.Pending{}
	}
	if sum, err := s.cl.Summary(ctx, id); err == nil {
		v.Summary = *sum
		// The log is fresher than the read model on what the run does
		// now: its status (waiting or running) and its waits.
		if !sum.Status.Ended() {
			v.Summary.Status, v.Summary.Waiting = readmodel.StatusOf(st), readmodel.WaitsOf(st)
		}
	} else {
		// Not indexed (yet, or the read model is gone): the fold says
		// as much.
		v.Summary = readmodel.Summarize(st, readmodel.DefaultRetention)
	}
	for i, w := range v.Summary.Waiting {
		if w.For == "signal" {
			v.Waiting = append(v.Waiting, waitView{Waiting: v.Summary.Waiting[i], Command: readmodel.SignalCommand(id, w)})
		} else {
			v.Waiting = append(v.Waiting, waitView{Waiting: v.Summary.Waiting[i]})
		}
	}
	g, err := viewGraph(st)
	if err != nil {
		v.GraphError = err.Error()
	}
	v.Graph = g
	v.TraceID = traceID(hist[0].TraceParent)
	if v.TraceID != "" && s.cfg.TraceURL != "" {
		v.TraceURL = strings.ReplaceAll(s.cfg.TraceURL, TraceIDPlaceholder, v.TraceID)
	}
	for _, e := range hist {
		if e.Type != events.ChildRunStarted {
			continue
		}
		if p, err := e.Payload(); err == nil {
			if c := p.(*events.ChildRunStartedData).ChildRunID; !slices.Contains(v.Children, c) {
				v.Children = append(v.Children, c)
			}
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// traceID is the trace id of a W3C traceparent
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when there is none.
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	if b, err := hex.DecodeString(parts[1]); err != nil || !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		return ""
	}
	return strings.ToLower(parts[1])
}

// Event listing limits.
const (
	defaultEventLimit = 500
	maxEventLimit     = 5000
)

type eventList struct {
	Events []eventView `json:"events"`
	Total  int         `json:"total"`
}

// eventView is one event of a run as the timeline shows it.
type eventView struct {
	Position  int       `json:"position"`
	Seq       uint64    `json:"seq"`
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Kind      string    `json:"kind"`
	Time      time.Time `json:"time"`
	Node      string    `json:"node"`
	Attempt   int       `json:"attempt"`
	Iteration int       `json:"iteration"`
	// Item is the map item the event concerns, if it does.
	Item    *int            `json:"item,omitempty"`
	Subject string          `json:"subject"`
	Summary string          `json:"summary"`
	Data    json.RawMessage `json:"data"`
	Refused string          `json:"refused,omitempty"`
}

// viewEvent describes event e at position pos; folded is what Apply said
// of it.
func (s *server) viewEvent(pos int, e *events.Event, folded error) eventView {
	v := eventView{
		Position: pos, Seq: e.Seq, ID: e.ID, Type: string(e.Type), Kind: kind(e.Type), Time: e.Stored,
		Node: e.NodeID, Attempt: e.Attempt, Subject: e.Subject(), Data: e.Data,
	}
	if v.Time.IsZero() {
		v.Time = e.Time
	}
	if !json.Valid(v.Data) {
		v.Data = nil
	}
	// Most payloads name the execution they concern at the top level
	// (events.NodeRef is embedded); a signal names its node.
	var ref struct {
		Node      string `json:"node"`
		Iteration int    `json:"iteration"`
		Item      *int   `json:"item"`
	}
	if v.Data != nil && json.Unmarshal(v.Data, &ref) == nil {
		v.Iteration, v.Item = ref.Iteration, ref.Item
		if v.Node == "" {
			v.Node = ref.Node
		}
	}
	switch {
	case e.Refused != nil:
		v.Refused = e.Refused.Error()
	case folded != nil:
		v.Refused = folded.Error()
	default:
		v.Summary = s.cfg.Summarize(e)
	}
	return v
}

// kind is an event type without its family and version: "node.invoked".
func kind(t events.Type) string {
	k := strings.TrimPrefix(string(t), "dev.weft.")
	if i := strings.LastIndex(k, ".v"); i > 0 {
		k = k[:i]
	}
	return k
}

// runEvents answers GET /api/runs/{id}/events: a page of the run's events.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err := intParam(q, "from", 1, 1, 1<<31-1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := intParam(q, "limit", defaultEventLimit, 1, maxEventLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withData := true
	if v := q.Get("data"); v != "" {
		if withData, err = strconv.ParseBool(v); err != nil {
			s.fail(w, r, badParam("data", "want true or false, got %q", v))
			return
		}
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	_, log, ok := s.runLog(ctx, w, r)
	if !ok {
		return
	}
	out := eventList{Events: []eventView{}, Total: len(log.events)}
	for i := from - 1; i < len(log.events) && len(out.Events) < limit; i++ {
		v := s.viewEvent(i+1, log.events[i], log.folded[i])
		if !withData {
			v.Data = nil
		}
		out.Events = append(out.Events, v)
	}
	writeJSON(w, http.StatusOK, out)
}

type stateView struct {
	Position int               `json:"position"`
	State    *projection.State `json:"state"`
	Diff     []change          `json:"diff"`
}

// change is one difference between two states.
type change struct {
	Path   string          `json:"path"`
	Op     string          `json:"op"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// runState answers GET /api/runs/{id}/state?at=N: the state after the
// event at N, and its difference from the state after N-1.
func (s *server) runState(w http.ResponseWriter, r *http.Request) {
	at, err := intParam(r.URL.Query(), "at", 0, 1, 1<<31-1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	id, log, ok := s.runLog(ctx, w, r)
	if !ok {
		return
	}
	n := len(log.events)
	if at == 0 {
		at = n
	}
	if at > n {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Field: "at",
			Message: "at: run " + id + " has no event at position " + strconv.Itoa(at) + " (its events are 1 to " + strconv.Itoa(n) + ")"})
		return
	}
	all := r.URL.Query().Get("all")
	if all != "" && all != "1" && all != "true" {
		s.fail(w, r, badParam("all", "want 1 or true, got %q", all))
		return
	}
	before, after := log.stateAfter(at-1), log.stateAfter(at)
	writeJSON(w, http.StatusOK, stateView{Position: at, State: after, Diff: diffStates(before, after, all != "")})
}

// diffStates lists what changed from a to b, with dotted paths
// ("state.count", "nodes.fetch.status"): without the fold's bookkeeping
// unless all (projection.StateDiff).
func diffStates(a, b *projection.State, all bool) []change {
	out := []change{}
	for _, c := range projection.StateDiff(a, b, all) {
		ch := change{Path: strings.ReplaceAll(strings.TrimPrefix(c.Path, "/"), "/", "."), Before: c.Before, After: c.After}
		switch {
		case c.Before == nil:
			ch.Op = "add"
		case c.After == nil:
			ch.Op = "remove"
		default:
			ch.Op = "change"
		}
		out = append(out, ch)
	}
	return out
}

// matches says whether a run's summary is selected by a listing's filters.
func matches(sum *readmodel.Summary, statuses []projection.RunStatus, since, until time.Time, graph string) bool {
	switch {
	case !readmodel.StatusIn(sum.Status, statuses),
		graph != "" && sum.Graph != graph,
		!since.IsZero() && sum.StartedAt.Before(since),
		!until.IsZero() && !sum.StartedAt.Before(until):
		return false
	}
	return true
}

// pageRuns is a page's runs; none for no page.
func pageRuns(p *readmodel.Page) []readmodel.Summary {
	if p == nil {
		return nil
	}
	return p.Runs
}
