package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const approvalFile = "../../examples/approval.yaml"

// runHello runs examples/hello.yaml to its end and returns the run's id.
func runHello(t *testing.T, url, name string) string {
	t.Helper()
	r := weft(t, "run", helloFile, "-nats", url, "-input", fmt.Sprintf(`{"name":%q}`, name), "-wait")
	if r.code != 0 {
		t.Fatalf("run -wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return strings.SplitN(r.stdout, "\n", 2)[0]
}

// streamLast is the events stream's last sequence.
func streamLast(t *testing.T, cl *client.Client, run string) uint64 {
	t.Helper()
	evs, err := cl.History(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1].Seq
}

// rowsOf reads 'weft events -o json'.
type jsonRow struct {
	Position int    `json:"position"`
	Seq      uint64 `json:"seq"`
	Type     string `json:"type"`
	Node     string `json:"node"`
}

func eventRows(t *testing.T, url, run string) []jsonRow {
	t.Helper()
	r := weft(t, "-o", "json", "events", run, "-nats", url)
	var rows []jsonRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("events -o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return rows
}

func rowOf(t *testing.T, rows []jsonRow, typ events.Type, node string) jsonRow {
	t.Helper()
	for _, r := range rows {
		if r.Type == string(typ) && r.Node == node {
			return r
		}
	}
	t.Fatalf("no %s of %s among %d rows", typ, node, len(rows))
	return jsonRow{}
}

// The second run on a stream is addressed by its own positions, which
// start at 1, not by stream sequences: the README's examples work for
// every run.
func TestPositionsOnALaterRun(t *testing.T) {
	url, _ := engine(t)
	runHello(t, url, "Ada")
	run := runHello(t, url, "Bob")
	rows := eventRows(t, url, run)
	if rows[0].Position != 1 || rows[0].Seq == 1 {
		t.Fatalf("second run's first event: position %d seq %d; want position 1 at a later seq", rows[0].Position, rows[0].Seq)
	}
	n := len(rows)

	r := weft(t, "state", run, "-at", "1", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, "state after event 1") || !strings.Contains(r.stdout, "running") || strings.Contains(r.stdout, "greeting") {
		t.Errorf("state -at 1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "state", run, "-at", itoa(rows[0].Seq), "-seq", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, "state at seq "+itoa(rows[0].Seq)) || !strings.Contains(r.stdout, "running") {
		t.Errorf("state -seq: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "diff", run, "1", strconv.Itoa(n), "-nats", url)
	wantContains(t, "diff", r.stdout, "/state/greeting", `"Hello, Bob!"`, "/status")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"state", run, "-at", strconv.Itoa(n + 1)}, fmt.Sprintf("run %s has events at positions 1 to %d; %d is out of range", run, n, n+1)},
		{[]string{"diff", run, "1", strconv.Itoa(n + 5)}, fmt.Sprintf("run %s has events at positions 1 to %d; TO %d is out of range", run, n, n+5)},
		{[]string{"state", run, "-seq", "-at", "1"}, fmt.Sprintf("its events are at sequences %d to %d", rows[0].Seq, rows[n-1].Seq)},
	} {
		r := weft(t, append(tc.args, "-nats", url)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// diff -full prints long values whole.
func TestDiffFull(t *testing.T) {
	url, _ := engine(t)
	long := strings.Repeat("x", 100)
	run := runHello(t, url, long)
	n := len(eventRows(t, url, run))
	cut := weft(t, "diff", run, "1", strconv.Itoa(n), "-nats", url)
	full := weft(t, "diff", run, "1", strconv.Itoa(n), "-nats", url, "-full")
	want := `"Hello, ` + long + `!"`
	if strings.Contains(cut.stdout, want) || !strings.Contains(cut.stdout, "…") {
		t.Errorf("diff without -full prints the long value whole:\n%s", cut.stdout)
	}
	if !strings.Contains(full.stdout, want) {
		t.Errorf("diff -full lacks %s:\n%s", want, full.stdout)
	}
}

// weft fork reruns from a point with edited state; status and list show
// the lineage; bad input is refused and writes nothing.
func TestForkCommand(t *testing.T) {
	url, cl := engine(t)
	run := runHello(t, url, "Ada")
	rows := eventRows(t, url, run)
	at := rowOf(t, rows, events.NodeReady, "shout").Position

	r := weft(t, "fork", run, "-at", strconv.Itoa(at), "-set", `name="Bob"`, "-wait", "-nats", url)
	if r.code != 0 {
		t.Fatalf("fork -wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fork := strings.SplitN(r.stdout, "\n", 2)[0]
	wantContains(t, "fork -wait", r.stdout, "run "+fork+" completed", `"greeting": "Hello, Bob!"`)
	lineage := fmt.Sprintf("forked from %s@%d", run, at)
	wantContains(t, "status of the fork", weft(t, "status", fork, "-nats", url).stdout, "lineage", lineage)
	// The read model is written after the run's last event, which is all
	// fork -wait waits for.
	waitListed(t, cl, fork, projection.RunCompleted)
	wantContains(t, "list", weft(t, "list", "-nats", url).stdout, "LINEAGE", lineage)
	if fr := eventRows(t, url, fork); len(fr) == 0 || rowOf(t, fr, events.NodeInvoked, "shout").Node != "shout" {
		t.Errorf("the fork did not run shout again")
	} else {
		for _, x := range fr {
			if x.Type == string(events.NodeInvoking) && x.Node == "greet" {
				t.Errorf("the fork ran greet again, which had completed at position %d", at)
			}
		}
	}

	// A compatible graph: the same nodes, shout says something else.
	hi := writeFile(t, "hi.yaml", strings.Replace(mustRead(t, helloFile), "'Hello, '", "'Hi, '", 1))
	r = weft(t, "fork", run, "-at", strconv.Itoa(at), "-graph", hi, "-wait", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, `"greeting": "Hi, Ada!"`) {
		t.Errorf("fork -graph: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A graph that renames shout does not fit a state in which shout ran.
	renamed := writeFile(t, "renamed.yaml", strings.ReplaceAll(mustRead(t, helloFile), "shout", "yell"))
	invalid := writeFile(t, "invalid.yaml", "name: x\nnodes:\n  - id: a\n    type: nosuchtype\nedges: []\n")
	before := streamLast(t, cl, fork)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"past the end", []string{"-at", strconv.Itoa(len(rows) + 1)}, fmt.Sprintf("has events at positions 1 to %d; %d is out of range", len(rows), len(rows)+1)},
		{"incompatible graph", []string{"-at", strconv.Itoa(len(rows)), "-graph", renamed}, `node "shout" (succeeded in the run) is not in graph "hello"`},
		{"invalid graph", []string{"-at", "2", "-graph", invalid}, invalid},
		{"missing run", []string{"-at", "2"}, "run nosuchrun not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := run
			if tc.name == "missing run" {
				target = "nosuchrun"
			}
			r := weft(t, append([]string{"fork", target, "-nats", url}, tc.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
	if after := streamLast(t, cl, fork); after != before {
		t.Errorf("refused forks wrote to the stream: last sequence %d -> %d", before, after)
	}
	if l := weft(t, "-o", "json", "list", "-nats", url); strings.Count(l.stdout, `"status"`) != 3 {
		t.Errorf("refused forks started runs:\n%s", l.stdout)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := osReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// weft reset ends a waiting run, recording why, and forks it from before
// the node was activated: the new run waits at it again.
func TestResetCommand(t *testing.T) {
	url, cl := engine(t)
	r := weft(t, "run", approvalFile, "-nats", url)
	run := strings.TrimSpace(r.stdout)
	waitState(t, cl, run, func(st *projection.State) bool {
		return st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting
	})
	before := streamLast(t, cl, run)
	for _, tc := range []struct {
		node, want string
	}{
		{"nobody", `graph "approval" has no node "nobody" (its nodes: draft, approve, publish, discard, escalate)`},
		{"publish", `node "publish" was never activated in run ` + run},
	} {
		r := weft(t, "reset", run, "-to", tc.node, "-nats", url)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("reset -to %s: exit %d, stderr %q; want 1 and %q", tc.node, r.code, r.stderr, tc.want)
		}
	}
	if after := streamLast(t, cl, run); after != before {
		t.Errorf("refused resets wrote to the stream: last sequence %d -> %d", before, after)
	}

	r = weft(t, "reset", run, "-to", "approve", "-nats", url)
	if r.code != 0 {
		t.Fatalf("reset: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fork := strings.TrimSpace(r.stdout)
	waitState(t, cl, run, func(st *projection.State) bool { return st.Status == projection.RunCancelled })
	wantContains(t, "status of the reset run", weft(t, "status", run, "-nats", url).stdout, "cancelled", "reset to node approve", "new run "+fork)
	waitState(t, cl, fork, func(st *projection.State) bool {
		return st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting
	})
	wantContains(t, "status of the new run", weft(t, "status", fork, "-nats", url).stdout, "forked from "+run+"@", "reset to node approve", "waiting")
	if r := weft(t, "signal", fork, "approve", "-data", `{"approved":true}`, "-nats", url); r.code != 0 {
		t.Fatalf("signal: %s%s", r.stdout, r.stderr)
	}
	waitState(t, cl, fork, func(st *projection.State) bool { return st.Status == projection.RunCompleted })

	// -at: from after an event; a run that ended is not cancelled again.
	rows := eventRows(t, url, fork)
	r = weft(t, "reset", fork, "-at", "2", "-nats", url)
	if r.code != 0 {
		t.Fatalf("reset -at 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	again := strings.TrimSpace(r.stdout)
	wantContains(t, "status after reset -at", weft(t, "status", again, "-nats", url).stdout, fmt.Sprintf("forked from %s@2 (reset to position 2)", fork))
	if after := eventRows(t, url, fork); len(after) != len(rows) {
		t.Errorf("resetting an ended run wrote to it: %d events, then %d", len(rows), len(after))
	}
}

// waitState follows a run until its state satisfies ok.
func waitState(t *testing.T, cl *client.Client, run string, ok func(*projection.State) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := false
	err := cl.Follow(ctx, run, func(_ client.RunEvent, st *projection.State) bool {
		done = ok(st)
		return !done
	})
	if err != nil || !done {
		t.Fatalf("run %s: the awaited state did not come (%v)", run, err)
	}
}

// weft replay passes a run on its own graph, and reports where a changed
// graph decides otherwise, exiting 1.
func TestReplayCommand(t *testing.T) {
	url, cl := engine(t)
	run := runHello(t, url, "Ada")
	r := weft(t, "replay", "-graph", helloFile, run, "-nats", url)
	if r.code != 0 || !regexp.MustCompile(run+`: ok \(\d+ events, \d+ decisions the same\)`).MatchString(r.stdout) {
		t.Errorf("replay on the run's graph: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rows := eventRows(t, url, run)
	ready := rowOf(t, rows, events.NodeReady, "shout")
	changed := writeFile(t, "hello.yaml", strings.Replace(mustRead(t, helloFile), "type: transform", "type: transform\n    queue: gpu", 1))
	for _, args := range [][]string{{run}, {"-all", "-status", "completed"}} {
		r = weft(t, append([]string{"replay", "-graph", changed, "-nats", url}, args...)...)
		if r.code != 1 {
			t.Errorf("replay %v on a changed graph: exit %d, want 1\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		wantContains(t, "replay", r.stdout, fmt.Sprintf("%s: DIFFERS at event %d (seq %d)", run, ready.Position, ready.Seq),
			"recorded: node.ready shout/1 attempt 1", `/queue: "default" -> "gpu"`)
		wantContains(t, "replay stderr", r.stderr, "1 of 1 runs decide differently")
	}
	r = weft(t, "replay", "-graph", changed, "-all", "-status", "running", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, "no runs of graph hello to check") {
		t.Errorf("replay -all -status running with none running: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A run in flight: the approval waits with a deadline a day after it
	// began to wait; a graph with a shorter timeout decides otherwise.
	waiting := strings.TrimSpace(weft(t, "run", approvalFile, "-nats", url).stdout)
	waitState(t, cl, waiting, func(st *projection.State) bool {
		return st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting
	})
	hour := writeFile(t, "approval.yaml", strings.Replace(mustRead(t, approvalFile), "timeout: 24h", "timeout: 1h", 1))
	r = weft(t, "replay", "-graph", approvalFile, "-all", "-status", "running", "-nats", url)
	if r.code != 0 || !strings.Contains(r.stdout, waiting+": ok") || strings.Contains(r.stdout, run) {
		t.Errorf("replay -all -status running on the run's graph: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = weft(t, "replay", "-graph", hour, "-all", "-status", "running", "-nats", url)
	if r.code != 1 {
		t.Errorf("replay -all -status running on a shorter timeout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "replay of the waiting run", r.stdout, waiting+": DIFFERS at event", "recorded: node.waiting approve/1 for signal", "/deadline:")

	invalid := writeFile(t, "invalid.yaml", "name: x\nnodes: [{id: a, type: echo, retries: 3}]\nedges: []\n")
	r = weft(t, "replay", "-graph", invalid, run, "-nats", url)
	if r.code != 1 || !strings.Contains(r.stderr, invalid) {
		t.Errorf("replay with an invalid graph: exit %d, stderr %q", r.code, r.stderr)
	}
}

// weft events -follow tails a run until it ends.
func TestEventsFollow(t *testing.T) {
	url, cl := engine(t)
	run := strings.TrimSpace(weft(t, "run", approvalFile, "-nats", url).stdout)
	waitState(t, cl, run, func(st *projection.State) bool {
		return st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting
	})
	got := make(chan result, 1)
	go func() { got <- weft(t, "events", run, "-follow", "-nats", url) }()
	select {
	case r := <-got:
		t.Fatalf("events -follow returned while the run waits: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	default:
	}
	if r := weft(t, "signal", run, "approve", "-data", `{"approved":true}`, "-nats", url); r.code != 0 {
		t.Fatalf("signal: %s%s", r.stdout, r.stderr)
	}
	select {
	case r := <-got:
		if r.code != 0 {
			t.Fatalf("events -follow: exit %d\n%s", r.code, r.stderr)
		}
		wantContains(t, "events -follow", r.stdout, "POS", "run.started", "node.waiting", "signal.received", "run.completed")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.Contains(lines[len(lines)-1], "run.completed") {
			t.Errorf("events -follow did not stop at the run's end: last line %q", lines[len(lines)-1])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("events -follow did not return after the run ended")
	}
}

// run -wait shows progress on a terminal, and only the outcome when piped.
func TestRunWaitProgress(t *testing.T) {
	url, _ := engine(t)
	r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Ada"}`, "-wait")
	if strings.Contains(r.stdout, "\r") || strings.Contains(r.stdout, "nodes done") {
		t.Errorf("piped run -wait prints progress:\n%q", r.stdout)
	}
	restore := cli.SetTerminal(true)
	defer restore()
	r = weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Ada"}`, "-wait")
	if r.code != 0 {
		t.Fatalf("run -wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "run -wait on a terminal", r.stdout, "\r\x1b[K", "2 of 2 nodes done", "completed")
}

// weft fork and weft reset refuse a fork whose state the graph cannot run,
// as the engine would, one problem a line (node, field, what), and write
// nothing: here the graph given turns the human node the run waits at
// into a worker node.
func TestForkReportsAStateTheGraphCannotRun(t *testing.T) {
	url, cl := engine(t)
	run := strings.TrimSpace(weft(t, "run", approvalFile, "-nats", url).stdout)
	waitState(t, cl, run, func(st *projection.State) bool {
		return st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting
	})
	rows := eventRows(t, url, run)
	worker := writeFile(t, "worker.yaml", strings.NewReplacer("type: human\n    config: {timeout: 24h}", "type: echo", "timeout: true", `when: "false"`).Replace(mustRead(t, approvalFile)))
	before := streamLast(t, cl, run)
	for _, args := range [][]string{
		{"fork", run, "-at", strconv.Itoa(len(rows)), "-graph", worker},
		{"reset", run, "-at", strconv.Itoa(len(rows)), "-graph", worker},
	} {
		r := weft(t, append(args, "-nats", url)...)
		want := "invalid fork state, 1 problem(s); nothing was written:\n  node \"approve\": waitingFor: \"signal\": a worker node never waits for that"
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("weft %s: exit %d, stderr %q; want 1 and %q", args[0], r.code, r.stderr, want)
		}
	}
	if after := streamLast(t, cl, run); after != before {
		t.Errorf("refused forks wrote to the stream: last sequence %d -> %d", before, after)
	}
	if st, err := cl.Get(context.Background(), run); err != nil || st.Status != projection.RunRunning {
		t.Errorf("a refused reset ended the run: %v %+v", err, st)
	}
}
