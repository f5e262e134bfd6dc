package ui_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/weft-dev/weft/internal/ui"
)

// TestUIStartAndReset: POST /api/runs starts a run of a pasted graph or of
// a run's graph, with its input; POST /api/runs/{id}/reset forks a run
// from before a node; bad input is refused with the field to blame, and
// nothing is started.
func TestUIStartAndReset(t *testing.T) {
	e := newEnv(t, ui.Config{})
	first := e.run(echoYAML, map[string]any{"name": "Ada"})

	var started struct {
		RunID string `json:"runId"`
	}
	r := e.post("/api/runs", `{"fromRun": "`+first+`", "input": {"name": "Grace"}}`)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &started) != nil || started.RunID == "" || started.RunID == first {
		t.Fatalf("start from a run: %d %s", r.status, r.body)
	}
	e.wait(started.RunID)
	r = e.post("/api/runs", `{"graph": `+jsonString(echoYAML)+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("start a pasted graph: %d %s", r.status, r.body)
	}

	for _, c := range []struct{ what, body, field string }{
		{"neither graph nor run", `{}`, "graph"},
		{"both", `{"graph": "x", "fromRun": "` + first + `"}`, "graph"},
		{"a graph that does not validate", `{"graph": "name: x\nnodes: [{id: a, type: ecko}]\nedges: [{from: START, to: a}, {from: a, to: END}]"}`, "graph"},
		{"an input that is not an object", `{"fromRun": "` + first + `", "input": [1]}`, "input"},
		{"a bad run id", `{"fromRun": "no good"}`, "fromRun"},
		{"an unknown field", `{"grpah": "x"}`, "body"},
	} {
		wantError(t, "start: "+c.what, e.post("/api/runs", c.body), http.StatusBadRequest, c.field)
	}
	wantError(t, "reset without a node", e.post("/api/runs/"+first+"/reset", `{}`), http.StatusBadRequest, "node")
	wantError(t, "reset to a node the graph lacks", e.post("/api/runs/"+first+"/reset", `{"node": "nope"}`), http.StatusBadRequest, "node")

	var reset struct {
		RunID string `json:"runId"`
	}
	r = e.post("/api/runs/"+first+"/reset", `{"node": "a"}`)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &reset) != nil || reset.RunID == "" {
		t.Fatalf("reset to a: %d %s", r.status, r.body)
	}
	st, err := e.cl.Get(t.Context(), reset.RunID)
	if err != nil || st.Fork == nil || st.Fork.RunID != first {
		t.Errorf("the reset's new run: %+v, %v; want a fork of %s", st, err, first)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
