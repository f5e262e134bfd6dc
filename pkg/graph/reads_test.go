package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/graphrt"
)

const readsYAML = `name: reads
nodes:
  - {id: draft, type: echo}
  - id: approve
    type: human
    outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}, note: {type: string}}}
  - {id: publish, type: echo}
  - {id: open, type: echo, outputSchema: {type: object, properties: {a: {}}, additionalProperties: true}}
edges:
  - {from: START, to: draft, when: "output.go == true"}
  - {from: draft, to: approve}
  - {from: approve, to: publish, when: "output.approve"}
  - {from: approve, to: open, when: "has(output.reason) && output.reason == 'x' || output.approved"}
  - {from: approve, to: END, when: "!output.approved", onMissing: "false"}
  - {from: open, to: END, when: "output.anything"}
  - {from: publish, to: END}
`

// weft validate's check: conditions reading fields nothing provides are
// reported with the edge (1-based), the field and the fix; guarded reads
// and open schemas are not.
func TestCheckConditionReads(t *testing.T) {
	g, err := Parse([]byte(readsYAML), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = CheckConditionReads(g)
	if !errors.Is(err, ErrInvalidGraph) {
		t.Fatalf("got %v, want problems", err)
	}
	for _, want := range []string{
		`edge 1 (START -> draft): field "when": reads output.go, but edges from START have no output`,
		`edge 3 (approve -> publish): field "when": reads output.approve, but node "approve" provides no field "approve": its outputSchema lists "approved", "note" (did you mean "approved"?); add it to the schema, or guard it with has(output.approve) && ...`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n != 2 {
		t.Errorf("%d problems, want 2:\n%v", n, err)
	}
}

// At run time a condition that reads a missing key fails with the edge
// (1-based, said once), the field and the fix; onMissing: false takes it
// as false.
func TestMissingKeyAtRunTime(t *testing.T) {
	g, err := Parse([]byte(readsYAML), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ev := graphrt.Of(g)
	_, err = ev.EdgeTaken(2, DefaultAction, graphrt.Env{Output: map[string]any{"approved": true}})
	want := `edge 3 (approve -> publish): CEL "output.approve" reads output.approve, which is missing (no key "approve"): write has(output.approve) && ... to test it first, or set onMissing: false on the edge to take a missing key as false`
	if !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "edge ") != 2 {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	taken, err := ev.EdgeTaken(4, DefaultAction, graphrt.Env{Output: map[string]any{}})
	if err != nil || taken {
		t.Fatalf("onMissing false: taken %v, %v", taken, err)
	}
	if _, err := Parse([]byte(strings.Replace(readsYAML, `onMissing: "false"`, `onMissing: "no"`, 1)), "x.yaml"); err == nil ||
		!strings.Contains(err.Error(), `edge 5 (approve -> END): field "onMissing": want "false" or "fail", got "no"`) {
		t.Fatalf("bad onMissing: %v", err)
	}
}
