package telemetry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// TestLogsExplainARun runs a graph with a coordinator and a worker logging
// at debug level, and finds in the logs, under the keys of package
// logattr, every decision of the run's log (its type, node and the event
// it was decided on) and every step of every work item, each with the
// run's trace id.
func TestLogsExplainARun(t *testing.T) {
	installTracing(t)
	var out testkit.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))

	_, store := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- coordinator.New(store, coordinator.WithLogger(log)).Run(ctx) }()
	w, err := worker.New(store, worker.WithLogger(log), worker.WithDrainTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	go func() { done <- w.Run(ctx) }()
	caller := startAndWait(t, store, loadGraph(t, "testdata/branch-retry-join.yaml"))
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}

	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		lines = append(lines, m)
	}
	str := func(m map[string]any, k string) string {
		switch v := m[k].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
	var run string
	for _, m := range lines {
		if m["msg"] == "decided" {
			run = str(m, logattr.RunID)
			break
		}
	}
	if run == "" {
		t.Fatalf("no decision logged:\n%s", out.String())
	}
	history, err := client.New(store).History(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	trace := caller.TraceID().String()
	decisions := 0
	for _, e := range history {
		if !e.IsDecision() {
			continue
		}
		decisions++
		found := false
		for _, m := range lines {
			if m["msg"] == "decided" && str(m, logattr.RunID) == run && str(m, logattr.Decision) == telemetry.EventName(e.Type) &&
				str(m, logattr.NodeID) == e.NodeID && str(m, logattr.Cause) != "" && str(m, logattr.CauseSeq) != "" && str(m, logattr.TraceID) == trace && str(m, logattr.Coordinator) != "" {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("decision %s of node %q (seq %d) is not in the logs", e.Type, e.NodeID, e.Seq)
		}
	}
	if decisions < 6 {
		t.Errorf("the run has %d decisions; want the graph's ready, retry and end decisions", decisions)
	}
	// Every work item's steps: took, ran, reported, acked, for each of the
	// five attempts (fork, flaky twice, steady, merge).
	for _, step := range []string{"took", "ran", "reported", "acked"} {
		n := 0
		for _, m := range lines {
			if m["msg"] == step && str(m, logattr.Step) == step && str(m, logattr.RunID) == run && str(m, logattr.NodeID) != "" &&
				str(m, logattr.Attempt) != "" && str(m, logattr.TraceID) == trace {
				n++
			}
		}
		if n != 5 {
			t.Errorf("step %q: %d lines with run, node, attempt and trace, want 5", step, n)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", out.String())
	}
}
