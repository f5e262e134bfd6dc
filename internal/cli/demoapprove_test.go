package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
)

const agentFile = "../../examples/agent.yaml"

// noteSteps are the results of the note tool's steps in demo's JSON
// output (the last message of each tool step of tool "note"), and the
// kinds of all the run's steps.
func noteSteps(t *testing.T, stdout string) (results []string, kinds []string, answer string) {
	t.Helper()
	var doc struct {
		Status string `json:"status"`
		Events []struct {
			Type string `json:"type"`
			Data struct {
				Kind string `json:"kind"`
				Data struct {
					Tool     string `json:"tool"`
					Messages []struct {
						Content string `json:"content"`
					} `json:"messages"`
				} `json:"data"`
			} `json:"data"`
		} `json:"events"`
		State struct {
			Artifacts struct {
				Report struct {
					Content string `json:"content"`
				} `json:"report"`
			} `json:"artifacts"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("demo's JSON: %v\n%s", err, stdout)
	}
	if doc.Status != "completed" {
		t.Fatalf("demo: run %s, want completed\n%s", doc.Status, stdout)
	}
	for _, e := range doc.Events {
		if !strings.HasSuffix(e.Type, ".node.step.v1") {
			continue
		}
		kinds = append(kinds, e.Data.Kind)
		if ms := e.Data.Data.Messages; e.Data.Kind == "tool" && e.Data.Data.Tool == "note" && len(ms) > 0 {
			results = append(results, ms[len(ms)-1].Content)
		}
	}
	return results, kinds, doc.State.Artifacts.Report.Content
}

// TestDemoApproveYes: 'weft demo -approve yes examples/agent.yaml' answers
// the note tool's approval without asking, says so, and the tool runs
// once, after a recorded approval; the model's answer has its result.
func TestDemoApproveYes(t *testing.T) {
	r := weft(t, "demo", "-o", "json", "-approve", "yes", agentFile, "-data", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "demo's stderr", r.stderr, `node research: tool "note" (call fake_call_1) awaits approval, arguments {"text":"Research Ada."}`,
		"-approve yes: answering approved=true", "approval of call fake_call_1: approved=true, signalled")
	results, kinds, answer := noteSteps(t, r.stdout)
	if want := []string{`{"text":"Research Ada."}`}; !slices.Equal(results, want) {
		t.Errorf("note's results: %q, want %q (the tool run once)", results, want)
	}
	if want := []string{"model", "tool", "model", "await", "approval", "tool", "model"}; !slices.Equal(kinds, want) {
		t.Errorf("steps: %q, want %q", kinds, want)
	}
	if !strings.HasPrefix(answer, "[fake model] ") || !strings.Contains(answer, `{"text":"Research Ada."}`) {
		t.Errorf("answer %q: want the fake model's, with note's result", answer)
	}
}

// TestDemoApproveNo: with -approve no the call is rejected, the note tool
// never runs, and the model reads the rejection and still answers.
func TestDemoApproveNo(t *testing.T) {
	r := weft(t, "demo", "-o", "json", "-approve", "no", agentFile, "-data", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "demo's stderr", r.stderr, "-approve no: answering approved=false")
	results, kinds, answer := noteSteps(t, r.stdout)
	rejected := `error: a person rejected this call of tool "note": rejected by weft demo -approve no`
	if want := []string{rejected}; !slices.Equal(results, want) {
		t.Errorf("note's results: %q, want only the rejection %q", results, want)
	}
	for _, k := range kinds {
		if k == "approval" {
			t.Errorf("steps %q: an approval recorded for a rejected call", kinds)
		}
	}
	if !strings.HasPrefix(answer, "[fake model] ") || !strings.Contains(answer, rejected) {
		t.Errorf("answer %q: want the fake model's, having read the rejection", answer)
	}
}

// TestDemoApproveBad: a value of -approve other than yes or no is a usage
// error, before anything starts.
func TestDemoApproveBad(t *testing.T) {
	r := weft(t, "demo", "-approve", "maybe", agentFile, "-data", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, `-approve: want yes or no, got "maybe"`) || strings.Contains(r.stdout, "embedded NATS") {
		t.Errorf("demo -approve maybe: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestDemoApprovePrompt: at a terminal (faked: stdin taken for one), demo
// shows the call and asks; "y" approves it, anything else rejects it.
func TestDemoApprovePrompt(t *testing.T) {
	defer cli.SetStdinTerminal(true)()
	for _, tc := range []struct {
		in, want string
	}{
		{"y\n", `{"text":"Research Ada."}`},
		{"\n", `error: a person rejected this call of tool "note": rejected at weft demo's prompt`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var stdout, stderr bytes.Buffer
		code := cli.Main(ctx, []string{"demo", "-o", "json", agentFile, "-data", t.TempDir()}, strings.NewReader(tc.in), &stdout, &stderr)
		cancel()
		if code != 0 {
			t.Fatalf("demo answering %q: exit %d\n%s\n%s", tc.in, code, stdout.String(), stderr.String())
		}
		wantContains(t, "demo's stderr", stderr.String(), `node research: tool "note" (call fake_call_1) awaits approval, arguments {"text":"Research Ada."}`, "approve? [y/N] ")
		if results, _, _ := noteSteps(t, stdout.String()); !slices.Equal(results, []string{tc.want}) {
			t.Errorf("answering %q: note's results %q, want %q", tc.in, results, tc.want)
		}
	}
}

// TestDemoApprovePrintsSignal: with no terminal and no -approve, demo
// prints the weft signal command (with its NATS URL) and waits; running
// that command lets the run complete.
func TestDemoApprovePrintsSignal(t *testing.T) {
	defer cli.SetStdinTerminal(false)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &watched{want: regexp.MustCompile(`weft signal (\S+) research -nats (\S+) -data '(\{[^']*\})'`), found: make(chan []string, 1)}
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"demo", agentFile, "-data", t.TempDir()}, strings.NewReader(""), out, &stderr)
	}()
	var m []string
	select {
	case m = <-out.found:
	case code := <-done:
		t.Fatalf("demo ended (exit %d) before printing the signal command\n%s\n%s", code, out, stderr.String())
	case <-ctx.Done():
		t.Fatalf("no signal command printed\n%s", out)
	}
	if m[3] != `{"approved": true, "call": "fake_call_1"}` {
		t.Errorf("printed data %s", m[3])
	}
	if r := weft(t, "signal", m[1], "research", "-nats", m[2], "-data", m[3]); r.code != 0 {
		t.Fatalf("the printed signal command: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if code := <-done; code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, stderr.String())
	}
	wantContains(t, "demo", out.String(), "step 5 approval", "step 6 tool", "run.completed")
}

