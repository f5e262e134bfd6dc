package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const acceptYAML = `
name: accept
nodes:
  - id: draft
    type: echo
  - id: approve
    type: human
    outputSchema:
      type: object
      required: [approved]
      properties:
        approved: {type: boolean}
        amount: {type: number}
    config:
      checks:
        - {expr: "!output.approved || output.amount <= 1000", message: "an approval is for at most 1000"}
  - id: publish
    type: noop
edges:
  - {from: START, to: draft}
  - {from: draft, to: approve}
  - {from: approve, to: publish, when: "output.approved"}
  - {from: approve, to: END, when: "!output.approved"}
  - {from: publish, to: END}
`

// Signals that mean nothing are refused at the client with why, and the
// run goes on as if none was sent; one that fits answers the node.
func TestSignalsRefused(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, acceptYAML)
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "approve", 1)
	for _, tc := range []struct {
		name, node string
		data       any
		want       string
	}{
		{"not a human node", "draft", map[string]any{"approved": true}, `node "draft" is a "echo" node, and only human nodes wait for signals`},
		{"not reached", "publish", nil, `node "publish" is a "noop" node`},
		{"no data", "approve", nil, `the signal has no data, and its outputSchema requires "approved"`},
		{"missing field", "approve", map[string]any{"ok": true}, `does not fit its outputSchema: missing field "approved"`},
		{"wrong type", "approve", map[string]any{"approved": "yes"}, `/approved: got string, want boolean`},
		{"check fails", "approve", map[string]any{"approved": true, "amount": 5000}, `an approval is for at most 1000`},
	} {
		err := c.Signal(ctx, run, tc.node, tc.data)
		if !errors.Is(err, client.ErrSignalRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrSignalRefused with %q", tc.name, err, tc.want)
		}
	}
	st, err := c.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if n := signalCount(t, c, run); n != 0 || st.Nodes["approve"].Status != projection.NodeWaiting {
		t.Fatalf("after refusals: %d signals in the log, approve %s", n, st.Nodes["approve"].Status)
	}
	if err := c.Signal(ctx, run, "approve", map[string]any{"approved": true, "amount": 10}); err != nil {
		t.Fatal(err)
	}
	st, err = c.Wait(ctx, run)
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("run %v, %v", st.Status, err)
	}
	// A node that waited and was answered waits no more; nor does an
	// ended run.
	if err := c.Signal(ctx, run, "approve", map[string]any{"approved": false}); !errors.Is(err, client.ErrRunEnded) {
		t.Fatalf("signal to an ended run: %v, want ErrRunEnded", err)
	}
}

// A signal that reaches the log without the client's checks (another
// client, or one that raced the node's end) is recorded as refused: the
// fold counts it refused and the run is not moved by it.
func TestSignalRefusedInTheLog(t *testing.T) {
	c, st := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, acceptYAML)
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "approve", 1)
	for i, d := range []*events.SignalReceivedData{
		{Node: "approve", Iteration: 1},                                   // no data
		{Node: "approve", Iteration: 1, Data: json.RawMessage(`{"x":1}`)}, // no approved
		{Node: "draft", Data: json.RawMessage(`{}`)},                      // not a human node
		{Node: "approve", Iteration: 2, Data: json.RawMessage(`{"approved":false}`)},
	} {
		ev, err := events.New(run, run+":forged:"+string(rune('a'+i)), time.Time{}, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, run, events.AnySeq, ev); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the coordinator folds them
	s, err := c.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != projection.RunRunning || s.Nodes["approve"].Status != projection.NodeWaiting || s.Stats.Refused != 4 {
		t.Fatalf("after 4 refused signals: run %s, approve %s, refused %d", s.Status, s.Nodes["approve"].Status, s.Stats.Refused)
	}
	if err := c.Signal(ctx, run, "approve", map[string]any{"approved": false}); err != nil {
		t.Fatal(err)
	}
	if s, err = c.Wait(ctx, run); err != nil || s.Status != projection.RunCompleted || s.Stats.Refused != 4 {
		t.Fatalf("run %s refused %d, %v", s.Status, s.Stats.Refused, err)
	}
}

// A condition that reads a missing key fails the run with an error that
// names the edge once (1-based), the field and the fix.
func TestMissingKeyFailsWithTheField(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, `
name: loose
nodes:
  - {id: approve, type: human}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END, when: "output.approved"}
`)
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "approve", 1)
	if err := c.Signal(ctx, run, "approve", nil); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	want := `edge 2 (approve -> END): CEL "output.approved" reads output.approved, which is missing (no key "approved"): write has(output.approved) && ... to test it first, or set onMissing: false`
	if st.Status != projection.RunFailed || st.Error == nil || st.Error.Type != events.FailureCondition || !strings.HasPrefix(st.Error.Message, want) {
		t.Fatalf("run %s, error %+v\nwant %s", st.Status, st.Error, want)
	}
}
