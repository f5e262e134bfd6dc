package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/worker"
)

// TestDevRoles: 'weft dev -roles' prints where the client's credentials
// are and how to use them; 'weft run' with them in the environment runs a
// graph to completion; the server admits no one without credentials, and
// refuses a worker's decision; no password shows in any output.
func TestDevRoles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := t.TempDir()
	var stdout, stderr testkit.Buffer
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "-roles", "-port", "-1", "-data", data, "-ui", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`at (nats://127\.0\.0\.1:\d+)`)
	envRE := regexp.MustCompile(`as the client: set -a; \. (\S+); set \+a`)
	var url, clientEnv string
	// Polls: weft dev prints its address and env file when ready, to a buffer that notifies nobody.
	for deadline := time.Now().Add(60 * time.Second); clientEnv == ""; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		if m := envRE.FindStringSubmatch(stdout.String()); m != nil {
			clientEnv = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev -roles did not start:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	rolesDir := filepath.Join(data, "roles")
	if clientEnv != filepath.Join(rolesDir, "weft-client.env") {
		t.Errorf("client credentials printed at %s, want in %s", clientEnv, rolesDir)
	}
	creds, err := natsconn.ReadCredentials(rolesDir, natsconn.Deployment{Queues: []string{worker.DefaultQueue}})
	if err != nil {
		t.Fatal(err)
	}
	password := map[string]string{}
	for _, c := range creds {
		password[c.User.Name] = c.Password
		path := filepath.Join(rolesDir, c.User.Name+".env")
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, info.Mode())
		}
	}

	// As the printed line says: the client's file in the environment.
	if r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Roles"}`, "-wait"); r.code == 0 {
		t.Fatalf("a run without credentials was let through: %s", r.stdout)
	}
	b, err := os.ReadFile(clientEnv)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			t.Setenv(k, v)
		}
	}
	r := weft(t, "run", helloFile, "-nats", url, "-input", `{"name":"Roles"}`, "-wait")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, Roles!") {
		t.Fatalf("run as the client against dev -roles: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The UI reads as the client: the run, its log, the workers, with no
	// permission refused (checked on stderr below).
	uiRE := regexp.MustCompile(`UI: (http://\S+)`)
	m := uiRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("dev -roles did not say where the UI is:\n%s", stdout.String())
	}
	var list struct {
		Runs []struct{ RunID string }
	}
	var run struct {
		State struct{ Status string }
	}
	if code := getJSON(t, m[1]+"/api/runs", &list); code != 200 || len(list.Runs) != 1 {
		t.Errorf("the UI's run list under the roles: %d %+v", code, list)
	} else if code := getJSON(t, m[1]+"/api/runs/"+list.Runs[0].RunID, &run); code != 200 || run.State.Status != "completed" {
		t.Errorf("the UI's run under the roles: %d %+v", code, run)
	}
	var workers struct {
		Queues []struct{ Waiting *int }
		Note   string
	}
	if code := getJSON(t, m[1]+"/api/workers", &workers); code != 200 || len(workers.Queues) == 0 || workers.Queues[0].Waiting != nil || workers.Note == "" {
		t.Errorf("the UI's workers under the roles: %d %+v", code, workers)
	}

	wuser := natsconn.UserName(natsconn.RoleWorker, worker.DefaultQueue)
	testkit.RefusedPublish(t, url, natsconn.Config{User: wuser, Password: password[wuser]}, "weft.r.00.forged.d.completed")

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("dev: exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	for _, out := range []string{stdout.String(), stderr.String(), r.stdout, r.stderr} {
		for _, pw := range password {
			if strings.Contains(out, pw) {
				t.Fatalf("a password in the output:\n%s", out)
			}
		}
	}
	if strings.Contains(stderr.String(), "anonymous connections") {
		t.Errorf("dev -roles warns about anonymous connections, which it refuses:\n%s", stderr.String())
	}
	if s := strings.ToLower(stderr.String()); strings.Contains(s, "permissions violation") {
		t.Errorf("dev's own parts were refused a permission:\n%s", stderr.String())
	}
}

// TestDemoRoles: 'weft demo -roles' runs its graph to completion with each
// part as its role, and no part is refused a permission.
func TestDemoRoles(t *testing.T) {
	r := weft(t, "demo", "-roles", "-v", helloFile, "-data", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo -roles: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "demo -roles", r.stdout, "run.completed", `"greeting": "Hello, Ada!"`)
	if strings.Contains(strings.ToLower(r.stderr), "permissions violation") {
		t.Errorf("a part was refused a permission:\n%s", r.stderr)
	}
}

// TestRolesSetupLeaseTTL: a lease duration the coordinators refuse is a
// usage error before anything connects.
func TestRolesSetupLeaseTTL(t *testing.T) {
	r := weft(t, "roles", "-setup", "-lease-ttl", "10ms", "-nats", "nats://127.0.0.1:1")
	if r.code != 2 || !strings.Contains(r.stderr, "-lease-ttl: want at least 1s, got 10ms") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}
