package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

const helloFile = "../../examples/hello.yaml"

// result is what one weft command line did.
type result struct {
	stdout, stderr string
	code           int
}

// weft runs a command line in-process, as cmd/weft does.
func weft(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, args, strings.NewReader(""), &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// engine starts a JetStream server with a coordinator and a worker, and
// returns the server's URL and a client over the store.
func engine(t *testing.T) (string, *client.Client) {
	t.Helper()
	url, cl, _ := engineStore(t)
	return url, cl
}

// engineStore is engine, with the events store, for a test's own workers.
func engineStore(t *testing.T) (string, *client.Client, events.Store) {
	t.Helper()
	srv, store := testkit.Store(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New(store, worker.WithName("test-worker"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	wctx, stopWorker := context.WithCancel(context.Background())
	cctx, stopCoordinator := context.WithCancel(context.Background())
	var wg, cg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	cg.Go(func() { _ = coordinator.New(store, coordinator.WithLogger(log)).Run(cctx) })
	t.Cleanup(func() {
		stopWorker()
		wg.Wait()
		stopCoordinator()
		cg.Wait()
	})
	// Every CLI command opens the stream (an idempotent stream update);
	// the engine is set up first, so that no update races its consumers'
	// creation inside the embedded server.
	waitConsumers(t, store, coordinator.ConsumerName("coordinator", 0), workqueue.QueueConsumer("default"))
	return srv.ClientURL(), client.New(store), store
}

func waitConsumers(t *testing.T, store events.Store, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range names {
		for {
			if _, err := eventlog.JetStream(store).Consumer(ctx, store.StreamName(), name); err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("consumer %s was not created", name)
			}
			// Polls: a consumer's creation sends no event to this test.
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

// wantMatch checks that got has a match of each regular expression.
func wantMatch(t *testing.T, what, got string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("%s does not match %s:\n%s", what, re, got)
		}
	}
}

func TestRunAndInspect(t *testing.T) {
	url, cl := engine(t)

	r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Ada"}`, "-invocation", `{"tier":"gold"}`, "-wait")
	if r.code != 0 {
		t.Fatalf("run -wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run := strings.SplitN(r.stdout, "\n", 2)[0]
	if !eventlog.ValidToken(run) {
		t.Fatalf("first line of run's output is %q, want a run id", run)
	}
	wantContains(t, "run -wait", r.stdout, "run "+run+" completed", `"greeting": "Hello, Ada!"`)

	r = weft(t, "status", run, "-nats", url)
	wantContains(t, "status", r.stdout, "completed", "greet", "shout", "succeeded", "test-worker", "Hello, Ada!")

	r = weft(t, "-o", "json", "status", "-nats", url, run)
	var st projection.State
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	if st.Status != projection.RunCompleted || st.InvocationMap()["tier"] != "gold" {
		t.Errorf("status -o json: status %q, invocation %s", st.Status, st.Invocation)
	}

	r = weft(t, "events", run, "-nats", url)
	wantContains(t, "events", r.stdout, "SEQ", "run.started", "node.ready", "type echo, queue default", "node.invoked", "worker test-worker", "-> shout", "-> END", "run.completed")
	r = weft(t, "events", run, "-nats", url, "-o", "json")
	var rows []struct {
		Position int    `json:"position"`
		Seq      uint64 `json:"seq"`
		Type     string `json:"type"`
		Node     string `json:"node"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) < 5 {
		t.Fatalf("events -o json: %v, %d rows\n%s", err, len(rows), r.stdout)
	}
	first, last := uint64(rows[0].Position), uint64(rows[len(rows)-1].Position)
	if first != 1 || last != uint64(len(rows)) {
		t.Errorf("events -o json: positions %d to %d for %d events, want 1 to %d", first, last, len(rows), len(rows))
	}

	r = weft(t, "state", run, "-at", itoa(first), "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, "running") || strings.Contains(r.stdout, "greeting") {
		t.Errorf("state -at %d: exit %d, want running without a greeting:\n%s%s", first, r.code, r.stdout, r.stderr)
	}
	r = weft(t, "state", run, "-nats", url, "-o", "json")
	wantContains(t, "state -o json", r.stdout, `"status": "completed"`)

	r = weft(t, "diff", run, itoa(first), itoa(last), "-nats", url)
	wantContains(t, "diff", r.stdout, "/state/greeting", `"Hello, Ada!"`, "/status", `"running"`, `"completed"`, "/nodes/greet/status")
	for _, bk := range []string{"/lastSeq", "/updatedAt", "/stats/", "/endReached"} {
		if strings.Contains(r.stdout, bk) {
			t.Errorf("diff shows bookkeeping %s without -all:\n%s", bk, r.stdout)
		}
	}
	r = weft(t, "diff", run, itoa(first), itoa(last), "-all", "-nats", url)
	wantContains(t, "diff -all", r.stdout, "/lastSeq", "/updatedAt", "/stats/events", "/endReached")

	waitListed(t, cl, run, projection.RunCompleted)
	r = weft(t, "list", "-nats", url)
	wantContains(t, "list", r.stdout, "RUN", run, "hello", "completed")
	r = weft(t, "list", "-nats", url, "-o", "json", "-status", "failed")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list -status failed: %s", r.stdout)
	}
}

func TestRunFailsExitsOne(t *testing.T) {
	url, _ := engine(t)
	file := writeFile(t, "boom.yaml", `
name: boom
nodes:
  - id: explode
    type: fail
    config: {message: kaboom, retryable: false}
edges:
  - {from: START, to: explode}
  - {from: explode, to: END}
`)
	r := weft(t, "run", file, "-nats", url, "-wait")
	if r.code != 1 {
		t.Fatalf("run of a failing graph: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "stdout", r.stdout, "failed", "kaboom", "(node explode)")
	// Said once: the outcome on stdout, nothing more on stderr.
	if strings.Contains(r.stderr, "kaboom") {
		t.Errorf("the failure is said twice; stderr:\n%s", r.stderr)
	}
	// With -o json, stdout is the state: stderr says why it exits 1.
	r = weft(t, "run", file, "-nats", url, "-wait", "-o", "json")
	if r.code != 1 {
		t.Fatalf("run -o json of a failing graph: exit %d, want 1", r.code)
	}
	wantContains(t, "stderr of -o json", r.stderr, "weft: run ", " failed: ")
}

func TestSignalAndCancel(t *testing.T) {
	url, c := engine(t)
	file := writeFile(t, "approve.yaml", `
name: approve
nodes:
  - {id: ask, type: human}
  - {id: done, type: noop}
edges:
  - {from: START, to: ask}
  - {from: ask, to: done}
  - {from: done, to: END}
`)
	r := weft(t, "run", file, "-nats", url, "-id", "approval-1")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "approval-1" {
		t.Fatalf("run -id: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "run", file, "-nats", url, "-id", "approval-1")
	if r.code != 1 || !strings.Contains(r.stderr, "run already exists") {
		t.Errorf("second run -id: exit %d, stderr %q", r.code, r.stderr)
	}

	r = weft(t, "signal", "approval-1", "nope", "-nats", url)
	if r.code != 1 {
		t.Errorf("signal to an unknown node: exit %d, want 1", r.code)
	}
	wantContains(t, "signal to an unknown node", r.stderr, `no node "nope"`, "ask, done")

	r = weft(t, "signal", "approval-1", "ask", "-nats", url, "-id", "bad.id")
	if r.code != 1 || !strings.Contains(r.stderr, `signal id "bad.id"`) {
		t.Errorf("signal -id bad.id: exit %d, stderr %q", r.code, r.stderr)
	}
	r = weft(t, "signal", "approval-1", "done", "-nats", url, "-data", `{"approved":true}`)
	if r.code != 1 {
		t.Errorf("signal to a noop node: exit %d, want 1", r.code)
	}
	wantContains(t, "signal to a noop node", r.stderr, "signal refused", `node "done" is a "noop" node, and only human nodes wait for signals`)
	waitWaiting(t, c, "approval-1", "ask")
	r = weft(t, "signal", "approval-1", "ask", "-nats", url, "-data", `{"approved":true}`, "-id", "req-1")
	if r.code != 0 {
		t.Fatalf("signal: exit %d\n%s", r.code, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Wait(ctx, "approval-1")
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("signalled run: %v, status %v", err, st)
	}
	r = weft(t, "signal", "approval-1", "ask", "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, "run already ended") {
		t.Errorf("signal after the end: exit %d, stderr %q", r.code, r.stderr)
	}

	r = weft(t, "run", file, "-nats", url, "-id", "approval-2")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	r = weft(t, "cancel", "approval-2", "-reason", "no longer needed", "-nats", url)
	if r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
	}
	st, err = c.Wait(ctx, "approval-2")
	if err != nil || st.Status != projection.RunCancelled || st.Cancel.Reason != "no longer needed" {
		t.Fatalf("cancelled run: %v, %+v", err, st)
	}
}

func TestMissingRun(t *testing.T) {
	url, _ := engine(t)
	for _, args := range [][]string{
		{"status", "nosuchrun"},
		{"events", "nosuchrun"},
		{"state", "nosuchrun", "-at", "3"},
		{"diff", "nosuchrun", "1", "2"},
		{"signal", "nosuchrun", "ask"},
		{"cancel", "nosuchrun"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := weft(t, append(args, "-nats", url)...)
			if r.code != 1 || r.stderr != "weft: run nosuchrun not found\n" {
				t.Errorf("exit %d, stderr %q; want 1, \"weft: run nosuchrun not found\"", r.code, r.stderr)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cli.Run(ctx, []string{"status", "nosuchrun", "-nats", url}, nil, &bytes.Buffer{}, &bytes.Buffer{})
	if !errorsIs(err, events.ErrRunNotFound) {
		t.Errorf("Run: %v, want events.ErrRunNotFound", err)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		{"no command", nil, 2, "", "no command"},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"run without a file", []string{"run"}, 2, "", "want GRAPHFILE, got 0 argument(s)"},
		{"status with two runs", []string{"status", "a", "b"}, 2, "", "usage: weft status RUN [flags]"},
		{"unknown flag", []string{"list", "-bogus"}, 2, "", "flag provided but not defined: -bogus\n"},
		{"mistyped flag", []string{"list", "-stauts", "failed"}, 2, "", "flag provided but not defined: -stauts (did you mean -status?)"},
		{"mistyped command", []string{"stauts", "r"}, 2, "", `unknown command "stauts" (did you mean status?)`},
		{"mistyped short command", []string{"lsit"}, 2, "", `unknown command "lsit" (did you mean list?)`},
		{"bad output format", []string{"-o", "yaml", "list"}, 2, "", `-o: want text or json, got "yaml"`},
		{"bad diff position", []string{"diff", "r", "one", "2"}, 2, "", `FROM: want a position in the run`},
		{"bad diff sequence", []string{"diff", "r", "0", "2", "-seq"}, 2, "", `FROM: want a stream sequence`},
		{"reversed diff", []string{"diff", "r", "5", "2"}, 2, "", `TO 2 is before FROM 5: TO must be 5 or later`},
		{"fork without -at", []string{"fork", "r"}, 2, "", `-at: want the position of an event`},
		{"fork bad -set", []string{"fork", "r", "-at", "2", "-set", "name=Bob"}, 2, "", `-set name=Bob: want KEY=JSON`},
		{"fork -set without =", []string{"fork", "r", "-at", "2", "-set", "name"}, 2, "", `want KEY=JSON`},
		{"fork -state not an object", []string{"fork", "r", "-at", "2", "-state", "[1]"}, 2, "", `-state: want a JSON object`},
		{"fork graph missing", []string{"fork", "r", "-at", "2", "-graph", "/nonexistent.yaml"}, 1, "", `graph file /nonexistent.yaml does not exist`},
		{"reset without target", []string{"reset", "r"}, 2, "", `want -to NODE or -at POS`},
		{"reset with both", []string{"reset", "r", "-to", "a", "-at", "3"}, 2, "", `want -to NODE or -at POS`},
		{"replay without graph", []string{"replay", "r"}, 2, "", `-graph: want the changed graph file`},
		{"replay without runs", []string{"replay", "-graph", helloFile}, 2, "", `want RUN... or -all`},
		{"replay -status without -all", []string{"replay", "-graph", helloFile, "r", "-status", "running"}, 2, "", `-status goes with -all`},
		{"help fork", []string{"help", "fork"}, 0, "usage: weft fork RUN [flags]", ""},
		{"help lists replay", []string{"help"}, 0, "replay RUN...", ""},
		{"input not an object", []string{"run", helloFile, "-input", "[1]"}, 2, "", "-input: want a JSON object"},
		{"input not JSON", []string{"run", helloFile, "-input", "{"}, 2, "", "-input: not valid JSON"},
		{"input file missing", []string{"run", helloFile, "-input", "@/nonexistent.json"}, 2, "", "-input: open /nonexistent.json"},
		{"bad run id", []string{"run", helloFile, "-id", "a.b"}, 2, "", `-id: "a.b" is not a valid run id`},
		{"help", []string{"help"}, 0, "Commands:", ""},
		{"-h", []string{"-h"}, 0, "weft demo", ""},
		{"help run", []string{"help", "run"}, 0, "usage: weft run GRAPHFILE [flags]", ""},
		{"run -h", []string{"run", "-h"}, 0, "", "-invocation"},
		{"help unknown", []string{"help", "nope"}, 2, "", `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := weft(t, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			wantContains(t, "stdout", r.stdout, tt.wantOut)
			wantContains(t, "stderr", r.stderr, tt.wantErr)
		})
	}
	ctx := context.Background()
	if err := cli.Run(ctx, []string{"frobnicate"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); !errorsIs(err, cli.ErrUsage) {
		t.Errorf("Run(unknown command) = %v, want ErrUsage", err)
	}
}

func TestValidate(t *testing.T) {
	broken := writeFile(t, "broken.yaml", `
name: broken
nodes:
  - id: fetch
    type: echo
    timeout: 3 sec
  - id: fetch2
    type: echo
    retries: 3
edges:
  - {from: START, to: fetch}
  - {from: fetch, to: fetch2}
  - {from: fetch2, to: END}
`)
	r := weft(t, "validate", helloFile, broken)
	if r.code != 1 {
		t.Errorf("validate: exit %d, want 1", r.code)
	}
	wantContains(t, "validate", r.stdout, helloFile+": ok (graph hello, 2 nodes", broken+`: line 6, column 14: node "fetch": field "timeout"`, broken+`: line 9, column 5: node "fetch2": field "retries": unknown field`)
	wantContains(t, "validate stderr", r.stderr, "1 of 2 graph files invalid")

	// Each problem names the line and column to look at, and a near miss
	// its likely meaning.
	typo := writeFile(t, "typo.yaml", "name: typo\nnodes:\n  - id: a\n    type: ecko\n    timout: 1s\nedges: [{from: START, to: a}, {from: a, to: END}]\n")
	indent := writeFile(t, "indent.yaml", "name: indent\nnodes:\n  - id: a\n    type: echo\n   bad: 1\n")
	tab := writeFile(t, "tab.yaml", "name: tab\nnodes:\n\t- id: a\n")
	quote := writeFile(t, "quote.yaml", "name: quote\nnodes:\n  - id: \"a\n    type: echo\n")
	r = weft(t, "validate", typo, indent, tab, quote)
	if r.code != 1 {
		t.Errorf("validate of typos: exit %d, want 1", r.code)
	}
	wantContains(t, "validate of typos", r.stdout,
		typo+`: line 4, column 11: node "a": field "type": unknown type "ecko" (did you mean echo?)`,
		typo+`: line 5, column 5: node "a": field "timout": unknown field (did you mean "timeout"?)`,
		indent+": line 5, column 4: invalid YAML: did not find expected '-' indicator",
		tab+": line 3, column 1: invalid YAML: found character that cannot start any token (YAML indents with spaces, not tabs)",
		quote+`: line 3, column 9: invalid YAML: found unexpected end of stream (the " here is never closed)`)

	r = weft(t, "validate", "-o", "json", broken)
	var reports []struct {
		File     string   `json:"file"`
		Valid    bool     `json:"valid"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &reports); err != nil || len(reports) != 1 || reports[0].Valid || len(reports[0].Problems) != 2 {
		t.Errorf("validate -o json: %v, %+v", err, reports)
	}

	r = weft(t, "run", broken, "-nats", "nats://127.0.0.1:1")
	if r.code != 1 {
		t.Errorf("run of a broken graph: exit %d, want 1", r.code)
	}
	wantContains(t, "run of a broken graph", r.stderr, "2 problems in "+broken, `line 6, column 14: node "fetch": field "timeout"`)

	custom := writeFile(t, "custom.yaml", "name: c\nnodes: [{id: a, type: wordcount}]\nedges: [{from: START, to: a}, {from: a, to: END}]\n")
	r = weft(t, "validate", custom)
	if r.code != 1 || !strings.Contains(r.stdout, `unknown type "wordcount"`) || !strings.Contains(r.stdout, "with -types") || strings.Contains(r.stdout, "WithTypes") {
		t.Errorf("validate of an unknown type: exit %d, want 1 and a hint at -types (not the Go API)\n%s", r.code, r.stdout)
	}
	r = weft(t, "validate", "-types", "wordcount,other", custom)
	if r.code != 0 {
		t.Errorf("validate -types: exit %d\n%s", r.code, r.stdout)
	}

	r = weft(t, "validate", "/nonexistent.yaml")
	if r.code != 1 || !strings.Contains(r.stdout, "/nonexistent.yaml: no such file") {
		t.Errorf("validate of a missing file: exit %d\n%s", r.code, r.stdout)
	}
}

func TestDemo(t *testing.T) {
	r := weft(t, "demo", helloFile, "-data", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "demo", r.stdout, "embedded NATS at nats://127.0.0.1:", "SEQ", "run.started", "node.invoked", "run.completed", "completed in", `"greeting": "Hello, Ada!"`)
}

// TestDemoAgentFakeModel: 'weft demo examples/agent.yaml' runs the agent
// against demo's built-in fake model, which it names as a fake: three
// model calls and two tool runs (note's after its approval, -approve
// yes), each a step in the log, and the fake's
// answer as the node's output. An endpoint named "fake" configured in the
// environment is refused, not shadowed by the fake.
func TestDemoAgentFakeModel(t *testing.T) {
	r := weft(t, "demo", "-approve", "yes", "../../examples/agent.yaml", "-data", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "demo", r.stdout, `FAKE MODEL: the llm endpoint "fake" is weft's built-in scripted fake at http://127.0.0.1:`,
		"step 1 model", "step 2 tool", "step 3 model", "step 4 await", "step 5 approval", "step 6 tool", "step 7 model", "run.completed",
		`"content": "[fake model] I was asked \"Research Ada.\". The tools said: {\"found\":\"Ada Lovelace`, `"turns": 3`)

	t.Setenv("WEFT_LLM_ENDPOINTS", "name=fake,url=https://api.example.com/v1,key=K")
	r = weft(t, "demo", "../../examples/agent.yaml", "-data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, `WEFT_LLM_ENDPOINTS configures an endpoint named "fake"`) || strings.Contains(r.stdout, "FAKE MODEL") {
		t.Errorf("demo with a configured endpoint named fake: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.Buffer
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "-port", "-1", "-data", t.TempDir(), "-ui", "off"}, nil, &stdout, &stderr)
	}()

	urlRE := regexp.MustCompile(`at (nats://127\.0\.0\.1:\d+)`)
	var url string
	// Polls: weft dev prints its address when ready, to a buffer that notifies nobody.
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not start:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Dev"}`, "-wait")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, Dev!") {
		t.Errorf("run against dev: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("dev: exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	wantContains(t, "dev", stdout.String(), "weft dev: stopped")
	// Without -roles anyone may connect: said loudly.
	wantContains(t, "dev's stderr", stderr.String(), "weft dev: WARNING: the NATS server at "+url+" takes anonymous connections", "delete the stream", "weft dev -roles")
}

// TestDevFakeModel: 'weft dev -fake-model' announces the fake model and
// serves it as the endpoint "fake": examples/agent.yaml runs against it.
func TestDevFakeModel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.Buffer
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "-port", "-1", "-data", t.TempDir(), "-ui", "off", "-fake-model", "-fake-model-pace", "0s"}, nil, &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`at (nats://127\.0\.0\.1:\d+)[\s\S]*FAKE MODEL: the llm endpoint "fake"`)
	var url string
	// Polls: weft dev prints its address when ready, to a buffer that notifies nobody.
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not start with the fake model:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	// The run waits for the approval of its note tool: the test answers it.
	out := &watched{want: regexp.MustCompile(`^(\S+)\n`), found: make(chan []string, 1)}
	var runErr bytes.Buffer
	ran := make(chan int, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		ran <- cli.Main(rctx, []string{"run", "../../examples/agent.yaml", "-nats", url, "-input", `{"name":"Dev"}`, "-wait"}, strings.NewReader(""), out, &runErr)
	}()
	var run string
	select {
	case m := <-out.found:
		run = m[1]
	case code := <-ran:
		t.Fatalf("agent run ended (exit %d) before printing its id\n%s%s", code, out, runErr.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := weft(t, "signal", run, "research", "-nats", url, "-data", `{"approved": true, "call": "fake_call_1"}`)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("note's approval never accepted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Waits for the agent's await step and the coordinator's wait for a signal.
		time.Sleep(50 * time.Millisecond)
	}
	if code := <-ran; code != 0 || !strings.Contains(out.String(), `[fake model] I was asked \"Research Dev.\"`) {
		t.Errorf("agent run against dev -fake-model: exit %d\n%s%s", code, out, runErr.String())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	if r := weft(t, "dev", "-fake-model-pace", "-1s"); r.code != 2 || !strings.Contains(r.stderr, "-fake-model-pace: want 0 or more") {
		t.Errorf("a negative pace: exit %d\n%s", r.code, r.stderr)
	}
}

func TestStatusShowsWorkNoWorkerServes(t *testing.T) {
	url, _ := engine(t)
	g := writeFile(t, "mystery.yaml", `
name: mystery
nodes:
  - {id: odd, type: mystery}
edges:
  - {from: START, to: odd}
  - {from: odd, to: END}
`)
	r := weft(t, "run", g, "-nats", url, "-types", "mystery")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run := strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = weft(t, "status", run, "-nats", url)
		if strings.Contains(r.stdout, "no live worker serves type mystery on queue default") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never says the work waits for a worker:\n%s%s", r.stdout, r.stderr)
		}
		// Polls: weft status is a read, which notifies nobody.
		time.Sleep(200 * time.Millisecond)
	}
	wantContains(t, "status", r.stdout, "running", "ready")
}

func TestConnectionFromTheEnvironment(t *testing.T) {
	url, _ := engine(t)
	t.Setenv("WEFT_NATS_URL", url)
	if r := weft(t, "list"); r.code != 0 {
		t.Fatalf("list with WEFT_NATS_URL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Setenv("WEFT_REPLICAS", "three")
	r := weft(t, "run", helloFile)
	if r.code != 2 || !strings.Contains(r.stderr, `WEFT_REPLICAS="three"`) {
		t.Fatalf("bad WEFT_REPLICAS: exit %d\n%s", r.code, r.stderr)
	}
	// A command that creates no stream has no use for it.
	if r := weft(t, "list"); r.code != 0 {
		t.Errorf("list with WEFT_REPLICAS=three: exit %d\n%s", r.code, r.stderr)
	}
}

// waitWaiting waits until a node of a run waits for a signal.
func waitWaiting(t *testing.T, c *client.Client, run, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		st, err := c.Get(ctx, run)
		if err == nil {
			if ns := st.Nodes[node]; ns != nil && ns.Status == projection.NodeWaiting && ns.WaitingFor == "signal" {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s of run %s never waited for a signal", node, run)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// weft signal RUN approve with no -data, to a node whose outputSchema
// requires "approved", is refused with a message naming the field, and
// exits 1; the run keeps waiting and a fitting signal answers it.
func TestSignalRefusedNamesTheField(t *testing.T) {
	url, c := engine(t)
	file := writeFile(t, "approve.yaml", `
name: approve
nodes:
  - id: approve
    type: human
    outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}}}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END, when: "output.approved"}
`)
	if r := weft(t, "run", file, "-nats", url, "-id", "schema-1"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	waitWaiting(t, c, "schema-1", "approve")
	r := weft(t, "signal", "schema-1", "approve", "-nats", url)
	if r.code != 1 {
		t.Fatalf("signal with no data: exit %d, want 1 (%s)", r.code, r.stderr)
	}
	wantContains(t, "signal with no data", r.stderr, "signal refused", `outputSchema requires "approved"`)
	r = weft(t, "signal", "schema-1", "approve", "-nats", url, "-data", `{"approved":"yes"}`)
	if r.code != 1 {
		t.Fatalf("signal with a string: exit %d, want 1", r.code)
	}
	wantContains(t, "signal with a string", r.stderr, "/approved: got string, want boolean")
	if r := weft(t, "signal", "schema-1", "approve", "-nats", url, "-data", `{"approved":true}`); r.code != 0 {
		t.Fatalf("fitting signal: exit %d: %s", r.code, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, err := c.Wait(ctx, "schema-1"); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("run: %v %v", st, err)
	}
}

// weft validate reports a condition that reads a field its source cannot
// provide, with the edge, the field and the fix, and exits 1.
func TestValidateConditionReads(t *testing.T) {
	file := writeFile(t, "reads.yaml", `
name: reads
nodes:
  - id: approve
    type: human
    outputSchema: {type: object, properties: {approved: {type: boolean}}}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END, when: "output.aproved"}
`)
	r := weft(t, "validate", file)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "validate", r.stdout, `edge 2 (approve -> END): field "when": reads output.aproved, but node "approve" provides no field "aproved"`, `(did you mean "approved"?)`, "has(output.aproved)")
}

// weft update prints the verdict: refused with why (exit 1, recorded),
// accepted with the node's output and the state after it; the same -id
// again prints the same verdict, and with other data is refused.
func TestUpdateCommand(t *testing.T) {
	url, c := engine(t)
	file := writeFile(t, "approve.yaml", `
name: approve
nodes:
  - id: approve
    type: human
    outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}}}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END}
`)
	if r := weft(t, "run", file, "-nats", url, "-id", "upd-1"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	waitWaiting(t, c, "upd-1", "approve")
	r := weft(t, "update", "upd-1", "approve", "-nats", url, "-data", `{"approved":"yes"}`, "-id", "a")
	if r.code != 1 {
		t.Fatalf("update with a string: exit %d, want 1 (%s)", r.code, r.stderr)
	}
	wantContains(t, "update with a string", r.stderr, "update a refused by run upd-1", "/approved: got string, want boolean")
	r = weft(t, "update", "upd-1", "approve", "-nats", url, "-data", `{"approved":true}`, "-id", "b")
	if r.code != 0 {
		t.Fatalf("fitting update: exit %d: %s", r.code, r.stderr)
	}
	wantContains(t, "fitting update", r.stdout, "update b accepted by node approve of run upd-1", `output: {"approved":true}`)
	r = weft(t, "update", "upd-1", "approve", "-nats", url, "-data", `{"approved":true}`, "-id", "b", "-o", "json")
	if r.code != 0 {
		t.Fatalf("update again: exit %d: %s", r.code, r.stderr)
	}
	wantContains(t, "update again", r.stdout, `"accepted": true`)
	r = weft(t, "update", "upd-1", "approve", "-nats", url, "-data", `{"approved":false}`, "-id", "b")
	if r.code != 1 {
		t.Fatalf("update id reused: exit %d, want 1", r.code)
	}
	wantContains(t, "update id reused", r.stderr, "update id reused with other data")
}

// A chain of continuations shows its lineage: weft status names a link's
// place, predecessor and continuation, and weft list -chain finds every
// link.
func TestChainLineage(t *testing.T) {
	url, c := engine(t)
	file := writeFile(t, "entity.yaml", `
name: entity
nodes:
  - {id: step, type: transform, config: {set: {i: "state.i + 1"}}}
edges:
  - {from: START, to: step}
  - {from: step, to: step, when: "state.i % 2 != 0"}
  - {from: step, to: CONTINUE, when: "state.i % 2 == 0 && state.i < 6"}
  - {from: step, to: END, when: "state.i >= 6"}
`)
	if r := weft(t, "run", file, "-nats", url, "-id", "ent-1", "-input", `{"i":0}`); r.code != 0 {
		t.Fatal(r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var links []string
	for run := "ent-1"; run != ""; {
		st, err := c.Wait(ctx, run)
		if err != nil || st.Status != projection.RunCompleted {
			t.Fatalf("link %s: %v %v", run, st, err)
		}
		links = append(links, run)
		run = st.ContinuedAs
	}
	if len(links) != 3 {
		t.Fatalf("links %v, want 3", links)
	}
	r := weft(t, "status", links[1], "-nats", url)
	wantContains(t, "status of link 2", r.stdout, "link 2 of chain ent-1, continues ent-1, continued as "+links[2], "weft list -chain ent-1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = weft(t, "list", "-nats", url, "-chain", "ent-1")
		if strings.Count(r.stdout, "of chain ent-1") == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the read model follows the log
	}
	wantContains(t, "list -chain", r.stdout, links[0], links[1], links[2], "link 1 of chain ent-1, continued as "+links[1])
	if strings.Count(r.stdout, "of chain ent-1") != 3 {
		t.Fatalf("list -chain ent-1:\n%s", r.stdout)
	}
}

// TestHelpListsOnlyTheFlagsACommandUses: the events stream's creation
// settings are flags of the commands that create or change the stream,
// not of those that only read or append.
func TestHelpListsOnlyTheFlagsACommandUses(t *testing.T) {
	stream := []string{"-storage", "-replicas", "-duplicates", "-max-age"}
	for _, cmd := range []string{"status", "list", "events", "diff", "cancel", "signal", "delete", "describe"} {
		r := weft(t, "help", cmd)
		for _, f := range stream {
			if strings.Contains(r.stdout, "  "+f+" ") {
				t.Errorf("weft help %s lists %s", cmd, f)
			}
		}
		wantContains(t, "weft help "+cmd, r.stdout, "-nats", "-creds", "-stream")
	}
	for _, cmd := range [][]string{{"help", "run"}, {"help", "admin", "apply"}} {
		r := weft(t, cmd...)
		wantContains(t, strings.Join(cmd, " "), r.stdout, "-replicas", "-storage")
	}
	// The environment still reaches a command that reads.
	t.Setenv("WEFT_STORAGE", "memory")
	if r := weft(t, "status", "-h"); r.code != 0 {
		t.Errorf("status -h with WEFT_STORAGE set: exit %d %s", r.code, r.stderr)
	}
}
