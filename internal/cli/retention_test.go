package cli_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// waitListed waits until the read model shows run in status.
func waitListed(t *testing.T, cl *client.Client, run string, status projection.RunStatus) *client.RunSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		s, err := cl.Summary(ctx, run)
		if err == nil && s.Status == status {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s not listed as %s in time: %+v, %v", run, status, s, err)
		}
		// Polls: the read model's list notifies nobody.
		time.Sleep(10 * time.Millisecond)
	}
}

func startRun(t *testing.T, cl *client.Client, src string, input map[string]any) string {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run, err := cl.Start(context.Background(), g, client.WithInput(input))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

const tagged = `
name: tagged
searchAttributes: [customer]
retention: 0s
nodes:
  - {id: greet, type: echo}
edges:
  - {from: START, to: greet}
  - {from: greet, to: END}
`

const taggedFail = `
name: taggedfail
searchAttributes: [customer]
nodes:
  - {id: boom, type: fail, config: {retryable: false}}
edges:
  - {from: START, to: boom}
  - {from: boom, to: END}
`

const waits = `
name: waits
nodes:
  - {id: ask, type: human}
edges:
  - {from: START, to: ask}
  - {from: ask, to: END}
`

func TestListFilters(t *testing.T) {
	url, cl := engine(t)
	a := startRun(t, cl, tagged, map[string]any{"customer": "acme"})
	b := startRun(t, cl, tagged, map[string]any{"customer": "zeta"})
	f := startRun(t, cl, taggedFail, map[string]any{"customer": "acme"})
	waitListed(t, cl, a, projection.RunCompleted)
	waitListed(t, cl, b, projection.RunCompleted)
	waitListed(t, cl, f, projection.RunFailed)

	listed := func(args ...string) []string {
		t.Helper()
		r := weft(t, append([]string{"list", "-nats", url, "-o", "json"}, args...)...)
		var rows []client.RunSummary
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
			t.Fatalf("list %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		var ids []string
		for _, row := range rows {
			ids = append(ids, row.RunID)
		}
		return ids
	}
	if got := listed("-status", "failed"); len(got) != 1 || got[0] != f {
		t.Errorf("list -status failed = %v, want %s", got, f)
	}
	if got := listed("-attr", "customer=acme"); len(got) != 2 {
		t.Errorf("list -attr customer=acme = %v, want two runs", got)
	}
	if got := listed("-graph", "tagged", "-attr", "customer=zeta"); len(got) != 1 || got[0] != b {
		t.Errorf("list -graph tagged -attr customer=zeta = %v, want %s", got, b)
	}
	if got := listed("-since", "1h"); len(got) != 3 {
		t.Errorf("list -since 1h = %v, want all three", got)
	}
	if got := listed("-until", "1h"); len(got) != 0 {
		t.Errorf("list -until 1h = %v, want none", got)
	}
	if r := weft(t, "list", "-nats", url, "-count", "-status", "completed"); r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Errorf("list -count -status completed: exit %d, %q; want 2", r.code, r.stdout)
	}
	// Times for people: how long ago and how long; -absolute the dates.
	r := weft(t, "list", "-nats", url)
	wantMatch(t, "list", r.stdout, `(?m)^RUN +GRAPH +STATUS +STARTED +TOOK +ORIGIN +LINEAGE +WAITING ON$`, `(?m)^`+f+` +taggedfail +failed +\d\S* ago +\d\S*s +- +- +-$`)
	r = weft(t, "list", "-nats", url, "-absolute")
	wantMatch(t, "list -absolute", r.stdout, `(?m)^`+f+` +taggedfail +failed +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +`)
	r = weft(t, "list", "-nats", url, "-limit", "2")
	wantContains(t, "list -limit 2", r.stdout, "more: -cursor", "3 runs in all")
	cursor := strings.Fields(r.stdout[strings.Index(r.stdout, "-cursor"):])[1]
	if got := listed("-limit", "2", "-cursor", cursor); len(got) != 1 {
		t.Errorf("second page = %v, want the last run", got)
	}
	for _, bad := range [][]string{{"-since", "yesterday"}, {"-status", "lost"}, {"-attr", "novalue"}, {"-since", "1h", "-until", "2h"}} {
		if r := weft(t, append([]string{"list", "-nats", url}, bad...)...); r.code != 2 {
			t.Errorf("list %v: exit %d, want 2\n%s", bad, r.code, r.stderr)
		}
	}
}

func TestTerminateDeleteAndArchivedReads(t *testing.T) {
	url, cl := engine(t)
	run := startRun(t, cl, waits, nil)
	waitListed(t, cl, run, projection.RunWaiting)

	if r := weft(t, "delete", run, "-nats", url, "-yes"); r.code != 1 || !strings.Contains(r.stderr, "has not ended") {
		t.Errorf("delete of a running run: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "terminate", run, "-nats", url, "-reason", "stuck"); r.code != 0 {
		t.Fatalf("terminate: exit %d\n%s", r.code, r.stderr)
	}
	sum := waitListed(t, cl, run, projection.RunCancelled)
	st, err := cl.Get(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Terminated || st.Cancel == nil || !st.Cancel.Terminate || st.Cancel.Reason != "stuck" {
		t.Errorf("terminated run: summary %+v, cancel %+v; want both terminated", sum, st.Cancel)
	}
	// Terminated reads as terminated wherever a person reads the status.
	r := weft(t, "status", run, "-nats", url)
	wantMatch(t, "status of a terminated run", r.stdout, `(?m)^status +terminated$`, `(?m)^terminate +requested by .*: stuck$`)
	r = weft(t, "list", "-nats", url)
	wantMatch(t, "list with a terminated run", r.stdout, `(?m)^`+run+` +waits +terminated `)
	r = weft(t, "events", run, "-nats", url)
	wantContains(t, "events of a terminated run", r.stdout, "terminate by", "terminated by")
	if r := weft(t, "delete", run, "-nats", url); r.code != 1 || !strings.Contains(r.stderr, "not confirmed") {
		t.Errorf("delete without confirmation: exit %d, %s", r.code, r.stderr)
	}
	if _, err := cl.Get(context.Background(), run); err != nil {
		t.Fatalf("run gone after an unconfirmed delete: %v", err)
	}
	if r := weft(t, "delete", run, "-nats", url, "-yes", "-archive", "dir:/nonexistent/weft"); r.code != 1 || !strings.Contains(r.stderr, "dir:/nonexistent/weft") {
		t.Errorf("delete to a missing archive: exit %d, %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	if r := weft(t, "delete", run, "-nats", url, "-yes", "-archive", "dir:"+dir); r.code != 0 || !strings.Contains(r.stdout, "archived to directory") {
		t.Fatalf("delete -yes -archive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := weft(t, "events", run, "-nats", url); r.code != 1 {
		t.Errorf("events of a deleted run with no archive: exit %d, want 1", r.code)
	}
	if r := weft(t, "list", "-nats", url, "-count"); strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("list -count after delete: %q, want 0", r.stdout)
	}
	t.Setenv("WEFT_ARCHIVE", "dir:"+dir)
	r = weft(t, "events", run, "-nats", url)
	wantContains(t, "events of an archived run", r.stdout, "run.started", "run.cancelled")
	r = weft(t, "state", run, "-nats", url, "-o", "json")
	wantContains(t, "state of an archived run", r.stdout, `"status": "cancelled"`, `"terminate": true`)
	r = weft(t, "events", run, "-nats", url, "-o", "json")
	var rows []struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) < 2 {
		t.Fatalf("events -o json of an archived run: %v\n%s", err, r.stdout)
	}
	r = weft(t, "diff", run, strconv.FormatUint(rows[0].Seq, 10), strconv.FormatUint(rows[len(rows)-1].Seq, 10), "-nats", url)
	wantContains(t, "diff of an archived run", r.stdout, "/status", `"running"`, `"cancelled"`)
}

func TestAdminReindexAndRetention(t *testing.T) {
	url, cl := engine(t)
	run := startRun(t, cl, tagged, map[string]any{"customer": "acme"}) // retention 0s
	keep := startRun(t, cl, waits, nil)
	waitListed(t, cl, run, projection.RunCompleted)
	waitListed(t, cl, keep, projection.RunWaiting)

	r := weft(t, "admin", "reindex", "-nats", url)
	wantContains(t, "admin reindex", r.stdout, "reindexed 2 runs")
	if r := weft(t, "admin", "reindex", "-nats", url, "-retention", "-1h"); r.code != 2 || !strings.Contains(r.stderr, "retention") {
		t.Errorf("reindex -retention -1h: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "admin", "retention", "-nats", url); r.code != 1 || !strings.Contains(r.stderr, "weft-archive") {
		t.Errorf("retention with no archive bucket: exit %d, %s", r.code, r.stderr)
	}
	if got := waitListed(t, cl, run, projection.RunCompleted); got == nil {
		t.Fatal("run removed by a refused sweep")
	}
	r = weft(t, "admin", "retention", "-nats", url, "-create-archive")
	if r.code != 0 {
		t.Fatalf("admin retention: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "admin retention", r.stdout, "1 runs past their retention, 1 removed, 0 failed")
	// A payloads sweep after it: the live runs' objects are theirs, and
	// young; nothing is deleted.
	r = weft(t, "admin", "retention", "-nats", url, "-orphans", "-o", "json")
	var swept readmodel.SweepResult
	if err := json.Unmarshal([]byte(r.stdout), &swept); r.code != 0 || err != nil || swept.Payloads == nil || swept.Payloads.Deleted != 0 {
		t.Fatalf("admin retention -orphans: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	// The client reads the default archive bucket transparently.
	st, err := cl.Get(context.Background(), run)
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("archived run: %v, %v", st, err)
	}
	r = weft(t, "events", run, "-nats", url)
	wantContains(t, "events of an archived run", r.stdout, "run.started", "run.completed")
	if _, err := cl.Summary(context.Background(), keep); err != nil {
		t.Errorf("the running run's entry went: %v", err)
	}

	// Bad input that reaches the server: each names what is wrong, and
	// nothing changes.
	if r := weft(t, "delete", "nosuchrun", "-nats", url, "-yes"); r.code != 1 || !strings.Contains(r.stderr, "nosuchrun") {
		t.Errorf("delete of an unknown run: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "admin", "retention", "-nats", url, "-archive", "obj:nosuchbucket"); r.code != 1 || !strings.Contains(r.stderr, "nosuchbucket") {
		t.Errorf("retention to a missing bucket: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "admin", "restore", run, "-nats", url, "-archive", "dir:/nonexistent/weft"); r.code != 1 || !strings.Contains(r.stderr, "dir:/nonexistent/weft") {
		t.Errorf("restore from a missing directory: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "admin", "restore", "nosuchrun", "-nats", url); r.code != 1 || !strings.Contains(r.stderr, "nosuchrun") || !strings.Contains(r.stderr, "not archived") {
		t.Errorf("restore of an unknown run: exit %d, %s", r.code, r.stderr)
	}
	if r := weft(t, "admin", "restore", keep, "-nats", url); r.code != 1 || !strings.Contains(r.stderr, "is live") {
		t.Errorf("restore of a live run: exit %d, %s", r.code, r.stderr)
	}

	// Restore: the archived run is live again, in the log and the read model.
	restoredAt := time.Now()
	r = weft(t, "admin", "restore", run, "-nats", url)
	if r.code != 0 {
		t.Fatalf("admin restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "admin restore", r.stdout, "run "+run+" restored from object store bucket weft-archive", "completed")
	// Its retention (0s, from its graph) counts from the restore.
	if sum := waitListed(t, cl, run, projection.RunCompleted); sum.ExpiresAt.Before(restoredAt) {
		t.Errorf("restored run expires at %s, before its restore at %s", sum.ExpiresAt, restoredAt)
	}
	if r := weft(t, "admin", "restore", run, "-nats", url); r.code != 1 || !strings.Contains(r.stderr, "is live") {
		t.Errorf("second restore: exit %d, %s", r.code, r.stderr)
	}
	t.Setenv("WEFT_ARCHIVE", "none")
	r = weft(t, "events", run, "-nats", url)
	wantContains(t, "events of a restored run", r.stdout, "run.started", "run.completed")
}

func TestRetentionUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"negative every", []string{"admin", "retention", "-every", "-1s"}, "-every: must not be negative"},
		{"negative limit", []string{"admin", "retention", "-limit", "-1"}, "-limit: want 0 or more"},
		{"restore without run", []string{"admin", "restore"}, "want RUN..."},
		{"restore bad run id", []string{"admin", "restore", "a.b"}, `run id "a.b": not a run id`},
		{"restore negative retention", []string{"admin", "restore", "run1", "-retention", "-1h"}, "must not be negative"},
		{"restore no archive", []string{"admin", "restore", "run1", "-archive", "none"}, "-archive: want the archive"},
		{"delete bad run id", []string{"delete", "a>b", "-yes"}, `run id "a>b": not a run id`},
		{"reindex bad retention", []string{"admin", "reindex", "-retention", "soon"}, "want a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := weft(t, tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}
