package nodeworker_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/nodeworker"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	exit(code)
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "unknown flag", args: []string{"-bogus"}, wantErr: "flag provided but not defined: -bogus"},
		{name: "bad duration", args: []string{"-ack-wait", "soon"}, wantErr: "-ack-wait"},
		{name: "positional", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "all problems at once", args: []string{"-queues", "a.b", "-concurrency", "0", "-log-level", "loud", "-storage", "disk"},
			wantErr: `"a.b" is not a valid queue name`},
		{name: "env", env: map[string]string{"WEFT_CONCURRENCY": "many"}, wantErr: "env WEFT_CONCURRENCY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			err := nodeworker.Run(context.Background(), tt.args, &bytes.Buffer{}, &stderr)
			if !errors.Is(err, nodeworker.ErrUsage) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run = %v, want a usage error containing %q", err, tt.wantErr)
			}
		})
	}
	// Validate reports every problem, not the first.
	err := nodeworker.Run(context.Background(), []string{"-queues", "a.b", "-concurrency", "0", "-log-level", "loud", "-storage", "disk"}, &bytes.Buffer{}, &bytes.Buffer{})
	for _, want := range []string{"-queues", "-concurrency", "-log-level", "-storage"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if err := nodeworker.Run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Errorf("-h: %v", err)
	}
}

// The daemon in process: it serves the built-in executors and stops cleanly.
func TestRunServes(t *testing.T) {
	srv, st := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.Buffer
	done := make(chan error, 1)
	go func() {
		done <- nodeworker.Run(ctx, []string{"-nats", srv.ClientURL(), "-name", "inproc", "-log-level", "debug"}, &bytes.Buffer{}, &stderr)
	}()
	waitPulling(t, st, 1)
	run := events.NewRunID()
	publish(t, st, run, "t", "transform", `{"set": {"y": "state.x * 2"}}`, `{"x": 21}`)
	evs := waitCount(t, st, run, events.NodeInvoked, 1, 10*time.Second)
	for _, e := range evs {
		if e.Type == events.NodeInvoked {
			p, _ := e.Payload()
			if got := string(p.(*events.NodeInvokedData).Updates["y"]); got != "42" {
				t.Errorf("update y = %s, want 42", got)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"msg":"worker stopped"`) {
		t.Errorf("no JSON log of the stop:\n%s", stderr.String())
	}
}

func setup(t *testing.T) (*server.Server, events.Store) {
	t.Helper()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := events.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workqueue.EnsureQueue(ctx, js, st.StreamName(), worker.DefaultQueue, workqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	return srv, st
}

// publish appends a node-ready work item.
func publish(t *testing.T, st events.Store, run, node, typ, config, input string) {
	t.Helper()
	ref := events.NodeRef{Node: node, Iteration: 1}
	d := &events.NodeReadyData{NodeRef: ref, Attempt: 1, Type: typ, Queue: worker.DefaultQueue, IdempotencyKey: eventlog.IdempotencyKey(run, ref, 1)}
	if config != "" {
		d.Config = []byte(config)
	}
	if input != "" {
		d.Input = []byte(input)
	}
	ev, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, ref.Key(), "1"), time.Time{}, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Append(context.Background(), st, run, events.AnySeq, ev); err != nil {
		t.Fatal(err)
	}
}

// waitPulling waits until n workers have pull requests parked on the
// default queue.
func waitPulling(t *testing.T, st events.Store, n int) {
	t.Helper()
	waitUntil(t, strconv.Itoa(n)+" workers pulling", 20*time.Second, func() bool {
		c, err := eventlog.JetStream(st).Consumer(context.Background(), st.StreamName(), workqueue.QueueConsumer(worker.DefaultQueue))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumWaiting >= n
	})
}

// waitCount waits until a run's log holds n events of type typ.
func waitCount(t *testing.T, st events.Store, run string, typ events.Type, n int, d time.Duration) []*events.Event {
	t.Helper()
	var evs []*events.Event
	waitUntil(t, strconv.Itoa(n)+" "+string(typ), d, func() bool {
		var err error
		evs, err = st.Read(context.Background(), run, 0, 0)
		if err != nil {
			return false
		}
		return len(filter(evs, typ)) >= n
	})
	return evs
}

func filter(evs []*events.Event, typ events.Type) []*events.Event {
	var out []*events.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		// Polls: cond reads state that changes without an event to wait for.
		time.Sleep(20 * time.Millisecond)
	}
}
