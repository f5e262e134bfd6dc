package builtin_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/internal/worker/builtin"
	"github.com/weft-dev/weft/pkg/events"
)

// storeJournal records steps as worker.RecordStep does (one append of a
// node-step event to the run's subjects in JetStream) and reads the last
// one as worker.LastStep does (one direct get), for measuring outside a
// worker.
type storeJournal struct {
	st  events.Store
	run string
	n   int
}

func (j *storeJournal) Last(ctx context.Context, in *worker.Input) (*builtin.AgentStep, error) {
	m, err := eventlog.LastOn(ctx, j.st, eventlog.StepSubject(j.run, worker.DefaultQueue, "n1/"+strconv.Itoa(j.n)))
	if err != nil || m == nil {
		return nil, err
	}
	return nil, nil // a fresh activation each op: nothing to resume
}

func (j *storeJournal) Record(ctx context.Context, in *worker.Input, s *builtin.AgentStep) error {
	raw, _ := json.Marshal(s)
	ref := events.NodeRef{Node: "n1", Iteration: j.n}
	ev, err := events.New(j.run, eventlog.DecisionID(j.run, events.NodeStep, ref.Key(), "1", "1", strconv.Itoa(s.Step)), time.Time{},
		&events.NodeStepData{NodeRef: ref, Attempt: 1, Step: s.Step, Kind: s.Kind, Data: raw})
	if err != nil {
		return err
	}
	ev.Queue = worker.DefaultQueue
	_, err = j.st.Append(ctx, j.run, events.AnySeq, ev)
	return err
}

// BenchmarkAgentTurn measures what Weft adds to a model turn, against the
// fake OpenAI server on 127.0.0.1 (whose own latency is the floor): the
// llm node's one SDK call, then a two-turn agent (a tool call, then the
// answer: three steps) with no journal and with the JetStream journal.
// ns/turn is per model call.
func BenchmarkAgentTurn(b *testing.B) {
	script := []fakeTurn{{calls: []fakeCall{{"a", "lookup", `{"q":"x"}`}}}, {text: "done"}}
	b.Run("llm call", func(b *testing.B) {
		_, url := newFakeModel(b, false, fakeTurn{text: "done"})
		llm := &builtin.LLM{Endpoints: map[string]builtin.LLMEndpoint{"m": {URL: url}}}
		in := input("llm", map[string]any{"model": "m", "prompt": "hi"})
		b.ResetTimer()
		for b.Loop() {
			if _, err := llm.Execute(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/turn")
	})
	run := func(b *testing.B, j func(i int) builtin.Journal) {
		fake, url := newFakeModel(b, false, script...)
		fake.byTurn = true
		in := agentInput(agentConfig(nil))
		i := 0
		b.ResetTimer()
		for b.Loop() {
			i++
			if _, err := newAgent(url, false, &countingTool{}, j(i)).Execute(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/turn")
	}
	b.Run("agent, memory journal", func(b *testing.B) {
		run(b, func(int) builtin.Journal { return &memJournal{} })
	})
	b.Run("agent, JetStream journal", func(b *testing.B) {
		_, st := testkit.Store(b)
		r := events.NewRunID()
		run(b, func(i int) builtin.Journal { return &storeJournal{st: st, run: r, n: i} })
	})
}
