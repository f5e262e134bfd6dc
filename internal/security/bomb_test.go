package security

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestGraphBombRefused: a client writes a run-started whose graph is a
// 300 KB chain of nested subgraphs (the shape that ran a coordinator out
// of memory: compiling it cost the square of its size). pkg/client would
// not send it (it compiles the graph first), so the attacker publishes
// the event itself, as the client role may. The coordinator process
// rejects the graph by its limits at once and fails the run, saying why;
// it stays up and runs the next run.
func TestGraphBombRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")

	var b strings.Builder
	var level func(d int)
	level = func(d int) {
		fmt.Fprintf(&b, `{"name":"g%d","nodes":[{"id":"n","type":"echo"},{"id":"s","type":"subgraph","config":{"graph":"g%d"}}],`, d, d+1)
		fmt.Fprintf(&b, `"edges":[{"from":"START","to":"n"},{"from":"n","to":"s"},{"from":"s","to":"END"}],"graphs":{"g%d":`, d+1)
		if d < 1500 {
			level(d + 1)
		} else {
			fmt.Fprintf(&b, `{"name":"leaf","nodes":[{"id":"n","type":"echo"}],"edges":[{"from":"START","to":"n"},{"from":"n","to":"END"}]}`)
		}
		b.WriteString(`}}`)
	}
	level(0)
	bomb := json.RawMessage(b.String())
	if len(bomb) < 300<<10 {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	st := openStore(t, s.connect(t, userClient))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "bomb", GraphDigest: events.GraphDigest(bomb), Graph: bomb})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if _, err := eventlog.Append(ctx, st, run, 0, e); err != nil {
		t.Fatal(err)
	}
	cl := client.New(st)
	got, err := cl.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(sent)
	if got.Status != projection.RunFailed || got.Error == nil || got.Error.Type != events.FailureInvalidGraph ||
		!strings.Contains(got.Error.Message, "nesting deeper than the limit") {
		t.Fatalf("run %s: %+v", got.Status, got.Error)
	}
	if took > 10*time.Second {
		t.Errorf("the bomb took %v to fail", took)
	}
	// The coordinator is still there.
	next, err := cl.Start(ctx, mustParse(t, chainA))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Wait(ctx, next); err != nil || got.Status != projection.RunCompleted {
		t.Fatalf("the next run: %+v %v", got, err)
	}
	testkit.CheckNoViolations(t, dir)
}

// chainA is a run of the default queue only.
const chainA = `
name: small
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

func mustParse(t *testing.T, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), "graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}
