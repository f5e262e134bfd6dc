package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

type runList struct {
	Runs   []readmodel.Summary `json:"runs"`
	Next   string              `json:"next"`
	Counts map[string]int      `json:"counts"`
}

type runDetail struct {
	Summary readmodel.Summary `json:"summary"`
	Waiting []struct {
		Node, For, Data, Command string
	} `json:"waiting"`
	State *projection.State `json:"state"`
	Graph *struct {
		Nodes []struct {
			ID, Type, Queue, Label string
			Subgraph, Local        bool
		} `json:"nodes"`
		Edges []struct {
			From, To, Label string
			Back            bool
		} `json:"edges"`
	} `json:"graph"`
	TraceID  string           `json:"traceId"`
	TraceURL string           `json:"traceUrl"`
	Children []string         `json:"children"`
	Events   int              `json:"events"`
	Pending  []client.Pending `json:"pending"`
}

type event struct {
	Position  int             `json:"position"`
	Seq       uint64          `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Kind      string          `json:"kind"`
	Node      string          `json:"node"`
	Attempt   int             `json:"attempt"`
	Iteration int             `json:"iteration"`
	Subject   string          `json:"subject"`
	Summary   string          `json:"summary"`
	Data      json.RawMessage `json:"data"`
	Refused   string          `json:"refused"`
}

type eventList struct {
	Events []event `json:"events"`
	Total  int     `json:"total"`
}

type stateAt struct {
	Position int               `json:"position"`
	State    *projection.State `json:"state"`
	Diff     []diffEntry       `json:"diff"`
}

type diffEntry struct {
	Path   string          `json:"path"`
	Op     string          `json:"op"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// TestUIRunList: the run list is newest first by start time, filtered by status and
// graph, searched by id prefix, paged, and counted per status.
func TestUIRunList(t *testing.T) {
	e := newEnv(t, ui.Config{})
	// The first run's id sorts after generated ids: the list still shows
	// it last, by its start time.
	g, err := graph.Parse([]byte(fanJoinYAML), "test.yaml", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.cl.Start(context.Background(), g, client.WithRunID("zz-first"))
	if err != nil {
		t.Fatal(err)
	}
	e.wait(first)
	second := e.run(brokenYAML, nil)
	third := e.run(fanJoinYAML, nil)
	for id, st := range map[string]string{first: "completed", second: "failed", third: "completed"} {
		e.waitIndexed(id, st)
	}

	var all runList
	e.get("/api/runs").decode(t, &all)
	if got := ids(all.Runs); !slices.Equal(got, []string{third, second, first}) {
		t.Errorf("runs %v, want newest first %v", got, []string{third, second, first})
	}
	if all.Counts["completed"] != 2 || all.Counts["failed"] != 1 || all.Counts["running"] != 0 || len(all.Counts) != len(readmodel.Statuses) {
		t.Errorf("counts %v, want completed 2, failed 1, and every status", all.Counts)
	}

	var failed runList
	e.get("/api/runs?status=failed").decode(t, &failed)
	if got := ids(failed.Runs); !slices.Equal(got, []string{second}) {
		t.Errorf("status=failed: %v, want [%s]", got, second)
	}
	var both runList
	e.get("/api/runs?status=failed,completed&graph=fanjoin").decode(t, &both)
	if got := ids(both.Runs); !slices.Equal(got, []string{third, first}) || both.Counts["failed"] != 0 || both.Counts["completed"] != 2 {
		t.Errorf("graph=fanjoin: %v counts %v, want [%s %s], failed 0", got, both.Counts, third, first)
	}
	var search runList
	e.get("/api/runs?q="+second[:len(second)-3]).decode(t, &search)
	if got := ids(search.Runs); !slices.Equal(got, []string{second}) {
		t.Errorf("q=prefix of %s: %v", second, got)
	}

	var exact, filtered runList
	e.get("/api/runs?q="+second).decode(t, &exact)
	e.get("/api/runs?status=completed&q="+second).decode(t, &filtered)
	if got := ids(exact.Runs); !slices.Equal(got, []string{second}) || len(filtered.Runs) != 0 {
		t.Errorf("q=%s: %v; with status=completed: %v, want none", second, got, ids(filtered.Runs))
	}
	var none runList
	if r := e.get("/api/runs?q=no/such"); r.status != http.StatusOK {
		t.Errorf("q=no/such: %d %s", r.status, r.body)
	} else if r.decode(t, &none); len(none.Runs) != 0 {
		t.Errorf("q=no/such: %v", ids(none.Runs))
	}

	// The query language of 'weft list -q'; a bad query says where.
	var queried runList
	e.get(`/api/runs?query=`+url.QueryEscape(`graph = "fanjoin" AND id != "`+third+`"`)).decode(t, &queried)
	if got := ids(queried.Runs); !slices.Equal(got, []string{first}) || queried.Counts["completed"] != 1 || queried.Counts["failed"] != 0 {
		t.Errorf("query: %v counts %v, want [%s], completed 1", got, queried.Counts, first)
	}
	wantError(t, "bad query", e.get(`/api/runs?query=`+url.QueryEscape(`graph = "x" AND grph = 1`)), http.StatusBadRequest, "query")

	var page1, page2 runList
	e.get("/api/runs?limit=2").decode(t, &page1)
	if len(page1.Runs) != 2 || page1.Next == "" {
		t.Fatalf("limit=2: %d runs, next %q; want 2 and a cursor", len(page1.Runs), page1.Next)
	}
	e.get("/api/runs?limit=2&cursor="+page1.Next).decode(t, &page2)
	if got := ids(page2.Runs); !slices.Equal(got, []string{first}) || page2.Next != "" {
		t.Errorf("second page: %v next %q, want [%s] and no cursor", got, page2.Next, first)
	}

	for _, tt := range []struct{ query, field string }{
		{"status=asleep", "status"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=x", "limit"},
		{"since=yesterday", "since"},
		{"until=2026-13-01T00:00:00Z", "until"},
		{"since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z", "until"},
	} {
		wantError(t, "GET /api/runs?"+tt.query, e.get("/api/runs?"+tt.query), http.StatusBadRequest, tt.field)
	}
}

func ids(ss []readmodel.Summary) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.RunID)
	}
	return out
}

