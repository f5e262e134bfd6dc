package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

const echoYAML = `
name: tick
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

type scheduleJSON struct {
	Name      string      `json:"name"`
	Graph     string      `json:"graph"`
	Spec      string      `json:"spec"`
	Overlap   string      `json:"overlap"`
	Paused    bool        `json:"paused"`
	PauseNote string      `json:"pauseNote"`
	Next      []time.Time `json:"next"`
	Fires     []struct {
		Nominal time.Time `json:"nominal"`
		Outcome string    `json:"outcome"`
		RunID   string    `json:"runId"`
		Status  string    `json:"status"`
	} `json:"fires"`
}

// createSchedule creates schedule name, firing every hour (so that only
// the page's trigger fires it while the test runs).
func createSchedule(t *testing.T, cl *client.Client, name string) {
	t.Helper()
	g, err := graph.Parse([]byte(echoYAML), "tick.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.CreateSchedule(ctx, name, g, client.ScheduleOptions{Every: time.Hour, Note: "the page's"}); err != nil {
		t.Fatal(err)
	}
}

// TestUISchedules: the schedules page's API lists every schedule with its
// spec, next fire times and latest fires (with their runs' statuses), and
// whether it is paused and why; it pauses (a note required), unpauses and
// triggers one, and refuses bad names, unknown schedules, actions without
// the action header, and actions in read-only mode.
func TestUISchedules(t *testing.T) {
	e := newEnv(t, ui.Config{})
	createSchedule(t, e.cl, "nightly")

	var list struct{ Schedules []scheduleJSON }
	r := e.get("/api/schedules")
	r.decode(t, &list)
	if r.status != http.StatusOK || len(list.Schedules) != 1 {
		t.Fatalf("GET /api/schedules: %d %s", r.status, r.body)
	}
	s := list.Schedules[0]
	if s.Name != "nightly" || s.Graph != "tick" || s.Spec != "every 1h0m0s" || s.Overlap != "skip" || s.Paused || len(s.Next) != 5 || len(s.Fires) != 0 {
		t.Fatalf("the schedule: %+v", s)
	}
	if !s.Next[0].After(time.Now()) || !s.Next[1].Equal(s.Next[0].Add(time.Hour)) {
		t.Fatalf("next fires %v: want the next five hours", s.Next)
	}

	// Trigger: one run now, then shown among the fires with its status.
	r = e.post("/api/schedules/nightly/trigger", "")
	var trig struct{ RunID string }
	r.decode(t, &trig)
	if r.status != http.StatusOK || trig.RunID == "" {
		t.Fatalf("trigger: %d %s", r.status, r.body)
	}
	e.wait(trig.RunID)
	e.waitIndexed(trig.RunID, "completed")
	var one scheduleJSON
	r = e.get("/api/schedules/nightly")
	r.decode(t, &one)
	if len(one.Fires) != 1 || one.Fires[0].RunID != trig.RunID || one.Fires[0].Outcome != "triggered" || one.Fires[0].Status != "completed" {
		t.Fatalf("after the trigger: %s", r.body)
	}

	// Pause (a note required), then unpause.
	wantError(t, "pause without a note", e.post("/api/schedules/nightly/pause", `{}`), http.StatusBadRequest, "note")
	wantError(t, "pause with an unknown field", e.post("/api/schedules/nightly/pause", `{"note": "x", "why": 1}`), http.StatusBadRequest, "body")
	wantError(t, "pause without the action header", e.do(http.MethodPost, "/api/schedules/nightly/pause", `{"note": "x"}`, nil), http.StatusForbidden, ui.ActionHeader)
	r = e.post("/api/schedules/nightly/pause", `{"note": "maintenance until monday"}`)
	r.decode(t, &one)
	if r.status != http.StatusOK || !one.Paused || one.PauseNote != "maintenance until monday" {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	r = e.get("/api/schedules")
	r.decode(t, &list)
	if !list.Schedules[0].Paused || list.Schedules[0].PauseNote != "maintenance until monday" {
		t.Fatalf("the list after the pause: %s", r.body)
	}
	r = e.post("/api/schedules/nightly/unpause", "")
	r.decode(t, &one)
	if r.status != http.StatusOK || one.Paused {
		t.Fatalf("unpause: %d %s", r.status, r.body)
	}

	// Bad names, unknown schedules.
	wantError(t, "a bad name", e.get("/api/schedules/a.b"), http.StatusBadRequest, "name")
	wantError(t, "an unknown schedule", e.get("/api/schedules/nosuch"), http.StatusNotFound, "")
	wantError(t, "trigger an unknown schedule", e.post("/api/schedules/nosuch/trigger", ""), http.StatusNotFound, "")
	wantError(t, "pause an unknown schedule", e.post("/api/schedules/nosuch/pause", `{"note": "x"}`), http.StatusNotFound, "")

	// Read-only: every schedule action refused.
	ro := newEnv(t, ui.Config{ReadOnly: true})
	for _, action := range []string{"pause", "unpause", "trigger"} {
		wantError(t, "read-only "+action, ro.post("/api/schedules/nightly/"+action, `{"note": "x"}`), http.StatusForbidden, "")
	}
}

// TestUISchedulesUnderTheRoles: under Weft's roles (an embedded server
// that admits only the generated users), a UI connected as the ui role
// lists the schedules with their fires and runs' statuses, and its
// actions are refused by NATS (the ui role writes nothing), saying which
// role they need; one connected as the trigger role pauses and triggers.
func TestUISchedulesUnderTheRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rolesDir := filepath.Join(dir, "roles")
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := weft.Start(ctx, weft.Embedded(filepath.Join(dir, "js")), weft.WithRoles(rolesDir), weft.WithLogger(log), weft.WithQueues(worker.DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	creds, err := natsconn.ReadCredentials(rolesDir, natsconn.Deployment{Queues: []string{worker.DefaultQueue}})
	if err != nil {
		t.Fatal(err)
	}
	// serveAs serves the UI over a connection of role r.
	serveAs := func(r natsconn.Role) (*env, *client.Client) {
		t.Helper()
		name := natsconn.UserName(r, "")
		var cfg natsconn.Config
		for _, c := range creds {
			if c.User.Name == name {
				cfg = natsconn.Config{URL: eng.URL(), User: name, Password: c.Password, Name: "ui-test-" + string(r)}
			}
		}
		if cfg.User == "" {
			t.Fatalf("no credentials of %s", name)
		}
		nc, err := nats.Connect(eng.URL(), append(cfg.Options(), nats.CustomInboxPrefix(natsconn.InboxPrefixFor(name)))...)
		if err != nil {
			t.Fatalf("connecting as %s: %v", name, err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := events.Open(ctx, js)
		if err != nil {
			t.Fatalf("opening the store as %s: %v", name, err)
		}
		cl := client.New(st)
		h, err := ui.New(ui.Config{Store: st, Client: cl, Log: log, NoConsumerList: true})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		return &env{t: t, eng: eng, cl: eng.Client(), url: hs.URL}, cl
	}
	asTrigger, mgr := serveAs(natsconn.RoleTrigger)
	createSchedule(t, mgr, "nightly")
	r := asTrigger.post("/api/schedules/nightly/trigger", "")
	var trig struct{ RunID string }
	r.decode(t, &trig)
	if r.status != http.StatusOK || trig.RunID == "" {
		t.Fatalf("trigger as the trigger role: %d %s", r.status, r.body)
	}
	if _, err := eng.Client().Wait(ctx, trig.RunID); err != nil {
		t.Fatal(err)
	}

	asUI, _ := serveAs(natsconn.RoleUI)
	for {
		var one scheduleJSON
		r := asUI.get("/api/schedules/nightly")
		if r.status != http.StatusOK {
			t.Fatalf("GET a schedule as the ui role: %d %s", r.status, r.body)
		}
		r.decode(t, &one)
		if len(one.Fires) == 1 && one.Fires[0].RunID == trig.RunID && one.Fires[0].Status == "completed" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the trigger's run never shown completed to the ui role: %s", r.body)
		}
		time.Sleep(100 * time.Millisecond) // the read model follows the log
	}
	var list struct{ Schedules []scheduleJSON }
	if r := asUI.get("/api/schedules"); r.status != http.StatusOK {
		t.Fatalf("GET /api/schedules as the ui role: %d %s", r.status, r.body)
	} else if r.decode(t, &list); len(list.Schedules) != 1 || len(list.Schedules[0].Next) != 5 {
		t.Fatalf("GET /api/schedules as the ui role: %s", r.body)
	}
	// The ui role may not write the schedules bucket: no answer from
	// NATS, and the error says which role acts.
	r = asUI.post("/api/schedules/nightly/pause", `{"note": "from the ui role"}`)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "trigger role") {
		t.Fatalf("pause as the ui role: %d %s, want 503 naming the trigger role", r.status, r.body)
	}
	var one scheduleJSON
	asUI.get("/api/schedules/nightly").decode(t, &one)
	if one.Paused {
		t.Fatal("the ui role paused the schedule")
	}
	// The trigger role pauses it.
	r = asTrigger.post("/api/schedules/nightly/pause", `{"note": "from the trigger role"}`)
	r.decode(t, &one)
	if r.status != http.StatusOK || !one.Paused {
		t.Fatalf("pause as the trigger role: %d %s", r.status, r.body)
	}
}
