package security

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestRolesSurviveKills is the reliability drill under the roles: runs go
// on while the worker and the coordinator are killed (SIGKILL) and
// replaced, each with its role's credentials, and every run completes
// exactly once. Redelivered work, re-appended outcomes and decisions, and
// duplicate acks (confirmed on the leader) all happen with no more rights
// than the roles have.
func TestRolesSurviveKills(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	coord := startProcess(t, "coordinator", filepath.Join(dir, "coordinator-1.log"), s.roleEnv(userCoord), "-nats", s.url)
	w1 := startProcess(t, "nodeworker", filepath.Join(dir, "worker-1.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w1", "-ack-wait", "2s")
	startProcess(t, "nodeworker", filepath.Join(dir, "worker-gpu.log"), s.roleEnv(userWorkerB()), "-nats", s.url, "-queues", queueB, "-name", "wgpu")

	cl := client.New(openStore(t, s.connect(t, userClient)))
	g, err := graph.Parse([]byte(`
name: slowchain
nodes:
  - {id: a, type: sleep, config: {duration: 40ms}}
  - {id: b, type: echo, queue: gpu}
  - {id: c, type: sleep, config: {duration: 40ms}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`), "slowchain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var runs []string
	for range 20 {
		run, err := cl.Start(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	// Lets the worker take work, so that the kill lands mid-node: there is no one event that says so.
	time.Sleep(300 * time.Millisecond)
	_ = w1.Process.Signal(syscall.SIGKILL)
	_ = coord.Process.Signal(syscall.SIGKILL)
	_, _ = w1.Process.Wait()
	_, _ = coord.Process.Wait()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator-2.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker-2.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w2")

	admin := openStore(t, s.connect(t, userAdmin))
	testkit.WaitEnded(t, admin, runs, 90*time.Second)
	testkit.CheckExactlyOnce(t, admin, runs, 3)
	testkit.CheckNoViolations(t, dir)
}

// TestDaemonsWaitForSetup: under the roles only the admin creates the
// stream and the buckets, so a coordinator or a worker started first
// waits for them (its create is refused, and it tries again) and works
// once 'weft roles -setup' has run.
func TestDaemonsWaitForSetup(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker-gpu.log"), s.roleEnv(userWorkerB()), "-nats", s.url, "-queues", queueB)
	// Lets the daemons start and fail to connect before the setup: a duration, not an event.
	time.Sleep(3 * time.Second)
	s.setup(t)
	cl := client.New(openStore(t, s.connect(t, userClient)))
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := cl.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Wait(ctx, run); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("run after a late set-up: %+v %v", st, err)
	}
}
