package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
)

// The graphs the tests run: a fan-out with a join, a human node, a node
// that fails twice and then succeeds, and one that always fails.
const (
	fanJoinYAML = `
name: fanjoin
nodes:
  - {id: split, type: echo}
  - {id: left, type: transform, config: {set: {left: "1"}}}
  - {id: right, type: transform, config: {set: {right: "2"}}}
  - {id: join, type: echo}
edges:
  - {from: START, to: split}
  - {from: split, to: left}
  - {from: split, to: right}
  - {from: left, to: join}
  - {from: right, to: join}
  - {from: join, to: END}
`
	approvalYAML = `
name: approval
nodes:
  - {id: approve, type: human}
  - {id: publish, type: transform, config: {set: {published: "true"}}}
edges:
  - {from: START, to: approve}
  - {from: approve, to: publish, when: "output.approved == true"}
  - {from: approve, to: END, when: "output.approved != true"}
  - {from: publish, to: END}
`
	flakyYAML = `
name: flaky
nodes:
  - id: flaky
    type: fail
    config: {failAttempts: 2, message: "boom"}
    retry: {maxAttempts: 3, initialInterval: 10ms, jitter: 0}
edges:
  - {from: START, to: flaky}
  - {from: flaky, to: END}
`
	brokenYAML = `
name: broken
nodes:
  - id: always
    type: fail
    config: {message: "always fails"}
    retry: {maxAttempts: 2, initialInterval: 10ms, jitter: 0}
edges:
  - {from: START, to: always}
  - {from: always, to: END}
`
)

// env is an engine on a real embedded JetStream and a UI server over it.
type env struct {
	t   *testing.T
	eng *weft.Engine
	cl  *client.Client
	url string
}

// newEnv starts an engine and serves the UI over its store with cfg
// (Store and Client are set).
func newEnv(t *testing.T, cfg ui.Config) *env {
	t.Helper()
	srv := testkit.Server(t)
	nc, _ := testkit.Connect(t, srv)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := weft.Start(ctx, weft.WithNATS(nc), weft.WithLogger(log), weft.WithName("ui-test-worker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	cfg.Store, cfg.Client, cfg.Log = eng.Store(), eng.Client(), log
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &env{t: t, eng: eng, cl: eng.Client(), url: hs.URL}
}

// start starts a run of the graph in yaml and returns its id.
func (e *env) start(yaml string, input any) string {
	e.t.Helper()
	g, err := graph.Parse([]byte(yaml), "test.yaml", graph.AllowAnyType())
	if err != nil {
		e.t.Fatal(err)
	}
	var opts []client.StartOption
	if input != nil {
		opts = append(opts, client.WithInput(input))
	}
	id, err := e.cl.Start(context.Background(), g, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// run starts a run and waits for it to end.
func (e *env) run(yaml string, input any) string {
	e.t.Helper()
	id := e.start(yaml, input)
	e.wait(id)
	return id
}

func (e *env) wait(id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.cl.Wait(ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

// waitIndexed waits until the read model has the run in status.
func (e *env) waitIndexed(id, status string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := e.liveRuns(ctx)
	if s, err := e.cl.Summary(ctx, id); err == nil && string(s.Status) == status {
		return
	}
	for {
		ev, ok := ls.next()
		if !ok {
			e.t.Fatalf("run %s never indexed as %s", id, status)
		}
		var sum struct{ RunID, Status string }
		if ev.name == "run" && json.Unmarshal([]byte(ev.data), &sum) == nil && sum.RunID == id && sum.Status == status {
			return
		}
	}
}

// waitFor follows a run until an event of kind for node is stored.
func (e *env) waitFor(id, kind, node string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found := false
	_ = e.cl.Follow(ctx, id, func(ev client.RunEvent, _ *projection.State) bool {
		if strings.Contains(string(ev.Type), "."+kind+".") && (ev.NodeID == node || nodeOfData(ev.Data) == node) {
			found = true
			return false
		}
		return true
	})
	if !found {
		e.t.Fatalf("run %s: no %s event for node %s", id, kind, node)
	}
}

func nodeOfData(b json.RawMessage) string {
	var v struct{ Node string }
	_ = json.Unmarshal(b, &v)
	return v.Node
}

// response is an answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// apiErr is an error answer's body.
type apiErr struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

func (e *env) get(path string) response {
	e.t.Helper()
	return e.do(http.MethodGet, path, "", nil)
}

// post sends an action, with the action header.
func (e *env) post(path, body string) response {
	e.t.Helper()
	return e.do(http.MethodPost, path, body, http.Header{ui.ActionHeader: {"1"}})
}

func (e *env) do(method, path, body string, h http.Header) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// wantError checks an error answer's status and blamed field.
func wantError(t *testing.T, what string, r response, status int, field string) {
	t.Helper()
	var e apiErr
	if r.status != status || json.Unmarshal(r.body, &e) != nil || e.Error == "" || e.Field != field {
		t.Errorf("%s: got %d %s, want %d with an error naming field %q", what, r.status, r.body, status, field)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, name, data string }

// sseStream reads a live stream's events.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
}

// open opens a live stream; it is closed when ctx ends.
func (e *env) open(ctx context.Context, path string) *sseStream {
	e.t.Helper()
	return e.openWith(ctx, path, nil)
}

// openWith opens a live stream with request headers h.
func (e *env) openWith(ctx context.Context, path string, h http.Header) *sseStream {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: e.t, resp: resp, events: make(chan sseEvent, 1024)}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{name: "comment", data: line}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s
}

func (e *env) liveRuns(ctx context.Context) *sseStream { return e.open(ctx, "/api/live/runs") }

// next returns the next event, false when the stream ended.
func (s *sseStream) next() (sseEvent, bool) {
	select {
	case ev, ok := <-s.events:
		return ev, ok
	case <-time.After(30 * time.Second):
		s.t.Fatal("no server-sent event in 30s")
	}
	return sseEvent{}, false
}