// TestUIRunFanOutJoin: a run's detail has its summary, its folded state,
// its graph with START and END, and its events count; its timeline pages;
// and the state at any event comes with what that event changed.
func TestUIRunFanOutJoin(t *testing.T) {
	e := newEnv(t, ui.Config{TraceURL: "http://jaeger.test/trace/{traceId}"})
	id := e.run(fanJoinYAML, map[string]any{"docs": 2})

	var d runDetail
	r := e.get("/api/runs/" + id)
	r.decode(t, &d)
	if d.State.Status != projection.RunCompleted || d.Summary.RunID != id || d.Summary.Graph != "fanjoin" {
		t.Errorf("run %s: state %s, summary %+v", id, d.State.Status, d.Summary)
	}
	for _, n := range []string{"split", "left", "right", "join"} {
		if ns := d.State.Nodes[n]; ns == nil || ns.Status != projection.NodeSucceeded {
			t.Errorf("node %s: %+v, want succeeded", n, ns)
		}
	}
	if d.Graph == nil {
		t.Fatalf("no graph in %s", r.body)
	}
	var nodes []string
	for _, n := range d.Graph.Nodes {
		nodes = append(nodes, n.ID+":"+n.Type)
	}
	if want := []string{"START:start", "split:echo", "left:transform", "right:transform", "join:echo", "END:end"}; !slices.Equal(nodes, want) {
		t.Errorf("graph nodes %v, want %v", nodes, want)
	}
	for _, n := range d.Graph.Nodes {
		if n.ID == "left" && (n.Queue != "default" || !n.Local || n.Label != "left") {
			t.Errorf("node left: %+v, want queue default, local (a transform), label left", n)
		}
		if n.ID == "split" && n.Local {
			t.Errorf("node split: %+v, an echo node is a worker's", n)
		}
	}
	var edges []string
	for _, ed := range d.Graph.Edges {
		edges = append(edges, ed.From+">"+ed.To)
	}
	if want := []string{"START>split", "split>left", "split>right", "left>join", "right>join", "join>END"}; !slices.Equal(edges, want) {
		t.Errorf("graph edges %v, want %v", edges, want)
	}
	if d.TraceID != "" && d.TraceURL != "http://jaeger.test/trace/"+d.TraceID {
		t.Errorf("trace %q links to %q", d.TraceID, d.TraceURL)
	}

	var all eventList
	e.get("/api/runs/"+id+"/events").decode(t, &all)
	if all.Total != d.Events || len(all.Events) != all.Total || all.Total < 10 {
		t.Fatalf("events: %d of %d, detail says %d", len(all.Events), all.Total, d.Events)
	}
	for i, ev := range all.Events {
		if ev.Position != i+1 || ev.Seq == 0 || ev.ID == "" || ev.Subject == "" || ev.Kind == "" || !json.Valid(ev.Data) {
			t.Errorf("event %d: %+v", i+1, ev)
		}
	}
	if k := all.Events[0].Kind; k != "run.started" {
		t.Errorf("first event %s, want run.started", k)
	}
	if k := all.Events[all.Total-1].Kind; k != "run.completed" {
		t.Errorf("last event %s, want run.completed", k)
	}
	var bare eventList
	e.get("/api/runs/"+id+"/events?data=false").decode(t, &bare)
	if len(bare.Events) != all.Total || string(bare.Events[0].Data) != "null" || bare.Events[0].Kind != "run.started" {
		t.Errorf("data=false: %d events, first data %s", len(bare.Events), bare.Events[0].Data)
	}
	wantError(t, "data=maybe", e.get("/api/runs/"+id+"/events?data=maybe"), http.StatusBadRequest, "data")
	var page eventList
	e.get("/api/runs/"+id+"/events?from=3&limit=2").decode(t, &page)
	if len(page.Events) != 2 || page.Events[0].Position != 3 || page.Events[1].ID != all.Events[3].ID || page.Total != all.Total {
		t.Errorf("from=3&limit=2: %+v", page)
	}

	// The event that recorded left's output: the state after it has
	// state.left, and its diff says it was added.
	pos := 0
	for _, ev := range all.Events {
		if ev.Kind == "node.invoked" && ev.Node == "left" {
			pos = ev.Position
		}
	}
	if pos == 0 {
		t.Fatal("no node.invoked of left")
	}
	var at stateAt
	e.get("/api/runs/"+id+"/state?at="+strconv.Itoa(pos)).decode(t, &at)
	if at.Position != pos || string(at.State.Vars["left"]) != "1" {
		t.Errorf("state at %d: position %d, state.left %s, want 1", pos, at.Position, at.State.Vars["left"])
	}
	found := false
	for _, c := range at.Diff {
		if c.Path == "state.left" {
			found = c.Op == "add" && string(c.After) == "1" && c.Before == nil
		}
	}
	if !found {
		t.Errorf("diff at %d lacks state.left added as 1: %+v", pos, at.Diff)
	}
	// What changed is the run's state and nodes, not the fold's
	// bookkeeping, unless all=1 asks for it.
	var withAll stateAt
	e.get("/api/runs/"+id+"/state?all=1&at="+strconv.Itoa(pos)).decode(t, &withAll)
	has := func(d []diffEntry, path string) bool {
		return slices.ContainsFunc(d, func(c diffEntry) bool { return c.Path == path })
	}
	for _, p := range []string{"lastSeq", "updatedAt", "stats.events"} {
		if has(at.Diff, p) || !has(withAll.Diff, p) {
			t.Errorf("%s: in the diff %v, in all=1's %v; want only in all=1's", p, has(at.Diff, p), has(withAll.Diff, p))
		}
	}
	wantError(t, "all=maybe", e.get("/api/runs/"+id+"/state?at=1&all=maybe"), http.StatusBadRequest, "all")
	var before stateAt
	e.get("/api/runs/"+id+"/state?at="+strconv.Itoa(pos-1)).decode(t, &before)
	if _, ok := before.State.Vars["left"]; ok {
		t.Errorf("state at %d already has left", pos-1)
	}
	var first stateAt
	e.get("/api/runs/"+id+"/state?at=1").decode(t, &first)
	if first.State.Status != projection.RunRunning || len(first.Diff) == 0 {
		t.Errorf("state at 1: %s with %d changes, want running and the run's start as changes", first.State.Status, len(first.Diff))
	}

	wantError(t, "state at past the end", e.get("/api/runs/"+id+"/state?at="+strconv.Itoa(all.Total+1)), http.StatusNotFound, "at")
	wantError(t, "state at=0", e.get("/api/runs/"+id+"/state?at=0"), http.StatusBadRequest, "at")
	wantError(t, "state at=x", e.get("/api/runs/"+id+"/state?at=x"), http.StatusBadRequest, "at")
	wantError(t, "events from=-1", e.get("/api/runs/"+id+"/events?from=-1"), http.StatusBadRequest, "from")
	wantError(t, "events limit=5001", e.get("/api/runs/"+id+"/events?limit=5001"), http.StatusBadRequest, "limit")
}

