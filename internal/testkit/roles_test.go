package testkit_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

// TestCheckNoViolations: a nats-server process under the roles logs a
// refused publish, and CheckNoViolations reports it, naming the log; a
// permitted publish leaves nothing to report.
func TestCheckNoViolations(t *testing.T) {
	bin := testkit.Build(t, "github.com/nats-io/nats-server/v2")
	roles := testkit.NewRoles(t, natsconn.Deployment{Queues: []string{"default"}})
	dir := t.TempDir()
	port := testkit.FreePort(t)
	conf := filepath.Join(dir, "server.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\n", port) + roles.Include(t, dir)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "nats.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "nats-server"), "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })

	cfg := roles.Config(t, natsconn.UserName(natsconn.RoleClient, ""))
	nc, err := cfg.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Allowed: a client event.
	if err := nc.Publish("weft.r.00.run1.c.signal", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	testkit.CheckNoViolations(rec, logPath, filepath.Join(dir, "missing.log"))
	if len(rec.errs) > 0 {
		t.Fatalf("a permitted publish reported: %q", rec.errs)
	}
	// Refused: a decision.
	if err := nc.Publish("weft.r.00.run1.d.completed", nil); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte("Publish Violation")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged the refusal:\n%s", b)
		}
		// Polls: the server's log file is written without notice.
		time.Sleep(20 * time.Millisecond)
	}
	testkit.CheckNoViolations(rec, dir)
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "nats.log") || !strings.Contains(rec.errs[0], "weft.r.00.run1.d.completed") {
		t.Fatalf("reported: %q", rec.errs)
	}
}
