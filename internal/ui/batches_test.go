package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/projection"
)

// batchView is GET /api/batches/{id}'s answer, as far as the tests read it.
type batchView struct {
	Job struct {
		Op   string            `json:"operation"`
		Args map[string]string `json:"args"`
	} `json:"job"`
	State    string `json:"state"`
	Outcomes []struct {
		Run    string `json:"run"`
		Result string `json:"result"`
		Detail string `json:"detail"`
	} `json:"outcomes"`
}

// batch starts a batch job with body and waits until it has an outcome
// for each of its n runs; it returns the job and each run's outcome.
func (e *env) batch(body string, n int) (batchView, map[string]string) {
	e.t.Helper()
	r := e.post("/api/batches", body)
	var started struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusAccepted {
		e.t.Fatalf("POST /api/batches %s: %d %s", body, r.status, r.body)
	}
	r.decode(e.t, &started)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var b batchView
		e.get("/api/batches/"+started.ID).decode(e.t, &b)
		if b.State != "running" || len(b.Outcomes) == n {
			outs := map[string]string{}
			for _, o := range b.Outcomes {
				outs[o.Run] = o.Result + ": " + o.Detail
			}
			return b, outs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("batch job %s: not finished after a minute: %+v", started.ID, b)
		}
		// Waits for the job's next outcomes (it runs on the server, at 50 runs a second).
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIBatchSignal: POST /api/batches signals the selected runs' node
// with the JSON data, as one durable job: a waiting run gets the data
// and goes on, an ended run is skipped, and a node the run does not wait
// on is a failure the job reports for that run. Bad input (no node, data
// not JSON, data or node for an operation that takes none) is refused
// with the field to blame, and no job is made.
func TestUIBatchSignal(t *testing.T) {
	e := newEnv(t, ui.Config{})
	a, b := e.start(approvalYAML, nil), e.start(approvalYAML, nil)
	ended := e.run(echoYAML, map[string]any{"name": "Ada"})
	e.waitFor(a, "waiting", "approve")
	e.waitFor(b, "waiting", "approve")

	for _, c := range []struct{ what, body, field string }{
		{"signal without a node", `{"operation": "signal", "runs": ["` + a + `"]}`, "node"},
		{"signal with data that is not JSON", `{"operation": "signal", "runs": ["` + a + `"], "node": "approve", "data": "{\"approved\": tru"}`, "data"},
		{"signal to a node id that cannot be", `{"operation": "signal", "runs": ["` + a + `"], "node": "no good"}`, "node"},
		{"cancel with a node", `{"operation": "cancel", "runs": ["` + a + `"], "node": "approve"}`, "node"},
		{"reset with data", `{"operation": "reset", "runs": ["` + a + `"], "node": "approve", "data": "{}"}`, "data"},
		{"an operation the UI does not offer", `{"operation": "resume", "runs": ["` + a + `"]}`, "operation"},
	} {
		wantError(t, c.what, e.post("/api/batches", c.body), http.StatusBadRequest, c.field)
	}

	job, outs := e.batch(`{"operation": "signal", "runs": ["`+a+`", "`+ended+`"], "node": "approve", "data": "{\"approved\": true,\n \"by\": \"ui\"}"}`, 2)
	if job.Job.Op != "signal" || job.Job.Args["node"] != "approve" || job.Job.Args["data"] != `{"approved":true,"by":"ui"}` {
		t.Errorf("the signal job: %+v", job.Job)
	}
	if !strings.HasPrefix(outs[a], "done") || !strings.HasPrefix(outs[ended], "skipped") {
		t.Errorf("signal outcomes: %v; want %s done, %s skipped", outs, a, ended)
	}
	e.wait(a)
	st, err := e.cl.Get(t.Context(), a)
	if err != nil || st.Status != projection.RunCompleted || st.Nodes["publish"] == nil {
		t.Errorf("the signalled run: %+v, %v; want it completed through publish", st, err)
	}

	_, outs = e.batch(`{"operation": "signal", "runs": ["`+b+`"], "node": "nope", "data": "true"}`, 1)
	if !strings.HasPrefix(outs[b], "failed: ") || !strings.Contains(outs[b], `"nope"`) {
		t.Errorf("signal to a node the run lacks: %v; want a failure naming the node", outs)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if st, err := e.cl.Get(ctx, b); err != nil || st.Status != projection.RunRunning {
		t.Errorf("the run signalled on a node it lacks: %+v, %v; want it still running", st, err)
	}
}

// TestUIBatchReset: POST /api/batches resets each selected run to a node
// as one durable job: each run is forked from before the node and
// cancelled, the job saying the new run; a node the run's graph lacks is
// reported for that run, and nothing is forked.
func TestUIBatchReset(t *testing.T) {
	e := newEnv(t, ui.Config{})
	a := e.run(echoYAML, map[string]any{"name": "Ada"})
	b := e.run(echoYAML, map[string]any{"name": "Grace"})
	wantError(t, "reset without a node", e.post("/api/batches", `{"operation": "reset", "runs": ["`+a+`"]}`), http.StatusBadRequest, "node")

	job, outs := e.batch(`{"operation": "reset", "runs": ["`+a+`", "`+b+`"], "node": "a"}`, 2)
	if job.Job.Op != "reset" || job.Job.Args["node"] != "a" {
		t.Errorf("the reset job: %+v", job.Job)
	}
	for _, run := range []string{a, b} {
		o := outs[run]
		if !strings.HasPrefix(o, "done: (new run ") {
			t.Fatalf("reset of %s: %q; want done, with the new run", run, o)
		}
		fork := strings.TrimSuffix(strings.TrimPrefix(o, "done: (new run "), ")")
		st, err := e.cl.Get(t.Context(), fork)
		if err != nil || st.Fork == nil || st.Fork.RunID != run {
			t.Errorf("reset of %s: its new run %s: %+v, %v; want a fork of %s", run, fork, st, err, run)
		}
	}

	_, outs = e.batch(`{"operation": "reset", "runs": ["`+a+`"], "node": "nope"}`, 1)
	if o := outs[a]; !strings.HasPrefix(o, "skipped: ") || !strings.Contains(o, "nope") {
		t.Errorf("reset to a node the graph lacks: %q; want the run reported, naming the node", o)
	}
}

// TestUIBatchReadOnly: a read-only UI reports no batch right, and says
// why, in /api/config, and refuses signal and reset batches with 403 and
// that reason.
func TestUIBatchReadOnly(t *testing.T) {
	e := newEnv(t, ui.Config{ReadOnly: true})
	var cfg struct {
		Rights struct {
			Batch    bool   `json:"batch"`
			BatchWhy string `json:"batchWhy"`
		} `json:"rights"`
	}
	e.get("/api/config").decode(t, &cfg)
	if cfg.Rights.Batch || cfg.Rights.BatchWhy != "the UI is read-only" {
		t.Errorf("/api/config's rights: %+v; want no batch right, because read-only", cfg.Rights)
	}
	for _, body := range []string{
		`{"operation": "signal", "runs": ["r1"], "node": "approve", "data": "{}"}`,
		`{"operation": "reset", "runs": ["r1"], "node": "approve"}`,
	} {
		r := e.post("/api/batches", body)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "read-only") {
			t.Errorf("POST /api/batches %s, read-only: %d %s; want 403 saying read-only", body, r.status, r.body)
		}
	}
}