// TestUIRetries: a node that fails twice then succeeds shows its failed
// attempts in the timeline and attempt 3 in the state; a node that always
// fails fails its run, with the error in the state.
func TestUIRetries(t *testing.T) {
	e := newEnv(t, ui.Config{})
	flaky := e.run(flakyYAML, nil)
	broken := e.run(brokenYAML, nil)

	var d runDetail
	e.get("/api/runs/"+flaky).decode(t, &d)
	if d.State.Status != projection.RunCompleted || d.State.Nodes["flaky"].Attempt != 3 {
		t.Errorf("flaky: %s, attempt %d; want completed on attempt 3", d.State.Status, d.State.Nodes["flaky"].Attempt)
	}
	var evs eventList
	e.get("/api/runs/"+flaky+"/events").decode(t, &evs)
	var failures, retries []int
	for _, ev := range evs.Events {
		switch ev.Kind {
		case "node.failed":
			failures = append(failures, ev.Attempt)
			if !strings.Contains(ev.Summary, "boom") && !strings.Contains(string(ev.Data), "boom") {
				t.Errorf("failure event says nothing of boom: %+v", ev)
			}
		case "retry.scheduled":
			retries = append(retries, ev.Iteration)
		}
	}
	// A failure is reported by the worker and decided by the
	// coordinator: each attempt's failure may show twice.
	if len(failures) < 2 || len(retries) != 2 {
		t.Errorf("flaky: failures on attempts %v, %d retries scheduled; want attempts 1 and 2 failed, 2 retries", failures, len(retries))
	}

	var b runDetail
	e.get("/api/runs/"+broken).decode(t, &b)
	if b.State.Status != projection.RunFailed || b.State.Error == nil || !strings.Contains(b.State.Error.Error(), "always fails") {
		t.Errorf("broken: %s, error %+v; want failed with always fails", b.State.Status, b.State.Error)
	}
	if n := b.State.Nodes["always"]; n == nil || n.Status != projection.NodeFailed || n.Attempt != 2 {
		t.Errorf("broken's node: %+v, want failed on attempt 2", n)
	}
}