// watched is a writer that sends the first match of want in what was
// written, once.
type watched struct {
	mu    sync.Mutex
	b     bytes.Buffer
	want  *regexp.Regexp
	found chan []string
	sent  bool
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if m := w.want.FindStringSubmatch(w.b.String()); m != nil && !w.sent {
		w.sent = true
		w.found <- m
	}
	return n, err
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDemoRolesPrintsSignalWithCreds: under -roles, the printed command
// reads the client's credentials first (kept on disk, mode 0600, in the
// data directory), and run as printed it is admitted and the run
// completes; without them the server refuses it.
func TestDemoRolesPrintsSignalWithCreds(t *testing.T) {
	defer cli.SetStdinTerminal(false)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &watched{want: regexp.MustCompile(`set -a; \. (\S+); set \+a; weft signal (\S+) research -nats (\S+) -data '(\{[^']*\})'`), found: make(chan []string, 1)}
	var stderr bytes.Buffer
	done := make(chan int, 1)
	data := t.TempDir()
	go func() {
		done <- cli.Main(ctx, []string{"demo", "-roles", agentFile, "-data", data}, strings.NewReader(""), out, &stderr)
	}()
	var m []string
	select {
	case m = <-out.found:
	case code := <-done:
		t.Fatalf("demo -roles ended (exit %d) before printing the signal command\n%s\n%s", code, out, stderr.String())
	case <-ctx.Done():
		t.Fatalf("no signal command with credentials printed\n%s", out)
	}
	if !strings.HasPrefix(m[1], data) {
		t.Errorf("credentials %s, want them in the data directory %s", m[1], data)
	}
	if r := weft(t, "signal", m[2], "research", "-nats", m[3], "-data", m[4]); r.code == 0 {
		t.Fatal("a signal without credentials was let through")
	}
	b, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			t.Setenv(k, v)
		}
	}
	if r := weft(t, "signal", m[2], "research", "-nats", m[3], "-data", m[4]); r.code != 0 {
		t.Fatalf("the printed signal command: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if code := <-done; code != 0 {
		t.Fatalf("demo -roles: exit %d\n%s\n%s", code, out, stderr.String())
	}
	wantContains(t, "demo -roles", out.String(), "step 6 tool", "run.completed")
}
