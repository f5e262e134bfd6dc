package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestUILiveRunEvents: a run's live stream sends the events already
// stored, then each new one as it is appended (no polling: the signal is
// sent after the stream caught up), and ends with "end" after the run's
// terminal event.
func TestUILiveRunEvents(t *testing.T) {
	e := newEnv(t, ui.Config{})
	id := e.start(approvalYAML, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.open(ctx, "/api/live/runs/"+id)
	pos := 0
	read := func(until func(event) bool) {
		t.Helper()
		for {
			ev, ok := s.next()
			if !ok {
				t.Fatalf("stream ended after position %d", pos)
			}
			if ev.name != "event" {
				t.Fatalf("got %s %s, want events", ev.name, ev.data)
			}
			var got event
			if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
				t.Fatal(err)
			}
			if got.Position != pos+1 || ev.id != strconv.Itoa(got.Position) {
				t.Fatalf("event at position %d (id %q) after %d", got.Position, ev.id, pos)
			}
			pos = got.Position
			if until(got) {
				return
			}
		}
	}
	read(func(ev event) bool { return ev.Kind == "node.waiting" && ev.Node == "approve" })
	if r := e.post("/api/runs/"+id+"/signal", `{"node":"approve","data":{"approved":true}}`); r.status != http.StatusOK {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	read(func(ev event) bool { return ev.Kind == "signal.received" })
	read(func(ev event) bool { return ev.Kind == "run.completed" })
	if ev, ok := s.next(); !ok || ev.name != "end" {
		t.Fatalf("after run.completed: %+v (open %v), want end", ev, ok)
	}
	if ev, ok := s.next(); ok {
		t.Fatalf("after end: %+v, want the stream closed", ev)
	}

	// From a position: only what comes after it, then end at once for
	// an ended run.
	s = e.open(ctx, "/api/live/runs/"+id+"?from="+strconv.Itoa(pos-1))
	if ev, ok := s.next(); !ok || ev.name != "event" {
		t.Fatalf("from %d: %+v", pos-1, ev)
	} else {
		var got event
		_ = json.Unmarshal([]byte(ev.data), &got)
		if got.Position != pos || got.Kind != "run.completed" {
			t.Errorf("from %d: first event %d %s, want %d run.completed", pos-1, got.Position, got.Kind, pos)
		}
	}
	if ev, ok := s.next(); !ok || ev.name != "end" {
		t.Fatalf("from %d: %+v, want end", pos-1, ev)
	}

	// A browser reconnecting says the last event it had.
	s = e.openWith(ctx, "/api/live/runs/"+id, http.Header{"Last-Event-Id": {strconv.Itoa(pos - 2)}})
	if ev, ok := s.next(); !ok || ev.id != strconv.Itoa(pos-1) {
		t.Fatalf("Last-Event-ID %d: first event %+v, want position %d", pos-2, ev, pos-1)
	}
	wantError(t, "bad Last-Event-ID", e.do(http.MethodGet, "/api/live/runs/"+id, "", http.Header{"Last-Event-Id": {"x"}}), http.StatusBadRequest, "Last-Event-ID")
}

// TestUILiveRunStartsAtOnce: a stream opened from the last event a
// page has, on a run that waits, begins (its headers sent) at once, not
// with the run's next event: the page shows it is live.
func TestUILiveRunStartsAtOnce(t *testing.T) {
	e := newEnv(t, ui.Config{Ping: time.Hour})
	id := e.start(approvalYAML, nil)
	e.waitFor(id, "waiting", "approve")
	var detail struct{ Events int }
	if err := json.Unmarshal(e.get("/api/runs/"+id).body, &detail); err != nil || detail.Events == 0 {
		t.Fatalf("run detail: %v, %d events", err, detail.Events)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// open fails the test if the headers do not come before ctx ends.
	s := e.open(ctx, "/api/live/runs/"+id+"?from="+strconv.Itoa(detail.Events))
	if r := e.post("/api/runs/"+id+"/signal", `{"node":"approve","data":{"approved":true}}`); r.status != http.StatusOK {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	ev, ok := s.next()
	if !ok || ev.id != strconv.Itoa(detail.Events+1) {
		t.Fatalf("first event after %d: %+v (open %v)", detail.Events, ev, ok)
	}
}

// TestUILiveRuns: the run list's live stream sends a run's summary when
// it starts and when it ends.
func TestUILiveRuns(t *testing.T) {
	e := newEnv(t, ui.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.liveRuns(ctx)
	id := e.start(approvalYAML, nil)
	seen := func(status string) {
		t.Helper()
		for {
			ev, ok := s.next()
			if !ok {
				t.Fatalf("stream ended before run %s was %s", id, status)
			}
			var sum struct{ RunID, Status, Graph string }
			if ev.name == "run" && json.Unmarshal([]byte(ev.data), &sum) == nil && sum.RunID == id && sum.Status == status {
				if sum.Graph != "approval" {
					t.Errorf("summary of %s: graph %q", id, sum.Graph)
				}
				return
			}
		}
	}
	seen("waiting") // its one node waits on a person from the start
	e.waitFor(id, "waiting", "approve")
	if r := e.post("/api/runs/"+id+"/signal", `{"node":"approve","data":{"approved":false}}`); r.status != http.StatusOK {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	seen("completed")
}

// TestUILivePing: an idle stream gets a keep-alive comment.
func TestUILivePing(t *testing.T) {
	e := newEnv(t, ui.Config{Ping: 20 * time.Millisecond})
	id := e.start(approvalYAML, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, path := range []string{"/api/live/runs", "/api/live/runs/" + id} {
		s := e.open(ctx, path)
		for {
			ev, ok := s.next()
			if !ok {
				t.Fatalf("%s: ended without a ping", path)
			}
			if ev.name == "comment" {
				if ev.data != ": ping" {
					t.Errorf("%s: comment %q", path, ev.data)
				}
				break
			}
		}
	}
}

// TestUILiveStopsWithClient: the server's goroutines of a live stream
// (its ordered consumer, its KV watch, its pinger) end when the client
// goes away.
func TestUILiveStopsWithClient(t *testing.T) {
	e := newEnv(t, ui.Config{Ping: 10 * time.Millisecond})
	id := e.start(approvalYAML, nil)
	e.waitFor(id, "waiting", "approve")
	e.get("/api/runs/" + id) // connections and pools warmed up
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		run := e.open(ctx, "/api/live/runs/"+id)
		list := e.liveRuns(ctx)
		if ev, ok := run.next(); !ok || ev.name != "event" {
			t.Fatalf("first event: %+v", ev)
		}
		for ev, ok := list.next(); ok && ev.name != "comment"; ev, ok = list.next() {
		}
		cancel()
		for range run.events {
		}
		for range list.events {
		}
	}
	http.DefaultClient.CloseIdleConnections()
	// The embedded NATS server keeps an ordered consumer whose client
	// stopped until its inactive threshold passes: its goroutines are the
	// server's, not this process's client side.
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*consumer).processInboundNextMsgReqs"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*consumer).loopAndGatherMsgs"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*consumer).processInboundAcks"))
}

// TestUIArchivedRun: a run removed from the live log to the archive is
// read from the archive: its detail, its timeline, and a live stream that
// sends its events and ends.
func TestUIArchivedRun(t *testing.T) {
	e := newEnv(t, ui.Config{})
	id := e.run(fanJoinYAML, nil)
	var live runDetail
	e.get("/api/runs/"+id).decode(t, &live)
	dir, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := readmodel.Remove(ctx, e.eng.Store(), id, dir); err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Config{Store: e.eng.Store(), Client: client.New(e.eng.Store(), client.WithArchive(dir))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	wantError(t, "removed run without the archive", e.get("/api/runs/"+id), http.StatusNotFound, "")
	a := &env{t: t, eng: e.eng, cl: e.cl, url: hs.URL}
	var d runDetail
	a.get("/api/runs/"+id).decode(t, &d)
	if d.State.Status != projection.RunCompleted || d.Events != live.Events {
		t.Errorf("archived run: %s with %d events, want completed with %d", d.State.Status, d.Events, live.Events)
	}
	s := a.open(ctx, "/api/live/runs/"+id+"?from=2")
	n := 0
	for {
		ev, ok := s.next()
		if !ok {
			t.Fatal("the stream ended without end")
		}
		if ev.name == "end" {
			break
		}
		n++
	}
	if n != live.Events-2 {
		t.Errorf("archived run's stream from 2: %d events, want %d", n, live.Events-2)
	}
}
