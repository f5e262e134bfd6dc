package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
)

// background runs a long-lived command line (ui, dev) and returns its
// stdout lines as they come, and a function that stops it and returns
// its error.
func background(t *testing.T, args ...string) (<-chan string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cli.Run(ctx, args, strings.NewReader(""), pw, io.Discard)
		_ = pw.CloseWithError(errors.New("command ended"))
		done <- err
	}()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	stopped := false
	var result error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			for range lines {
			}
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return lines, stop
}

// uiURL reads lines until the one that says where the UI is.
func uiURL(t *testing.T, lines <-chan string, stop func() error) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the command ended without serving the UI: %v", stop())
			}
			if u, found := strings.CutPrefix(line, "UI: "); found {
				return strings.Fields(u)[0]
			}
		case <-timeout:
			t.Fatal("the command did not say where the UI is within a minute")
		}
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

// TestUICommand: 'weft ui' serves the API over a NATS server's log, with
// the timeline's summaries of 'weft events'.
func TestUICommand(t *testing.T) {
	natsURL, cl := engine(t)
	g, err := graph.LoadFile(helloFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := cl.Start(ctx, g, client.WithInput(map[string]any{"name": "UI"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	lines, stop := background(t, "ui", "-nats", natsURL, "-addr", "127.0.0.1:0", "-read-only", "-trace-url", "http://jaeger.test/trace/{traceId}")
	base := uiURL(t, lines, stop)
	var cfg struct {
		ReadOnly bool
		TraceURL string
	}
	if code := getJSON(t, base+"/api/config", &cfg); code != http.StatusOK || !cfg.ReadOnly || cfg.TraceURL != "http://jaeger.test/trace/{traceId}" {
		t.Errorf("/api/config: %d %+v", code, cfg)
	}
	var evs struct {
		Events []struct{ Kind, Summary string }
	}
	if code := getJSON(t, base+"/api/runs/"+id+"/events", &evs); code != http.StatusOK || len(evs.Events) == 0 {
		t.Fatalf("events of %s: %d, %d events", id, code, len(evs.Events))
	}
	if first := evs.Events[0]; first.Kind != "run.started" || !strings.Contains(first.Summary, "graph hello") {
		t.Errorf("first event %+v, want run.started summarised as 'weft events' does", first)
	}
	if err := stop(); err != nil {
		t.Errorf("weft ui: %v", err)
	}
}

// TestUICommandCredentials: the UI's user and password come from the
// environment, and another address than loopback needs them.
func TestUICommandCredentials(t *testing.T) {
	natsURL, cl := engine(t)
	r := weft(t, "ui", "-nats", natsURL, "-addr", "0.0.0.0:0")
	if r.code != 2 || !strings.Contains(r.stderr, "-ui-user") || !strings.Contains(r.stderr, "not a loopback address") {
		t.Errorf("weft ui -addr 0.0.0.0:0: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv("WEFT_UI_ADDR", "0.0.0.0:0")
	if r := weft(t, "ui", "-nats", natsURL); r.code != 2 || !strings.Contains(r.stderr, "-ui-user") {
		t.Errorf("WEFT_UI_ADDR=0.0.0.0:0: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv("WEFT_UI_ADDR", "127.0.0.1:0")
	t.Setenv("WEFT_UI_USER", "ada")
	if r := weft(t, "ui", "-nats", natsURL); r.code != 2 || !strings.Contains(r.stderr, "both or neither") {
		t.Errorf("a user without a password: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv("WEFT_UI_PASSWORD", "s3cret")
	if r := weft(t, "ui", "-nats", natsURL); r.code != 2 || !strings.Contains(r.stderr, "6 characters, want at least 12") {
		t.Errorf("a password of 6 characters: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv("WEFT_UI_PASSWORD", "correct-horse-staple")
	lines, stop := background(t, "ui", "-nats", natsURL)
	base := uiURL(t, lines, stop)
	if code := getJSON(t, base+"/api/config", nil); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/config", nil)
	req.SetBasicAuth("ada", "correct-horse-staple")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with credentials: %d", resp.StatusCode)
	}

	// An action is recorded as the UI's user's.
	g, err := graph.LoadFile("../../examples/approval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := cl.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/api/runs/"+id+"/cancel", strings.NewReader(`{"reason":"from the UI"}`))
	req.SetBasicAuth("ada", "correct-horse-staple")
	req.Header.Set(ui.ActionHeader, "1")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	st, err := cl.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Cancel == nil || st.Cancel.By != "ada via weft ui" {
		t.Errorf("cancel request %+v, want it by ada via weft ui", st.Cancel)
	}
}

// TestUIHashPassword: 'weft ui hash-password' reads a password from its
// input and prints the password file's line; 'weft ui -password-file'
// asks for that user and password; a short password, a file that is not
// one and a file with a plain password are refused by name.
func TestUIHashPassword(t *testing.T) {
	hash := func(input string, args ...string) result {
		t.Helper()
		var stdout, stderr strings.Builder
		code := cli.Main(context.Background(), append([]string{"ui", "hash-password"}, args...), strings.NewReader(input), &stdout, &stderr)
		return result{stdout.String(), stderr.String(), code}
	}
	const password = "correct-horse-staple"
	r := hash(password+"\n", "-user", "ada", "-cost", "10")
	user, h, ok := strings.Cut(strings.TrimSpace(r.stdout), ":")
	if r.code != 0 || !ok || user != "ada" || bcrypt.CompareHashAndPassword([]byte(h), []byte(password)) != nil {
		t.Fatalf("hash-password: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != 10 {
		t.Errorf("cost %d, want 10", cost)
	}
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Error("hash-password printed the password")
	}
	for _, tt := range []struct {
		name, input string
		args        []string
		code        int
		want        string
	}{
		{"a short password", "s3cret\n", []string{"-user", "ada"}, 2, "6 characters, want at least 12"},
		{"no user", password, nil, 2, "-user"},
		{"no password", "", []string{"-user", "ada"}, 1, "no password"},
		{"a cheap cost", password, []string{"-user", "ada", "-cost", "4"}, 2, "cost 4"},
	} {
		if r := hash(tt.input, tt.args...); r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit %d\n%s", tt.name, r.code, r.stderr)
		}
	}

	if r := weft(t, "help", "ui", "hash-password"); r.code != 0 || !strings.Contains(r.stdout, "USER:BCRYPT-HASH") || !strings.Contains(r.stdout, "-cost") {
		t.Errorf("weft help ui hash-password: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	natsURL, _ := engine(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "ui.passwd")
	if err := os.WriteFile(file, []byte("# weft ui\n"+r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "plain.passwd")
	if err := os.WriteFile(bad, []byte("ada:"+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := weft(t, "ui", "-nats", natsURL, "-password-file", bad); r.code != 2 || !strings.Contains(r.stderr, bad+":1: not a bcrypt hash") || strings.Contains(r.stderr, password) {
		t.Errorf("a file with a plain password: exit %d\n%s", r.code, r.stderr)
	}
	if r := weft(t, "ui", "-nats", natsURL, "-password-file", file, "-ui-user", "bob"); r.code != 2 || !strings.Contains(r.stderr, "not both") {
		t.Errorf("a password file and a user: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv("WEFT_UI_PASSWORD_FILE", file)
	lines, stop := background(t, "ui", "-nats", natsURL, "-addr", "127.0.0.1:0")
	base := uiURL(t, lines, stop)
	if code := getJSON(t, base+"/api/config", nil); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	for _, pw := range []string{password, password} { // the second from the check's cache
		req, _ := http.NewRequest(http.MethodGet, base+"/api/config", nil)
		req.SetBasicAuth("ada", pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("with the file's credentials: %d", resp.StatusCode)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("weft ui: %v", err)
	}
	t.Setenv("WEFT_UI_PASSWORD_FILE", filepath.Join(dir, "missing"))
	if r := weft(t, "dev", "-port", "-1", "-data", t.TempDir(), "-ui", "127.0.0.1:0"); r.code != 2 || !strings.Contains(r.stderr, "WEFT_UI_PASSWORD_FILE") {
		t.Errorf("weft dev with a missing password file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDevUI: 'weft dev' serves the UI and prints its address; a port in
// use is a clear error.
func TestDevUI(t *testing.T) {
	lines, stop := background(t, "dev", "-port", "-1", "-data", t.TempDir(), "-ui", "127.0.0.1:0")
	base := uiURL(t, lines, stop)
	var list struct {
		Runs   []any
		Counts map[string]int
	}
	if code := getJSON(t, base+"/api/runs", &list); code != http.StatusOK || list.Runs == nil || len(list.Counts) == 0 {
		t.Errorf("GET /api/runs from weft dev: %d %+v", code, list)
	}
	if err := stop(); err != nil {
		t.Errorf("weft dev: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := weft(t, "dev", "-port", "-1", "-data", t.TempDir(), "-ui", l.Addr().String())
	if r.code == 0 || !strings.Contains(r.stderr, "-ui") || !strings.Contains(r.stderr, "in use") {
		t.Errorf("weft dev -ui on a taken port: exit %d\n%s", r.code, r.stderr)
	}
	if r := weft(t, "dev", "-port", "-1", "-data", t.TempDir(), "-ui", "0.0.0.0:0"); r.code != 2 || !strings.Contains(r.stderr, "WEFT_UI_USER") {
		t.Errorf("weft dev -ui 0.0.0.0:0: exit %d\n%s", r.code, r.stderr)
	}
}

// setEnvFile sets the variables of a <user>.env file for the test.
func setEnvFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			t.Setenv(k, v)
		}
	}
}

// TestUIUnderUIRole: 'weft ui' with the credentials of Weft's ui role
// (read only) shows runs, their logs and their live streams; an action
// is refused with a message that says why.
func TestUIUnderUIRole(t *testing.T) {
	data := t.TempDir()
	lines, stop := background(t, "dev", "-roles", "-port", "-1", "-data", data, "-ui", "off")
	var natsURL string
	for natsURL == "" {
		line, ok := <-lines
		if !ok {
			t.Fatalf("dev -roles ended: %v", stop())
		}
		if _, rest, found := strings.Cut(line, "NATS with JetStream at "); found {
			natsURL = strings.Fields(rest)[0]
			natsURL = strings.TrimSuffix(natsURL, ",")
		}
	}
	go func() {
		for range lines {
		}
	}()
	roles := filepath.Join(data, "roles")
	setEnvFile(t, filepath.Join(roles, "weft-client.env"))
	r := weft(t, "run", helloFile, "-nats", natsURL, "-input", `{"name":"Role"}`, "-wait")
	if r.code != 0 {
		t.Fatalf("run as the client: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stdout)[0]
	approval := weft(t, "run", "../../examples/approval.yaml", "-nats", natsURL)
	if approval.code != 0 {
		t.Fatalf("run approval as the client: exit %d\n%s", approval.code, approval.stderr)
	}
	waiting := strings.TrimSpace(approval.stdout)

	setEnvFile(t, filepath.Join(roles, "weft-ui.env"))
	uiLines, uiStop := background(t, "ui", "-nats", natsURL, "-addr", "127.0.0.1:0")
	base := uiURL(t, uiLines, uiStop)
	var run struct{ State struct{ Status string } }
	if code := getJSON(t, base+"/api/runs/"+id, &run); code != http.StatusOK || run.State.Status != "completed" {
		t.Errorf("run %s as the ui role: %d %+v", id, code, run)
	}
	// Polls: the approval run's read-model entry, which the list reads, is
	// written by the coordinator after its first events and is no event
	// to wait for.
	var list struct{ Runs []struct{ RunID string } }
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list.Runs = nil
		code := getJSON(t, base+"/api/runs", &list)
		if code == http.StatusOK && len(list.Runs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs as the ui role: %d %+v, want the two runs", code, list)
		}
	}
	// The workers page counts the work waiting on each queue: the ui
	// role may list the queues' consumers.
	var workers struct {
		Queues []struct {
			Name    string
			Waiting *uint64
		}
		Note string
	}
	if code := getJSON(t, base+"/api/workers", &workers); code != http.StatusOK || workers.Note != "" || len(workers.Queues) == 0 {
		t.Errorf("workers as the ui role: %d %+v", code, workers)
	}
	for _, q := range workers.Queues {
		if q.Waiting == nil {
			t.Errorf("workers as the ui role: queue %s has no waiting count", q.Name)
		}
	}
	resp, err := http.Get(base + "/api/live/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "event: end") {
		t.Errorf("live events as the ui role: %d\n%s", resp.StatusCode, b)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/runs/"+waiting+"/cancel", strings.NewReader(`{}`))
	req.Header.Set(ui.ActionHeader, "1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "-read-only") {
		t.Errorf("cancel as the ui role: %d %s, want 503 saying the role may not act", resp.StatusCode, b)
	}
}
