package coordinatord_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinatord"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

const oneNode = `
name: one
nodes:
  - id: a
    type: echo
edges:
  - from: START
    to: a
  - from: a
    to: END
`

// The daemon started before its server waits for it, rides out the
// server's restart and the loss of its consumer, and decides runs before
// and after each.
func TestRunRidesOutAnOutage(t *testing.T) {
	port, dir := testkit.FreePort(t), t.TempDir()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	logs := testkit.NewLogWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- coordinatord.Run(ctx, []string{"-nats", url}, &bytes.Buffer{}, logs)
	}()
	logs.Wait(t, `"msg":"waiting for NATS"`, 30*time.Second)

	srv := testkit.ServerAt(t, port, dir)
	logs.Wait(t, `"msg":"coordinating"`, 30*time.Second)
	st := testkit.OpenStoreRetry(t, srv)
	decides(t, st)

	embedded.Stop(srv)
	srv = testkit.ServerAt(t, port, dir)
	st = testkit.OpenStoreRetry(t, srv)
	decides(t, st)

	// Its consumers deleted under it: they are set up again.
	stream, err := eventlog.JetStream(st).Stream(context.Background(), st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	lister := stream.ConsumerNames(context.Background())
	var names []string
	for name := range lister.Name() {
		names = append(names, name)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "coordinator") {
			if err := eventlog.JetStream(st).DeleteConsumer(context.Background(), st.StreamName(), name); err != nil {
				t.Fatal(err)
			}
		}
	}
	decides(t, st)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v\n%s", err, logs)
	}
}

// decides starts a run and waits for the coordinator's first decision.
func decides(t *testing.T, st events.Store) {
	t.Helper()
	g, err := graph.Parse([]byte(oneNode), "one.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := client.New(st).Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	for {
		evs, err := st.Read(ctx, run, 0, 0)
		if err == nil && len(evs) > 0 && evs[len(evs)-1].Type == events.NodeReady {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no decision for run %s: %v", run, err)
		}
		// Polls: the decision is read from the log, which notifies nobody.
		time.Sleep(20 * time.Millisecond)
	}
}
