package security

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/ui"
)

// TestBatchJobsAreTheAdmins: batch jobs (internal/batch's bucket
// weft-batches, made by 'weft roles -setup') are written by the admin
// only: the client and ui roles' writes are refused by the server, and
// they read jobs and progress ('weft batch list|describe', the UI). A UI
// connected as the ui role, not read-only, says its actions and batch
// actions are off and why (GET /api/config), and refuses a batch (403)
// without writing; one connected as the client may act, and not batch.
func TestBatchJobsAreTheAdmins(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin := s.connect(t, userAdmin)
	jobs, err := batch.Open(ctx, admin.js, 1, false) // made by the setup
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	j := &batch.Job{ID: "sec-1", Op: "cancel", Runs: []string{"r1"}, By: "admin", Created: time.Now().UTC()}
	if _, err := jobs.Create(ctx, j); err != nil {
		t.Fatalf("admin creating a job: %v", err)
	}
	if err := jobs.Record(ctx, j.ID, batch.Outcome{Run: "r1", Result: batch.Done, At: time.Now().UTC()}); err != nil {
		t.Fatalf("admin recording an outcome: %v", err)
	}

	for _, user := range []string{userClient, userUI} {
		c := s.connect(t, user)
		for _, subject := range []string{"$KV.weft-batches.job.forged", "$KV.weft-batches.out.sec-1.r1"} {
			if err := c.nc.Publish(subject, []byte(`{"result":"failed"}`)); err != nil {
				t.Fatal(err)
			}
			c.violation(t, "Publish", subject)
		}
		read, err := batch.Open(ctx, c.js, 1, false)
		if err != nil {
			t.Fatalf("%s opening the batches: %v", user, err)
		}
		list, err := read.List(ctx)
		if err != nil || len(list) != 1 || list[0].ID != "sec-1" {
			t.Errorf("%s listing jobs: %v, %v", user, list, err)
		}
		outs, err := read.Outcomes(ctx, "sec-1")
		if err != nil || outs["r1"].Result != batch.Done {
			t.Errorf("%s reading outcomes: %v, %v (a forged write got through?)", user, outs, err)
		}
	}

	// The UI as the ui role: actions and batch actions off, and said why;
	// as the client: actions on, batch actions off.
	srv := uiAs(t, s, userUI)
	cfg := uiRights(t, srv.URL)
	if cfg.Actions || !strings.Contains(cfg.ActionsWhy, "may not act on runs") || cfg.Batch || !strings.Contains(cfg.BatchWhy, "may not run batch jobs") {
		t.Errorf("the ui role's UI rights: %+v; want actions and batch jobs off, with why", cfg)
	}
	if cfg := uiRights(t, uiAs(t, s, userClient).URL); !cfg.Actions || cfg.Batch {
		t.Errorf("the client role's UI rights: %+v; want actions on, batch jobs off", cfg)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/batches", strings.NewReader(`{"operation":"cancel","runs":["r1"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ui.ActionHeader, "1")
	req.Header.Set("Origin", srv.URL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a batch through the ui role's UI: %d, want 403", resp.StatusCode)
	}
	// 'weft batch' with the client's credentials: refused, saying whose
	// credentials it takes.
	c := s.creds[userClient]
	var stdout, stderr bytes.Buffer
	cliCtx, cliCancel := context.WithTimeout(context.Background(), time.Minute)
	defer cliCancel()
	code := cli.Main(cliCtx, []string{"batch", "cancel", "r1", "-yes", "-id", "as-client", "-nats", s.url, "-user", c.User, "-password", c.Password}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "only the admin may") || strings.Contains(stdout.String()+stderr.String(), c.Password) {
		t.Errorf("weft batch as the client: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer lcancel()
	if list, err := jobs.List(lctx); err != nil || len(list) != 1 {
		t.Errorf("jobs after the refused batches: %d, %v; want the one", len(list), err)
	}
}

// uiAs serves the UI over a store connected as user.
func uiAs(t *testing.T, s *server, user string) *httptest.Server {
	t.Helper()
	h, err := ui.New(ui.Config{Store: openStore(t, s.connect(t, user)), NoConsumerList: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type uiRightsView struct {
	Actions    bool   `json:"actions"`
	ActionsWhy string `json:"actionsWhy"`
	Batch      bool   `json:"batch"`
	BatchWhy   string `json:"batchWhy"`
}

// uiRights reads the rights a UI reports (GET /api/config).
func uiRights(t *testing.T, url string) uiRightsView {
	t.Helper()
	resp, err := http.Get(url + "/api/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg struct {
		Rights uiRightsView `json:"rights"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Rights
}
