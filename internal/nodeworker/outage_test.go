package nodeworker_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/nodeworker"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// The daemon started before its server waits for it, and rides out the
// server's restart: it serves work before and after.
func TestRunRidesOutAnOutage(t *testing.T) {
	port, dir := testkit.FreePort(t), t.TempDir()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	logs := testkit.NewLogWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nodeworker.Run(ctx, []string{"-nats", url, "-name", "patient"}, &bytes.Buffer{}, logs)
	}()
	logs.Wait(t, `"msg":"waiting for NATS"`, 30*time.Second)

	srv := testkit.ServerAt(t, port, dir)
	logs.Wait(t, `"msg":"worker running"`, 30*time.Second)
	st := testkit.OpenStoreRetry(t, srv)
	serves(t, st)

	embedded.Stop(srv)
	srv = testkit.ServerAt(t, port, dir)
	st = testkit.OpenStoreRetry(t, srv)
	serves(t, st)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v\n%s", err, logs)
	}
	embedded.Stop(srv)
	if n := strings.Count(logs.String(), `"msg":"waiting for NATS"`); n > 3 {
		t.Errorf("the wait was logged %d times, not once per distinct error:\n%s", n, logs)
	}
}

// A stream Weft cannot run with stops the daemon at once, naming the fix.
func TestRunRefusesAnUnsafeStream(t *testing.T) {
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	sc := eventlog.OpenStreamConfig()
	sc.AllowAtomicPublish = false
	if _, err := js.CreateStream(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := nodeworker.Run(ctx, []string{"-nats", srv.ClientURL()}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "allow_atomic") || !strings.Contains(err.Error(), "weft admin apply") {
		t.Fatalf("Run = %v, want the unsafe setting and its fix", err)
	}
}

// serves checks that a worker takes a node-ready item and reports it.
func serves(t *testing.T, st events.Store) {
	t.Helper()
	run := events.NewRunID()
	publish(t, st, run, "t", "transform", `{"set": {"y": "state.x * 2"}}`, `{"x": 21}`)
	waitCount(t, st, run, events.NodeInvoked, 1, 30*time.Second)
}

// A server that refuses the daemon's credentials is a configuration error:
// the daemon exits, it does not wait.
func TestRunExitsOnRefusedCredentials(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, Username: "weft", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { embedded.Stop(s) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = nodeworker.Run(ctx, []string{"-nats", s.ClientURL()}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || ctx.Err() != nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("Run = %v, want an authorization error", err)
	}
}
