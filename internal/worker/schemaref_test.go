package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// TestSchemaRefsNotLoaded: a node schema's $ref to a file or a URL is not
// loaded, and the failure holds nothing of the file; with a loader the
// worker decides.
func TestSchemaRefsNotLoaded(t *testing.T) {
	const content = "TOP-SECRET-LINE"
	file := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(file, []byte(`{"type":"string","description":"`+content+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string","description":"` + content + `"}`))
	}))
	t.Cleanup(srv.Close)

	st := testStore(t)
	startWorker(t, st, map[string]worker.Node{
		"echo": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			return &worker.Result{}, nil
		}),
	})
	for _, ref := range []string{"file://" + file, "file:///etc/passwd", srv.URL + "/s.json"} {
		schema := json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"` + ref + `"}}}`)
		run := publishReady(t, st, "echo", withInput(map[string]any{"x": 1}), func(d *events.NodeReadyData) { d.InputSchema = schema })
		evs := waitOutcome(t, st, run, events.NodeFailed)
		f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error
		all, _ := json.Marshal(f)
		if f.Type != events.FailureValidation || f.Retryable || !strings.Contains(f.Message, "may not load") {
			t.Errorf("%s: failure = %s", ref, all)
		}
		if strings.Contains(string(all), content) || strings.Contains(string(all), "root:") {
			t.Errorf("%s: the failure leaks the document: %s", ref, all)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the schema server got %d requests", n)
	}

	// A worker with a loader loads what its loader allows.
	st2 := testStore(t)
	startWorker(t, st2, map[string]worker.Node{
		"echo": worker.NodeFunc(func(ctx context.Context, in *worker.Input) (*worker.Result, error) {
			return &worker.Result{}, nil
		}),
	}, worker.WithSchemaLoader(func(url string) (json.RawMessage, error) {
		if url == "https://schemas.example/int.json" {
			return json.RawMessage(`{"type":"integer"}`), nil
		}
		return nil, errors.New("not allowed")
	}))
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://schemas.example/int.json"}}}`)
	run := publishReady(t, st2, "echo", withInput(map[string]any{"x": "one"}), func(d *events.NodeReadyData) { d.InputSchema = schema })
	evs := waitOutcome(t, st2, run, events.NodeFailed)
	if f := ofType[*events.NodeFailedData](t, evs, events.NodeFailed)[0].Error; !strings.Contains(f.Message, "/x") {
		t.Errorf("loaded schema not applied: %+v", f)
	}
}
