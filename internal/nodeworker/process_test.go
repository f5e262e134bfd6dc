package nodeworker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

// binary builds cmd/nodeworker once per test run.
func binary(t *testing.T) string {
	t.Helper()
	return filepath.Join(testkit.Build(t, "github.com/weft-dev/weft/cmd/nodeworker"), "nodeworker")
}

func cleanupBinary() { testkit.Cleanup() }

func exit(code int) { os.Exit(code) }

// proc is a worker daemon process.
type proc struct {
	cmd    *exec.Cmd
	stderr *testkit.Buffer
	done   chan struct{}
	err    error
}

func startProc(t *testing.T, srv *server.Server, name string, args ...string) *proc {
	t.Helper()
	args = append([]string{"-nats", srv.ClientURL(), "-name", name, "-log-level", "debug"}, args...)
	p := &proc{cmd: exec.Command(binary(t), args...), stderr: &testkit.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("process did not exit within %s", d)
		return nil
	}
}

func payloads[P events.Payload](t *testing.T, evs []*events.Event) []P {
	t.Helper()
	var out []P
	for _, e := range evs {
		if p, err := e.Payload(); err == nil {
			if v, ok := p.(P); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// Three worker processes share one queue: each takes part, and each item is
// invoked once.
func TestProcessesShareQueue(t *testing.T) {
	srv, st := setup(t)
	names := []string{"w1", "w2", "w3"}
	for _, n := range names {
		startProc(t, srv, n, "-concurrency", "4")
	}
	waitPulling(t, st, len(names))

	const items = 60
	run := events.NewRunID()
	for i := range items {
		publish(t, st, run, fmt.Sprintf("n%d", i), "sleep", `{"duration": "50ms"}`, "")
	}
	evs := waitCount(t, st, run, events.NodeInvoked, items, 30*time.Second)

	byWorker := map[string]int{}
	for _, inv := range payloads[*events.NodeInvokingData](t, evs) {
		byWorker[inv.Worker]++
	}
	for _, n := range names {
		if byWorker[n] == 0 {
			t.Errorf("worker %s took no work (%v)", n, byWorker)
		}
	}
	invoked := map[string]int{}
	for _, inv := range payloads[*events.NodeInvokedData](t, evs) {
		invoked[inv.Key()]++
	}
	if len(invoked) != items {
		t.Errorf("%d items invoked, want %d", len(invoked), items)
	}
	for k, n := range invoked {
		if n != 1 {
			t.Errorf("%s invoked %d times", k, n)
		}
	}
}

// A worker killed mid-node: the item is redelivered to another worker once
// the ack wait passes, and invoked once.
func TestProcessKilledMidNode(t *testing.T) {
	srv, st := setup(t)
	setAckWait(t, st, 2*time.Second)
	first := startProc(t, srv, "doomed", "-ack-wait", "2s")
	waitPulling(t, st, 1)
	run := events.NewRunID()
	publish(t, st, run, "slow", "sleep", `{"duration": "3s"}`, "")
	waitCount(t, st, run, events.NodeInvoking, 1, 10*time.Second)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.wait(t, 5*time.Second)

	startProc(t, srv, "heir", "-ack-wait", "2s")
	evs := waitCount(t, st, run, events.NodeInvoked, 1, 20*time.Second)
	invoking := payloads[*events.NodeInvokingData](t, evs)
	if len(invoking) != 2 || invoking[0].Worker != "doomed" || invoking[1].Worker != "heir" || invoking[1].Delivery != 2 {
		t.Errorf("invoking = %+v, want doomed's then heir's with delivery 2", invoking)
	}
	// Nothing more arrives: the item was acknowledged.
	time.Sleep(500 * time.Millisecond)
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(filter(evs, events.NodeInvoked)); n != 1 {
		t.Errorf("%d invoked events, want 1", n)
	}
	if n := len(filter(evs, events.NodeFailed)); n != 0 {
		t.Errorf("%d failed events, want 0", n)
	}
}

// SIGTERM drains: the node in flight finishes and is recorded, and the
// process exits 0.
func TestProcessDrainsOnSIGTERM(t *testing.T) {
	srv, st := setup(t)
	p := startProc(t, srv, "drainer")
	waitPulling(t, st, 1)
	run := events.NewRunID()
	publish(t, st, run, "slow", "sleep", `{"duration": "1s"}`, "")
	waitCount(t, st, run, events.NodeInvoking, 1, 10*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.stderr.String())
	}
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(filter(evs, events.NodeInvoked)); n != 1 {
		t.Fatalf("%d invoked events after the drain, want 1", n)
	}
}

// main maps usage errors to status 2 and other errors to 1.
func TestProcessExitCodes(t *testing.T) {
	bin := binary(t)
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"-bogus"}, 2},
		{[]string{"-concurrency", "0"}, 2},
		{[]string{"-h"}, 0},
	} {
		err := exec.Command(bin, tt.args...).Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.want {
			t.Errorf("nodeworker %v: exit %d, want %d", tt.args, code, tt.want)
		}
	}
}

// A server that cannot be reached is waited for, not an exit; SIGTERM
// still stops the process cleanly.
func TestProcessWaitsForItsServer(t *testing.T) {
	logs := testkit.NewLogWatch()
	cmd := exec.Command(binary(t), "-nats", fmt.Sprintf("nats://127.0.0.1:%d", testkit.FreePort(t)))
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	logs.Wait(t, `"msg":"waiting for NATS"`, 30*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", logs)
	}
}

// setAckWait changes the default queue's ack wait on purpose, as 'weft
// admin apply -ack-wait' does: the queue exists, and a worker's -ack-wait
// only applies to a queue it creates.
func setAckWait(t *testing.T, st events.Store, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	c, err := eventlog.JetStream(st).Consumer(ctx, st.StreamName(), workqueue.QueueConsumer(worker.DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	cc.AckWait = d
	if _, err := eventlog.JetStream(st).UpdateConsumer(ctx, st.StreamName(), cc); err != nil {
		t.Fatal(err)
	}
}
