package decider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// typical is a node as graphs write them: a config, JSON schemas for its
// input and output, declared inputs and outputs, a retry policy; the run
// has an invocation state.
const typical = `
name: typical
nodes:
  - id: summarise
    type: llm
    inputs: [document, style]
    outputs: [summary]
    timeout: 2m
    retry: {maxAttempts: 3}
    config:
      model: a-large-model
      system: "You summarise documents for busy readers. Keep the summary under 120 words, in the style asked for, and never invent facts that the document does not state."
      prompt: "Summarise in the {{.state.style}} style: {{.state.document}}"
      temperature: 0.2
      max_tokens: 400
    inputSchema:
      type: object
      required: [document, style]
      properties:
        document: {type: string, minLength: 1}
        style: {type: string, enum: [plain, bullets, executive]}
    outputSchema:
      type: object
      required: [summary]
      properties:
        summary: {type: string}
        tokens: {type: integer, minimum: 0}
edges:
  - {from: START, to: summarise}
  - {from: summarise, to: END}
`

const typicalInput = `{"document":"Weft is an event-sourced workflow engine on NATS JetStream.","style":"plain"}`
const typicalInvocation = `{"tenant":"acme","user":"u-123","locale":"en-GB","traceTag":"nightly-batch"}`

// TestWorkItemIsSmall measures the node-ready event of a typical node, and
// checks it no longer copies what the run's start holds (config, schemas,
// invocation state).
func TestWorkItemIsSmall(t *testing.T) {
	var ready *events.NodeReadyData
	sm := newSim(t, typical, typicalInput, typicalInvocation, func(r *events.NodeReadyData) events.Payload {
		ready = r
		return echo(r)
	})
	if s := sm.run(); s.Status != projection.RunCompleted {
		t.Fatalf("status %s; log: %s", s.Status, sm.types())
	}
	if ready == nil {
		t.Fatal("no work item")
	}
	if ready.Config != nil || ready.InputSchema != nil || ready.OutputSchema != nil || ready.Invocation != nil {
		t.Fatalf("work item copies the run's start: %+v", ready)
	}
	small, _ := json.Marshal(ready)
	// What the same item weighed when it carried everything.
	n, _ := sm.g.Node("summarise")
	full := *ready
	full.Config, full.InputSchema, full.OutputSchema = n.Config, n.InputSchema, n.OutputSchema
	full.Invocation = json.RawMessage(typicalInvocation)
	big, _ := json.Marshal(&full)
	t.Logf("node-ready data of a typical node: %d bytes by reference, %d bytes self-contained", len(small), len(big))
	// Beyond the state view, a work item is a few hundred bytes whatever
	// the node's config and schemas weigh.
	if rest := len(small) - len(ready.Input); rest > 400 {
		t.Errorf("node-ready data is %d bytes besides its input: %s", rest, small)
	}
}

// TestWorkItemTooLargeFailsRun: a node whose view of the state does not fit
// in a work item fails the run, naming the node, the size and the limit.
func TestWorkItemTooLargeFailsRun(t *testing.T) {
	huge := `{"blob":"` + strings.Repeat("x", decider.MaxWorkItemData) + `"}`
	sm := newSim(t, `
name: big
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`, huge, "", echo)
	s := sm.run()
	if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailurePayloadTooLarge {
		t.Fatalf("status %s, error %+v; log: %s", s.Status, s.Error, sm.types())
	}
	for _, want := range []string{`node "a"`, "bytes of state", "the limit is"} {
		if !strings.Contains(s.Error.Message, want) {
			t.Errorf("failure %q does not say %q", s.Error.Message, want)
		}
	}
	if got, want := sm.types(), "run.started node.routed:START run.failed:a"; got != want {
		t.Errorf("log %s, want %s", got, want)
	}
}