// TestUISignal: a human node waits; a signal POSTed through the UI
// completes the run; bad signals get located errors.
func TestUISignal(t *testing.T) {
	e := newEnv(t, ui.Config{})
	id := e.start(approvalYAML, nil)
	e.waitFor(id, "waiting", "approve")

	var d runDetail
	e.get("/api/runs/"+id).decode(t, &d)
	if n := d.State.Nodes["approve"]; n == nil || n.Status != projection.NodeWaiting {
		t.Fatalf("approve: %+v, want waiting", n)
	}
	// The run page says where the run waits, and how to answer it.
	if len(d.Pending) != 1 || d.Pending[0].Node != "approve" || d.Pending[0].WaitingFor != "signal" ||
		!strings.HasPrefix(d.Pending[0].Answer, "weft signal "+id+" approve -data ") {
		t.Errorf("pending = %+v, want approve waiting for a signal, with its answer", d.Pending)
	}
	// The run only waits: it is waiting, on approve, with the command
	// that answers it (the keys its conditions read, to fill in).
	if want := "weft signal " + id + ` approve -data '{"approved":...}'`; d.Summary.Status != projection.RunWaiting ||
		len(d.Waiting) != 1 || d.Waiting[0].Node != "approve" || d.Waiting[0].For != "signal" || d.Waiting[0].Command != want {
		t.Fatalf("summary status %s, waiting %+v; want waiting on approve, answered by %s", d.Summary.Status, d.Waiting, want)
	}

	path := "/api/runs/" + id + "/signal"
	r := e.do(http.MethodPost, path, `{"node":"approve","data":{"approved":true}}`, nil)
	wantError(t, "signal without "+ui.ActionHeader, r, http.StatusForbidden, ui.ActionHeader)
	wantError(t, "invalid JSON", e.post(path, `{"node":"approve","data":{approved}}`), http.StatusBadRequest, "body")
	wantError(t, "unknown field", e.post(path, `{"node":"approve","dat":{}}`), http.StatusBadRequest, "body")
	wantError(t, "empty body", e.post(path, ``), http.StatusBadRequest, "body")
	wantError(t, "no node", e.post(path, `{"data":{}}`), http.StatusBadRequest, "node")
	wantError(t, "unknown node", e.post(path, `{"node":"nope","data":{}}`), http.StatusBadRequest, "node")
	wantError(t, "bad id", e.post(path, `{"node":"approve","id":"a b"}`), http.StatusBadRequest, "id")
	huge := `{"node":"approve","data":"` + strings.Repeat("x", ui.MaxBody) + `"}`
	wantError(t, "huge body", e.post(path, huge), http.StatusRequestEntityTooLarge, "body")
	wantError(t, "unknown run", e.post("/api/runs/nosuchrun/signal", `{"node":"approve"}`), http.StatusNotFound, "")

	var sent struct{ ID string }
	r = e.post(path, `{"node":"approve","data":{"approved":true},"id":"ui-test-1"}`)
	if r.status != http.StatusOK {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	r.decode(t, &sent)
	e.wait(id)
	e.get("/api/runs/"+id).decode(t, &d)
	if d.State.Status != projection.RunCompleted || string(d.State.Vars["published"]) != "true" || d.Pending == nil || len(d.Pending) != 0 {
		t.Errorf("after the signal: %s, published %s, pending %v (want [])", d.State.Status, d.State.Vars["published"], d.Pending)
	}
	var evs eventList
	e.get("/api/runs/"+id+"/events").decode(t, &evs)
	if !slices.ContainsFunc(evs.Events, func(ev event) bool { return ev.Kind == "signal.received" && ev.ID == sent.ID && ev.Node == "approve" }) {
		t.Errorf("no signal.received with id %s in the timeline", sent.ID)
	}
	wantError(t, "signal to an ended run", e.post(path, `{"node":"approve","data":{}}`), http.StatusConflict, "")
	wantError(t, "cancel an ended run", e.post("/api/runs/"+id+"/cancel", `{"reason":"late"}`), http.StatusConflict, "")
}

// TestUICancelAndFork: a waiting run is cancelled, and forked from an
// event into a new run.
func TestUICancelAndFork(t *testing.T) {
	e := newEnv(t, ui.Config{})
	id := e.start(approvalYAML, nil)
	e.waitFor(id, "waiting", "approve")
	wantError(t, "cancel with unknown field", e.post("/api/runs/"+id+"/cancel", `{"why":"x"}`), http.StatusBadRequest, "body")
	if r := e.post("/api/runs/"+id+"/cancel", `{"reason":"from the UI"}`); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "{}" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	e.wait(id)
	var d runDetail
	e.get("/api/runs/"+id).decode(t, &d)
	if d.State.Status != projection.RunCancelled {
		t.Errorf("after cancel: %s", d.State.Status)
	}

	wantError(t, "fork without at", e.post("/api/runs/"+id+"/fork", `{}`), http.StatusBadRequest, "at")
	wantError(t, "fork at past the end", e.post("/api/runs/"+id+"/fork", `{"at":9999}`), http.StatusNotFound, "at")
	var forked struct{ RunID string }
	r := e.post("/api/runs/"+id+"/fork", `{"at":1}`)
	if r.status != http.StatusOK {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	r.decode(t, &forked)
	e.waitFor(forked.RunID, "waiting", "approve")
	var f runDetail
	e.get("/api/runs/"+forked.RunID).decode(t, &f)
	if f.Summary.ForkedFrom == nil || f.Summary.ForkedFrom.RunID != id {
		t.Errorf("fork's summary %+v, want forked from %s", f.Summary, id)
	}
}

// TestUIBadRequests: unknown runs and API paths are 404 JSON, malformed
// ids 400.
func TestUIBadRequests(t *testing.T) {
	e := newEnv(t, ui.Config{})
	for _, path := range []string{"/api/runs/nosuchrun", "/api/runs/nosuchrun/events", "/api/runs/nosuchrun/state?at=1", "/api/live/runs/nosuchrun", "/api/nothing"} {
		wantError(t, "GET "+path, e.get(path), http.StatusNotFound, "")
	}
	wantError(t, "bad id", e.get("/api/runs/no%20such"), http.StatusBadRequest, "id")
	wantError(t, "bad live from", e.get("/api/live/runs/x?from=-2"), http.StatusBadRequest, "from")
}

// TestUIScriptInState: markup in a run's state comes back as JSON data,
// escaped, never as HTML.
func TestUIScriptInState(t *testing.T) {
	e := newEnv(t, ui.Config{})
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	id := e.run(fanJoinYAML, map[string]any{"note": evil})
	for _, path := range []string{"/api/runs/" + id, "/api/runs/" + id + "/events", "/api/runs/" + id + "/state?at=1"} {
		r := e.get(path)
		if ct := r.header.Get("Content-Type"); ct != "application/json" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: Content-Type %q, nosniff %q", path, ct, r.header.Get("X-Content-Type-Options"))
		}
		if strings.Contains(string(r.body), "<script") || strings.Contains(string(r.body), "<img") {
			t.Errorf("%s: markup unescaped in %s", path, r.body)
		}
	}
	var d runDetail
	e.get("/api/runs/"+id).decode(t, &d)
	var got string
	_ = json.Unmarshal(d.State.Vars["note"], &got)
	if got != evil {
		t.Errorf("state.note %q, want %q as data", got, evil)
	}
}

// TestUIWorkers: the workers page lists the queue, its live worker and its
// types, the work waiting, and whether a coordinator is alive.
func TestUIWorkers(t *testing.T) {
	e := newEnv(t, ui.Config{})
	e.run(fanJoinYAML, nil)
	var w struct {
		Queues []struct {
			Name    string
			Workers []struct {
				Name  string
				Types []string
			}
			Waiting *int
			Types   []string
		}
		Coordinators struct {
			Alive  bool
			Window string
		}
	}
	e.get("/api/workers").decode(t, &w)
	if len(w.Queues) == 0 || w.Queues[0].Name != "default" {
		t.Fatalf("queues %+v, want default first", w.Queues)
	}
	q := w.Queues[0]
	if len(q.Workers) != 1 || q.Workers[0].Name != "ui-test-worker" || !slices.Contains(q.Types, "echo") || q.Waiting == nil || *q.Waiting != 0 {
		t.Errorf("default queue %+v", q)
	}
	if !w.Coordinators.Alive || w.Coordinators.Window == "" {
		t.Errorf("coordinators %+v, want alive", w.Coordinators)
	}
}

// otherStream is a store that names a stream the server does not have:
// its queues' consumers cannot be listed.
type otherStream struct{ events.Store }

func (otherStream) StreamName() string { return "NO_SUCH_STREAM" }

func (o otherStream) Unwrap() events.Store { return o.Store }

// TestUIWorkersUnknownWaiting: when the queues' consumers cannot be read,
// the workers page still lists the live workers, with the work waiting
// unknown (null) and a note that says why.
func TestUIWorkersUnknownWaiting(t *testing.T) {
	e := newEnv(t, ui.Config{})
	h, err := ui.New(ui.Config{Store: otherStream{e.eng.Store()}, Client: e.cl})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	o := &env{t: t, url: hs.URL}
	for range 2 { // the second answer comes from the remembered failure
		var w struct {
			Queues []struct {
				Name    string
				Workers []struct{ Name string }
				Waiting *int
			}
			Note string
		}
		o.get("/api/workers").decode(t, &w)
		if len(w.Queues) != 1 || w.Queues[0].Waiting != nil || len(w.Queues[0].Workers) != 1 || !strings.Contains(w.Note, "unknown") {
			t.Errorf("workers without consumers: %+v", w)
		}
	}
}

// TestUIRefusesForeignStore: a store that hides the one events.Open made
// (no Unwrap) is refused when the UI is built, not with a panic on the
// first request.
func TestUIRefusesForeignStore(t *testing.T) {
	e := newEnv(t, ui.Config{})
	_, err := ui.New(ui.Config{Store: struct{ events.Store }{e.eng.Store()}, Client: e.cl})
	if err == nil || !strings.Contains(err.Error(), "Unwrap") {
		t.Fatalf("ui.New with a foreign store: %v, want an error naming Unwrap", err)
	}
}

// The runs list finds a chain's links (?chain=), each with its place,
// predecessor and continuation.
func TestUIChain(t *testing.T) {
	e := newEnv(t, ui.Config{})
	first := e.start(`
name: entity
nodes:
  - {id: step, type: transform, config: {set: {i: "state.i + 1"}}}
edges:
  - {from: START, to: step}
  - {from: step, to: CONTINUE, when: "state.i < 3"}
  - {from: step, to: END, when: "state.i >= 3"}
`, map[string]any{"i": 0})
	links := []string{}
	for run := first; run != ""; {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := e.cl.Wait(ctx, run)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, run)
		run = st.ContinuedAs
	}
	if len(links) != 3 {
		t.Fatalf("links %v, want 3", links)
	}
	e.waitIndexed(links[2], "completed")
	var chain struct {
		Runs []readmodel.Summary `json:"runs"`
	}
	e.get("/api/runs?chain="+first).decode(t, &chain)
	if len(chain.Runs) != 3 {
		t.Fatalf("chain=%s: %d runs, want 3", first, len(chain.Runs))
	}
	for _, s := range chain.Runs {
		i := slices.Index(links, s.RunID)
		if i < 0 || s.Chain != first || s.Link != i+1 || (i > 0 && s.Previous != links[i-1]) || (i < 2 && s.ContinuedAs != links[i+1]) {
			t.Errorf("summary %+v: want link %d of chain %s", s, i+1, first)
		}
	}
}

