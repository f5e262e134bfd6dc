package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// cancelRequests counts the cancel requests in run's log.
func cancelRequests(t *testing.T, cl *client.Client, run string) int {
	t.Helper()
	evs, err := cl.History(context.Background(), run)
	if err != nil {
		t.Fatalf("history of %s: %v", run, err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == events.RunCancelRequested {
			n++
		}
	}
	return n
}

// TestBatchJobQuery: 'weft batch cancel -q' says what it would do
// (-dry-run, no job made), then runs as a durable job whose progress
// 'weft batch list' and 'describe' read; the same command again with the
// job's id finds it finished and applies nothing a second time.
func TestBatchJobQuery(t *testing.T) {
	url, cl := engine(t)
	var runs []string
	for range 3 {
		runs = append(runs, startRun(t, cl, waits, nil))
	}
	done := startRun(t, cl, tagged, nil)
	for _, r := range runs {
		waitListed(t, cl, r, projection.RunWaiting)
	}
	waitListed(t, cl, done, projection.RunCompleted)

	q := `graph = "waits" AND status = "waiting"`
	r := weft(t, "batch", "cancel", "-q", q, "-dry-run", "-nats", url)
	wantContains(t, "batch cancel -dry-run", r.stdout, "run "+runs[0]+" (waiting): would cancel", "dry run: 3 run(s) match, 3 would be cancelled; nothing done")
	r = weft(t, "batch", "list", "-nats", url)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "no batch jobs" {
		t.Errorf("batch list after a dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "batch", "cancel", "-q", q, "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, "Cancel 3 run(s)? [y/N]") {
		t.Errorf("batch cancel -q without -yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = weft(t, "batch", "cancel", "-q", q, "-yes", "-id", "tidy-1", "-reason", "tidy", "-nats", url)
	if r.code != 0 {
		t.Fatalf("batch cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "batch cancel", r.stdout, "batch job tidy-1: cancel of 3 run(s)", "run "+runs[1]+": cancel requested", "cancel: 3 done, 0 skipped, 0 failed")
	for _, run := range runs {
		waitListed(t, cl, run, projection.RunCancelled)
	}

	r = weft(t, "batch", "list", "-nats", url)
	wantMatch(t, "batch list", r.stdout, `(?m)^JOB +OPERATION +STATE +RUNS +DONE +SKIPPED +FAILED +LEFT +STARTED +BY$`,
		`(?m)^tidy-1 +cancel +finished +3 +3 +0 +0 +0 +\S+ ago +\S+$`)
	r = weft(t, "batch", "describe", "tidy-1", "-nats", url)
	wantMatch(t, "batch describe", r.stdout, `(?m)^operation: +cancel -reason tidy$`, `(?m)^query: +graph = "waits" AND status = "waiting"$`,
		`(?m)^state: +finished `, `(?m)^runs: +3: 3 done, 0 skipped, 0 failed, 0 not reached$`, `(?m)^`+runs[2]+` +done +\S+ +-$`)

	// Again, by the job's id: it is found finished, and nothing is sent.
	r = weft(t, "batch", "cancel", "-q", q, "-yes", "-id", "tidy-1", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stderr, "batch job tidy-1 exists: resuming it") || !strings.Contains(r.stdout, "cancel: 3 done") {
		t.Errorf("batch cancel -id of a finished job: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, run := range runs {
		if n := cancelRequests(t, cl, run); n != 1 {
			t.Errorf("run %s: %d cancel requests, want 1", run, n)
		}
	}
	r = weft(t, "batch", "describe", "tidy-1", "-o", "json", "-nats", url)
	var d struct {
		Job   batch.Job   `json:"job"`
		State string      `json:"state"`
		Tally batch.Tally `json:"tally"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("describe -o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if d.State != "finished" || d.Tally.Done != 3 || d.Job.Query != q || len(d.Job.Runs) != 3 || d.Job.By == "" || d.Job.Args["reason"] != "tidy" {
		t.Errorf("describe -o json: %+v", d)
	}
}

// TestBatchJobBadInput: each mistake is refused with what and where, and
// nothing is written.
func TestBatchJobBadInput(t *testing.T) {
	url, cl := engine(t)
	run := startRun(t, cl, waits, nil)
	waitListed(t, cl, run, projection.RunWaiting)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"batch", "cancel", "-q", `status = "failed" AND`}, 2, "weft batch cancel: -q: "},
		{[]string{"batch", "cancel", "-q", `stauts = "failed"`}, 2, "stauts"},
		{[]string{"batch", "reset", "-q", `graph = "waits"`}, 2, "weft batch reset: want -node NODE"},
		{[]string{"batch", "signal", run}, 2, "weft batch signal: want -node NODE"},
		{[]string{"batch", "cancel", run, "-node", "ask"}, 2, "-node is for signal and reset only"},
		{[]string{"batch", "cancel"}, 2, "want RUN... or -q QUERY"},
		{[]string{"batch", "cancel", run, "-id", "no way"}, 2, `-id: batch job id "no way"`},
		{[]string{"batch", "frob"}, 2, `unknown batch command "frob"`},
		{[]string{"batch", "describe", "nope"}, 1, "batch job nope: no such batch job"},
		{[]string{"batch", "resume", "nope"}, 1, "batch job nope: no such batch job"},
	} {
		r := weft(t, append(c.args, "-nats", url)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s%s", c.args, r.code, c.code, c.want, r.stdout, r.stderr)
		}
	}
	// A located parse error: the column of the problem.
	r := weft(t, "batch", "cancel", "-q", `status = "failed" AND`, "-nats", url)
	wantMatch(t, "bad query", r.stderr, `column \d+|:\d+`)
	// An id taken by a job of another operation.
	if r := weft(t, "batch", "signal", run, "-node", "ask", "-data", `{"ok":true}`, "-id", "j1", "-yes", "-nats", url); r.code != 0 {
		t.Fatalf("batch signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "batch", "cancel", run, "-id", "j1", "-yes", "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, "batch job j1 is a signal, not a cancel") {
		t.Errorf("cancel -id of a signal job: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := cancelRequests(t, cl, run); n != 0 {
		t.Errorf("refused batches wrote %d cancel request(s)", n)
	}
}

// TestBatchJobResumedAfterKill: a 'weft batch reset' process SIGKILLed
// mid-job is resumed with 'weft batch resume' (refused while its
// heartbeat is fresh, unless -force), and each run is reset once: one
// fork (the id derived from the job and the run) and one cancel request.
func TestBatchJobResumedAfterKill(t *testing.T) {
	url, cl, store := engineStore(t)
	var runs []string
	for range 5 {
		runs = append(runs, startRun(t, cl, waits, nil))
	}
	for _, r := range runs {
		waitListed(t, cl, r, projection.RunWaiting)
	}
	bin := filepath.Join(testkit.Build(t, "github.com/weft-dev/weft/cmd/weft"), "weft")

	// The job's bucket, watched for outcomes before the process starts.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := eventlog.JetStream(store)
	kv, _, err := setupBatches(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "out.kill-1.*")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()

	cmd := exec.Command(bin, "batch", "reset", "-q", `graph = "waits"`, "-node", "ask", "-yes", "-rate", "2", "-id", "kill-1", "-nats", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < 2; {
		select {
		case e := <-w.Updates():
			if e != nil {
				seen++
			}
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no two outcomes in time\n%s%s", stdout.String(), stderr.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("killed after:\n%s", stdout.String())

	r := weft(t, "batch", "resume", "kill-1", "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, "being run by another process") || !strings.Contains(r.stderr, "-force") {
		t.Errorf("resume of a job with a fresh heartbeat: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "batch", "describe", "kill-1", "-nats", url)
	wantMatch(t, "describe after the kill", r.stdout, `(?m)^runs: +5: [2-5] done, 0 skipped, 0 failed, [0-3] not reached$`)

	r = weft(t, "batch", "resume", "kill-1", "-force", "-nats", url)
	if r.code != 0 {
		t.Fatalf("batch resume -force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "batch resume", r.stdout, "batch job kill-1: reset of 5 run(s), resumed", "reset: 5 done, 0 skipped, 0 failed")
	r = weft(t, "batch", "describe", "kill-1", "-nats", url)
	wantMatch(t, "describe after the resume", r.stdout, `(?m)^state: +finished .*, resumed 1 time\(s\)$`, `(?m)^runs: +5: 5 done, 0 skipped, 0 failed, 0 not reached$`)

	for _, run := range runs {
		waitListed(t, cl, run, projection.RunCancelled)
		fork := batch.ResetRunID("kill-1", run)
		waitListed(t, cl, fork, projection.RunWaiting)
		forks, err := cl.List(ctx, client.WithQuery(`forkedFrom = "`+run+`"`))
		if err != nil {
			t.Fatal(err)
		}
		if len(forks) != 1 || forks[0].RunID != fork {
			t.Errorf("run %s: forks %+v, want one, %s", run, forks, fork)
		}
		if n := cancelRequests(t, cl, run); n != 1 {
			t.Errorf("run %s: %d cancel requests, want 1", run, n)
		}
	}
}

// setupBatches opens the batch jobs' bucket, as the CLI makes it.
func setupBatches(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, bool, error) {
	if _, err := batch.Open(ctx, js, 1, true); err != nil {
		return nil, false, err
	}
	kv, err := js.KeyValue(ctx, batch.Bucket)
	return kv, false, err
}

// TestBatchJobProgressBar: on a terminal a batch job draws one bar,
// redrawn in place, instead of a line per run; elsewhere, a line per run.
func TestBatchJobProgressBar(t *testing.T) {
	url, cl := engine(t)
	a, b := startRun(t, cl, waits, nil), startRun(t, cl, waits, nil)
	for _, r := range []string{a, b} {
		waitListed(t, cl, r, projection.RunWaiting)
	}
	restore := cli.SetTerminal(true)
	r := weft(t, "batch", "terminate", a, b, "-yes", "-id", "bar-1", "-nats", url)
	restore()
	if r.code != 0 {
		t.Fatalf("batch terminate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "on a terminal", r.stdout, "\r[###############               ] 1/2  1 done, 0 skipped, 0 failed",
		"\r[##############################] 2/2  2 done, 0 skipped, 0 failed", "terminate: 2 done, 0 skipped, 0 failed")
	if strings.Contains(r.stdout, "run "+a+": terminate requested") {
		t.Errorf("a line per run on a terminal:\n%q", r.stdout)
	}
	r = weft(t, "batch", "terminate", a, "-yes", "-id", "bar-2", "-nats", url)
	if strings.Contains(r.stdout, "\r[") || !strings.Contains(r.stdout, "run "+a+": skipped: ") {
		t.Errorf("not a terminal: exit %d\n%q", r.code, r.stdout)
	}
}
