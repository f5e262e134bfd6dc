package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/pkg/projection"
)

// TestBatchOperations: cancel, terminate, signal and delete take several
// run ids or a query; a query's batch says what it would do (-dry-run),
// asks first (-yes does not), and reports run by run what was done,
// skipped and why, or failed; bad input is a usage error that says where.
func TestBatchOperations(t *testing.T) {
	url, cl := engine(t)
	a := startRun(t, cl, waits, nil)
	b := startRun(t, cl, waits, nil)
	c := startRun(t, cl, waits, nil)
	d := startRun(t, cl, waits, nil)
	done := startRun(t, cl, tagged, nil)
	for _, r := range []string{a, b, c, d} {
		waitListed(t, cl, r, projection.RunWaiting) // on their human node
	}
	waitListed(t, cl, done, projection.RunCompleted)

	// Several run ids.
	r := weft(t, "cancel", a, b, "-reason", "batch", "-nats", url)
	if r.code != 0 {
		t.Fatalf("cancel A B: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "cancel A B", r.stdout, "run "+a+": cancel requested", "run "+b+": cancel requested", "cancel: 2 done, 0 skipped, 0 failed")
	waitListed(t, cl, a, projection.RunCancelled)
	waitListed(t, cl, b, projection.RunCancelled)

	// A query: a dry run does nothing; without -yes, nothing is done.
	q := `graph = "waits" AND status = "waiting"`
	r = weft(t, "terminate", "-q", q, "-dry-run", "-nats", url)
	wantMatch(t, "terminate -q -dry-run", r.stdout, `(?m)^run `+c+` \(waiting\): would terminate$`, `(?m)^run `+d+` \(waiting\): would terminate$`,
		`dry run: 2 run\(s\) match, 2 would be terminated; nothing done`)
	if strings.Contains(r.stdout, a) {
		t.Errorf("dry run lists a cancelled run:\n%s", r.stdout)
	}
	r = weft(t, "terminate", "-q", q, "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, "Terminate 2 run(s)? [y/N]") || !strings.Contains(r.stderr, "not confirmed") {
		t.Errorf("terminate -q without -yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if s := waitListed(t, cl, c, projection.RunWaiting); s.Terminated {
		t.Errorf("unconfirmed batch terminated %s", c)
	}

	// Signal a query's runs: one of them; then terminate the rest.
	r = weft(t, "signal", "-q", `id = "`+d+`"`, "ask", "-data", `{"ok":true}`, "-yes", "-nats", url)
	wantContains(t, "signal -q", r.stdout, "run "+d+": signal sent to node ask", "signal: 1 done")
	waitListed(t, cl, d, projection.RunCompleted)
	r = weft(t, "terminate", "-q", `graph = "waits"`, "-yes", "-reason", "stuck", "-o", "json", "-nats", url)
	var rep struct {
		Runs []struct {
			RunID, Status, Result, Detail string
		} `json:"runs"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("terminate -q -yes -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if rep.Counts["done"] != 1 || rep.Counts["skipped"] != 3 {
		t.Errorf("terminate -q graph = waits: %+v, want 1 done (%s), 3 skipped (ended)", rep, c)
	}
	for _, row := range rep.Runs {
		if row.RunID == c && row.Result != "done" || row.RunID != c && (row.Result != "skipped" || !strings.Contains(row.Detail, "ended")) {
			t.Errorf("row %+v", row)
		}
	}
	waitListed(t, cl, c, projection.RunCancelled)

	// Counted by status (terminated as such) and by graph.
	r = weft(t, "list", "-count", "-by", "status", "-nats", url)
	wantMatch(t, "list -count -by status", r.stdout, `(?m)^STATUS +RUNS$`, `(?m)^cancelled +2$`, `(?m)^completed +2$`, `(?m)^terminated +1$`, `(?m)^total +5$`)
	r = weft(t, "list", "-count", "-by", "graph", "-q", `status != "completed"`, "-nats", url)
	wantMatch(t, "list -count -by graph -q", r.stdout, `(?m)^waits +3$`, `(?m)^total +3$`)
	if r := weft(t, "list", "-by", "status", "-nats", url); r.code != 2 {
		t.Errorf("-by without -count: exit %d, want 2", r.code)
	}

	// A run that ended is skipped, a run that does not exist fails the
	// command, and the report says which.
	r = weft(t, "cancel", a, "nosuchrun", "-nats", url)
	if r.code != 1 {
		t.Errorf("cancel A nosuchrun: exit %d, want 1", r.code)
	}
	wantContains(t, "cancel A nosuchrun", r.stdout, "run "+a+": skipped: ended (cancelled)", "run nosuchrun: failed: run nosuchrun not found", "1 skipped, 1 failed")

	// Delete: a query's ended runs; a running run is refused before any
	// question.
	running := startRun(t, cl, waits, nil)
	waitListed(t, cl, running, projection.RunWaiting)
	if r := weft(t, "delete", running, "-nats", url); r.code != 1 || strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stderr, "has not ended") {
		t.Errorf("delete of a running run: exit %d, %q; want a refusal and no question", r.code, r.stderr)
	}
	r = weft(t, "delete", "-q", `status = "terminated"`, "-dry-run", "-nats", url)
	wantContains(t, "delete -q -dry-run", r.stdout, "run "+c+" (terminated): would delete", "1 run(s) match, 1 would be deleted")
	r = weft(t, "delete", "-q", `graph = "waits"`, "-yes", "-nats", url)
	wantContains(t, "delete -q graph = waits", r.stdout, "run "+c+": deleted (", "run "+running+": skipped: has not ended", "delete: 4 done, 1 skipped, 0 failed")
	if _, err := cl.Get(context.Background(), c); err == nil {
		t.Errorf("run %s still there after the batch delete", c)
	}

	// Bad input: usage errors that say what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cancel"}, "want RUN... or -q QUERY"},
		{[]string{"cancel", a, "-q", `graph = "x"`}, "not both"},
		{[]string{"terminate", "-q", `graph = "waits" AND grph = "x"`}, "column 21: undeclared reference to 'grph'"},
		{[]string{"delete", "-q", `started > "last week"`}, `"last week" is not a time`},
		{[]string{"signal", "-q", `graph = "waits"`}, "want RUN... NODE | -q QUERY NODE, got 0"},
		{[]string{"cancel", "-q", "true", "-rate", "-1"}, "-rate"},
		{[]string{"cancel", "a.b"}, "not a run id"},
	} {
		r := weft(t, append(tc.args, "-nats", url)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