// TestUIEventsNameMapItems: a map item's events say which item, as the
// CLI's pages[2] does, for the timeline to label them.
func TestUIEventsNameMapItems(t *testing.T) {
	e := newEnv(t, ui.Config{})
	id := e.run(`
name: mapped
nodes:
  - id: pages
    type: transform
    map: {over: state.docs}
    config: {output: "local.item"}
edges:
  - {from: START, to: pages}
  - {from: pages, to: END}
`, map[string]any{"docs": []string{"a", "b", "c"}})
	var evs struct {
		Events []struct {
			Kind string `json:"kind"`
			Node string `json:"node"`
			Item *int   `json:"item"`
		} `json:"events"`
	}
	e.get("/api/runs/"+id+"/events").decode(t, &evs)
	items := map[int]bool{}
	for _, ev := range evs.Events {
		if ev.Node == "pages" && ev.Item != nil {
			items[*ev.Item] = true
		}
	}
	if len(items) != 3 || !items[0] || !items[1] || !items[2] {
		t.Errorf("items named by the events: %v, want 0, 1 and 2\n%+v", items, evs.Events)
	}
}

// TestUIWorkersShowLimits: the workers page lists the concurrency limits
// in use, as 'weft queues' does: a graph's run limit with its holder and
// the run waiting in line, and a node's rate limit with its state.
func TestUIWorkersShowLimits(t *testing.T) {
	e := newEnv(t, ui.Config{})
	const limited = `
name: onebyone
concurrency: {max: 1}
nodes:
  - {id: nap, type: sleep, config: {duration: 60s}, timeout: 120s, rate: {limit: 5, per: 1s}}
edges: [{from: START, to: nap}, {from: nap, to: END}]
`
	first := e.start(limited, nil)
	e.waitFor(first, "invoking", "nap")
	second := e.start(limited, nil)
	e.waitIndexed(second, "waiting")
	var w struct {
		Limits []struct {
			Limit, Key       string
			Max, Held        int
			Waiting          int
			Runs             bool
			OldestWaiter     *time.Time
			Holders, Waiters []string
		}
		Rates []struct {
			Limit   string
			Rate    int
			Waiting int
			Tokens  int
		}
		Note string
	}
	e.get("/api/workers").decode(t, &w)
	if len(w.Limits) != 1 {
		t.Fatalf("limits %+v (note %q), want the run limit", w.Limits, w.Note)
	}
	l := w.Limits[0]
	if l.Limit != "onebyone" || l.Max != 1 || l.Held != 1 || l.Waiting != 1 || !l.Runs || l.OldestWaiter == nil ||
		len(l.Holders) != 1 || !strings.HasPrefix(l.Holders[0], first+"/START/") || len(l.Waiters) != 1 || !strings.HasPrefix(l.Waiters[0], second+"/START/") {
		t.Errorf("run limit %+v, want %s holding and %s waiting", l, first, second)
	}
	if len(w.Rates) != 1 || w.Rates[0].Limit != "onebyone/nap" || w.Rates[0].Rate != 5 || w.Rates[0].Tokens < 4 {
		t.Errorf("rates %+v, want onebyone/nap at 5, with 4 or 5 tokens left (one taken, back in 200ms)", w.Rates)
	}
	for _, id := range []string{first, second} {
		if err := e.cl.Cancel(context.Background(), id, "done"); err != nil {
			t.Fatal(err)
		}
	}
}
