package decider_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
)

// A step passes over the nodes it found with nothing due and that no
// decision touched since (settled): the decisions, their order and their
// data are those of a step that looks at every node each time, for graphs
// whose decisions touch other nodes than their own (fan-out and joins of
// every kind, back edges, maps, retries, skips, an iteration cap).
func TestSettledStepsDecideAsAFullScan(t *testing.T) {
	flaky := func(r *events.NodeReadyData) events.Payload {
		if r.Attempt == 1 && (r.Node == "b" || r.Item != nil && *r.Item == 1) {
			return &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Error: events.Failure{Type: "Flaky", Message: "once", Retryable: true}}
		}
		if r.Item != nil {
			return &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Output: json.RawMessage(`"ok"`)}
		}
		return echo(r)
	}
	graphs := map[string]string{
		"joins": `
name: joins
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo, retry: {maxAttempts: 2, initialInterval: 1s}}
  - {id: c, type: echo, when: "false"}
  - {id: any, type: echo, join: any}
  - {id: two, type: echo, join: 2}
  - {id: all, type: echo}
edges:
  - {from: START, to: a}
  - {from: START, to: b}
  - {from: START, to: c}
  - {from: a, to: any}
  - {from: b, to: any}
  - {from: c, to: any}
  - {from: a, to: two}
  - {from: b, to: two}
  - {from: c, to: two}
  - {from: any, to: all}
  - {from: two, to: all}
  - {from: all, to: END}
`,
		"loop": `
name: loop
nodes:
  - {id: z, type: echo}
  - {id: inc, type: echo, maxIterations: 4}
  - {id: j, type: echo}
edges:
  - {from: START, to: inc}
  - {from: START, to: z}
  - {from: inc, to: inc, when: "true"}
  - {from: inc, to: j}
  - {from: z, to: j}
  - {from: j, to: END}
`,
		"stuck": `
name: stuck
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
  - {id: j, type: echo}
edges:
  - {from: START, to: a}
  - {from: START, to: b}
  - {from: a, to: j}
  - {from: b, to: j}
  - {from: j, to: a, when: "true"}
  - {from: j, to: END, when: "false"}
`,
		"map": `
name: mapper
nodes:
  - {id: pre, type: echo}
  - {id: each, type: echo, map: {over: "state.xs", concurrency: 2}, retry: {maxAttempts: 2, initialInterval: 1s}}
  - {id: after, type: echo}
edges:
  - {from: START, to: each}
  - {from: START, to: pre}
  - {from: each, to: after}
  - {from: pre, to: after}
  - {from: after, to: END}
`,
	}
	for name, src := range graphs {
		t.Run(name, func(t *testing.T) {
			settled := newSim(t, src, `{"xs":[1,2,3]}`, "", flaky)
			settled.run()
			restore := decider.SetFullScan(true)
			full := newSim(t, src, `{"xs":[1,2,3]}`, "", flaky)
			full.run()
			restore()
			if len(settled.log) < 8 {
				t.Fatalf("only %d events: %s", len(settled.log), settled.types())
			}
			if settled.types() != full.types() {
				t.Fatalf("settled steps decided\n%s\na full scan\n%s", settled.types(), full.types())
			}
			for i, e := range settled.log {
				if f := full.log[i]; e.ID != f.ID || !bytes.Equal(e.Data, f.Data) {
					t.Fatalf("event %d: %s %s, a full scan %s %s", i, e.ID, e.Data, f.ID, f.Data)
				}
			}
		})
	}
}
