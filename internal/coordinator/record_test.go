package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

var record = flag.Bool("record", false, "record event histories of real runs into pkg/projection/testdata/histories")

// recordings are the runs whose histories the projection's golden tests
// replay: each a graph (a file of examples/ or inline YAML), its input and
// invocation, and optionally a signal to send while it waits.
var recordings = []struct {
	name, graph, input, invocation string
	signal                         string // node to signal once it waits
}{
	{name: "hello", graph: "../../examples/hello.yaml", input: `{"name":"Ada"}`},
	{name: "pipeline", graph: "../../examples/pipeline.yaml", input: `{"name":"weft","items":[1,2]}`},
	{name: "premium", graph: "../../examples/premium.yaml", invocation: `{"user_tier":"premium"}`},
	{name: "loop", graph: "../../examples/loop.yaml", input: `{"count":0}`},
	{name: "retry", graph: `
name: retry
nodes:
  - {id: flaky, type: fail, config: {failAttempts: 1, message: "first attempt fails"}, retry: {maxAttempts: 3, initialInterval: 1s}}
  - {id: after, type: echo}
edges:
  - {from: START, to: flaky}
  - {from: flaky, to: after}
  - {from: after, to: END}
`},
	{name: "map", graph: `
name: map
state: {reducers: {seen: append}}
nodes:
  - {id: each, type: transform, map: {over: "state.docs", concurrency: 2}, config: {set: {seen: "local.item"}}}
  - {id: done, type: echo}
edges:
  - {from: START, to: each}
  - {from: each, to: done}
  - {from: done, to: END}
`, input: `{"docs":["a","b","c","d"]}`},
	{name: "join-skip", graph: `
name: joinskip
state: {reducers: {total: sum}}
nodes:
  - {id: split, type: echo}
  - {id: left, type: transform, config: {set: {total: "1"}}}
  - {id: right, type: transform, config: {set: {total: "2"}}}
  - {id: never, type: echo}
  - {id: join, type: echo}
edges:
  - {from: START, to: split}
  - {from: split, to: left}
  - {from: split, to: right}
  - {from: split, to: never, when: "false"}
  - {from: left, to: join}
  - {from: right, to: join}
  - {from: never, to: join}
  - {from: join, to: END}
`},
	{name: "human", graph: `
name: approval
nodes:
  - {id: draft, type: echo}
  - {id: approve, type: human}
  - {id: publish, type: echo}
edges:
  - {from: START, to: draft}
  - {from: draft, to: approve}
  - {from: approve, to: publish}
  - {from: publish, to: END}
`, signal: "approve"},
	{name: "failed", graph: `
name: failing
nodes:
  - {id: bad, type: fail, config: {message: "no such customer", retryable: false, type: NotFound}}
edges:
  - {from: START, to: bad}
  - {from: bad, to: END}
`},
}

// TestRecordHistories records the histories; run with -record.
func TestRecordHistories(t *testing.T) {
	if !*record {
		t.Skip("records golden histories only with -record")
	}
	_, st := natstest.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "worker-1", "default", "cpu")
	dir := filepath.Join("..", "..", "pkg", "projection", "testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range recordings {
		var g *graph.Graph
		var err error
		if filepath.Ext(r.graph) == ".yaml" {
			g, err = graph.LoadFile(r.graph)
		} else {
			g, err = graph.Parse([]byte(r.graph), r.name+".yaml")
		}
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		run := "rec-" + r.name
		p := &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "recorder"}
		if r.input != "" {
			p.Input = json.RawMessage(r.input)
		}
		if r.invocation != "" {
			p.Invocation = json.RawMessage(r.invocation)
		}
		e, _ := events.New(run, run, time.Time{}, p)
		if _, err := st.Append(ctx, run, 0, e); err != nil {
			t.Fatal(err)
		}
		if r.signal != "" {
			waitFor(t, st, run, events.NodeWaiting)
			sig, _ := events.New(run, eventlog.RandomID(), time.Time{}, &events.SignalReceivedData{Node: r.signal, Data: json.RawMessage(`{"approved":true}`), By: "reviewer"})
			if _, err := st.Append(ctx, run, events.AnySeq, sig); err != nil {
				t.Fatal(err)
			}
		}
		waitEnded(t, st, []string{run}, 30*time.Second)
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, r.name+".jsonl"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor waits for the run's first event of type typ: in the log already,
// or appended while it waits.
func waitFor(t *testing.T, st events.Store, run string, typ events.Type) {
	t.Helper()
	msgs := make(chan *nats.Msg, 4096)
	sub, err := eventlog.JetStream(st).Conn().ChanSubscribe(eventlog.RunFilter(run), msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// Subscribed first, so that an event appended after this read is
	// received.
	evs, err := st.Read(context.Background(), run, 0, 0)
	if err != nil && !errors.Is(err, events.ErrRunNotFound) {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == typ {
			return
		}
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-msgs:
			if e := events.DecodeStored(m.Subject, m.Header, m.Data, 0, time.Time{}); e.Type == typ {
				return
			}
		case <-timeout:
			t.Fatalf("run %s: no %s event", run, typ)
		}
	}
}
