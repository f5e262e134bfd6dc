package weft_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
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
	if len(files) != 8 { // client, coordinator, ui, admin, trigger, serve, two workers
		t.Fatalf("env files %v, want 8", files)
	}
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, info.Mode())
		}
	}
	creds, err := natsconn.ReadCredentials(rolesDir, natsconn.Deployment{Queues: []string{worker.DefaultQueue, "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	password := map[string]string{}
	for _, c := range creds {
		password[c.User.Name] = c.Password
	}
	if nc, err := nats.Connect(eng.URL()); err == nil {
		nc.Close()
		t.Error("a connection without credentials was admitted")
	}
	wuser := natsconn.UserName(natsconn.RoleWorker, worker.DefaultQueue)
	testkit.RefusedPublish(t, eng.URL(), natsconn.Config{User: wuser, Password: password[wuser]}, "weft.r.00.forged.d.completed")

	// Started again with the same directory, the engine keeps the
	// credentials.
	eng.Stop()
	eng = start()
	defer eng.Stop()
	again, err := natsconn.ReadCredentials(rolesDir, natsconn.Deployment{Queues: []string{worker.DefaultQueue, "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again {
		if c.Password != password[c.User.Name] {
			t.Errorf("a restart changed the password of %s", c.User.Name)
		}
	}
	run(eng)
}
