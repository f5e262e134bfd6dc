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
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

var (
	record     = flag.Bool("record", false, "record event histories of real runs into pkg/projection/testdata/histories")
	recordOnly = flag.String("record-only", "", "with -record, record only the recording of this name")
)

// recordings are the runs whose histories the projection's golden tests
// replay: each a graph (a file of examples/ or inline YAML), its input and
// invocation, and optionally a signal to send while it waits.
var recordings = []struct {
	name, graph, input, invocation string
	signal                         string // node to signal once it waits
	// signals are signal payloads (events.SignalReceivedData as JSON)
	// sent in order once signal waits, instead of the default one.
	signals []string
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
	{name: "human-refused", graph: `
name: approval
nodes:
  - {id: draft, type: echo}
  - id: approve
    type: human
    outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}, amount: {type: number}}}
    config: {checks: [{expr: "!output.approved || output.amount <= 1000", message: "an approval is for at most 1000"}]}
  - {id: publish, type: echo}
edges:
  - {from: START, to: draft}
  - {from: draft, to: approve}
  - {from: approve, to: publish, when: "output.approved"}
  - {from: publish, to: END}
`, signal: "approve", signals: []string{
		`{"node":"approve","iteration":1}`,
		`{"node":"approve","iteration":1,"data":{"approved":"yes"}}`,
		`{"node":"approve","iteration":1,"data":{"approved":true,"amount":5000}}`,
		`{"node":"draft","data":{"approved":true}}`,
		`{"node":"approve","iteration":2,"data":{"approved":true}}`,
		`{"node":"approve","iteration":1,"data":{"approved":true,"amount":10}}`,
		`{"node":"approve","iteration":1,"data":{"approved":true,"amount":20}}`,
	}},
	{name: "wait", graph: `
name: waits
nodes:
  - {id: draft, type: echo}
  - {id: nap, type: wait, config: {duration: 1s}}
  - {id: due, type: wait, config: {until: "state.due"}}
  - {id: publish, type: echo}
edges:
  - {from: START, to: draft}
  - {from: draft, to: nap}
  - {from: nap, to: due}
  - {from: due, to: publish}
  - {from: publish, to: END}
`, input: `{"due":"2020-01-01T00:00:00Z"}`},
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
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "worker-1", "default", "cpu")
	dir := filepath.Join("..", "..", "pkg", "projection", "testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range recordings {
		if *recordOnly != "" && r.name != *recordOnly {
			continue
		}
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
			sigs := r.signals
			if sigs == nil {
				sigs = []string{`{"node":"` + r.signal + `","data":{"approved":true}}`}
			}
			for _, raw := range sigs {
				var d events.SignalReceivedData
				if err := json.Unmarshal([]byte(raw), &d); err != nil {
					t.Fatal(err)
				}
				d.By = "reviewer"
				sig, _ := events.New(run, eventlog.RandomID(), time.Time{}, &d)
				if _, err := st.Append(ctx, run, events.AnySeq, sig); err != nil {
					t.Fatal(err)
				}
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
