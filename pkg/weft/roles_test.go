package weft_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// TestRolesEmbedded: under WithRoles, runs over two queues complete (the
// coordinator, a worker per queue and the client each connected as their
// role), the credentials are in the roles directory with mode 0600 and
// survive a restart, the server admits no one without them, and a
// worker's credentials are refused a decision.
func TestRolesEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rolesDir := filepath.Join(dir, "roles")
	start := func() *weft.Engine {
		t.Helper()
		eng, err := weft.Start(ctx, weft.Embedded(filepath.Join(dir, "js")), weft.WithRoles(rolesDir),
			weft.WithQueues(worker.DefaultQueue, "gpu"), weft.WithNode("score", worker.NodeFunc(score)))
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := start()
	defer eng.Stop()
	g, err := graph.Parse([]byte(`
name: twoqueues
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo, queue: gpu}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: END}
`), "twoqueues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(eng *weft.Engine) {
		t.Helper()
		id, err := eng.Client().Start(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := eng.Client().Wait(ctx, id); err != nil || st.Status != projection.RunCompleted {
			t.Fatalf("run under the roles: %+v, %v", st, err)
		}
	}
	run(eng)

	files, _ := filepath.Glob(filepath.Join(rolesDir, "*.env"))
	if len(files) != 6 { // client, coordinator, ui, admin, two workers
		t.Fatalf("env files %v, want 6", files)
	}
	for _, f := range files {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, info.Mode(), err)
		}
	}
	wenv := readEnvFile(t, filepath.Join(rolesDir, "weft-worker-default.env"))

	if nc, err := nats.Connect(eng.URL()); err == nil {
		nc.Close()
		t.Error("a connection without credentials was admitted")
	}
	refused := make(chan error, 16)
	nc, err := nats.Connect(eng.URL(), nats.UserInfo(wenv["WEFT_NATS_USER"], wenv["WEFT_NATS_PASSWORD"]),
		nats.CustomInboxPrefix("_INBOX_"+wenv["WEFT_NATS_USER"]),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
	if err != nil {
		t.Fatalf("connecting as the worker: %v", err)
	}
	defer nc.Close()
	const decision = "weft.r.00.forged.d.completed"
	if err := nc.Publish(decision, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), decision) {
			t.Fatalf("the worker's decision: %v, want a permissions violation on %s", err, decision)
		}
	case <-ctx.Done():
		t.Fatal("the worker's decision was not refused")
	}

	// Started again with the same directory, the engine keeps the
	// credentials.
	eng.Stop()
	eng = start()
	defer eng.Stop()
	if again := readEnvFile(t, filepath.Join(rolesDir, "weft-worker-default.env")); again["WEFT_NATS_PASSWORD"] != wenv["WEFT_NATS_PASSWORD"] {
		t.Error("a restart changed the worker's password")
	}
	run(eng)
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
