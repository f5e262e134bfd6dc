package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// An update returns its verdict synchronously: refused (recorded in the
// log as refused, the run unmoved) when the node does not wait or the data
// does not fit; accepted with the node's output and the state after it;
// and the same id again returns the same verdict, writing nothing, while
// the same id with other data is refused.
func TestUpdateVerdicts(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, acceptYAML)
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "approve", 1)

	// Refused by the fold, recorded in the log.
	for _, tc := range []struct {
		name, id, node string
		data           any
		want           string
	}{
		{"not a human node", "u-draft", "draft", map[string]any{"approved": true}, `node "draft" is a "echo" node`},
		{"not reached", "u-publish", "publish", map[string]any{}, `node "publish" is a "noop" node`},
		{"wrong type", "u-type", "approve", map[string]any{"approved": "yes"}, `/approved: got string, want boolean`},
		{"check fails", "u-check", "approve", map[string]any{"approved": true, "amount": 5000}, `an approval is for at most 1000`},
	} {
		res, err := c.Update(ctx, run, tc.node, tc.data, client.WithUpdateID(tc.id))
		if !errors.Is(err, client.ErrUpdateRefused) || res == nil || res.Accepted || !strings.Contains(res.Reason, tc.want) || res.Seq == 0 {
			t.Errorf("%s: got %+v, %v; want refused with %q", tc.name, res, err, tc.want)
		}
	}
	st, err := c.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stats.Refused != 4 || st.Nodes["approve"].Status != projection.NodeWaiting {
		t.Fatalf("after 4 refused updates: refused %d, approve %s", st.Stats.Refused, st.Nodes["approve"].Status)
	}
	// A refused update asked again: the same verdict, nothing written.
	if res, err := c.Update(ctx, run, "approve", map[string]any{"approved": "yes"}, client.WithUpdateID("u-type")); !errors.Is(err, client.ErrUpdateRefused) || res.Seq == 0 {
		t.Fatalf("refused update again: %+v, %v", res, err)
	}

	res, err := c.Update(ctx, run, "approve", map[string]any{"approved": true, "amount": 10}, client.WithUpdateID("u-ok"))
	if err != nil || !res.Accepted {
		t.Fatalf("update that fits: %+v, %v", res, err)
	}
	if string(res.Output) != `{"amount":10,"approved":true}` && string(res.Output) != `{"approved":true,"amount":10}` {
		t.Errorf("output %s", res.Output)
	}
	if n := res.State.Nodes["approve"]; n == nil || n.Status != projection.NodeSucceeded {
		t.Errorf("state after the update: approve %+v", n)
	}
	// The same update again, even after the node moved on: the same
	// verdict, nothing written.
	again, err := c.Update(ctx, run, "approve", map[string]any{"approved": true, "amount": 10}, client.WithUpdateID("u-ok"))
	if err != nil || !again.Accepted || again.Seq != res.Seq {
		t.Fatalf("update sent again: %+v, %v (first at %d)", again, err, res.Seq)
	}
	// The same id with other data: refused, nothing written.
	if _, err := c.Update(ctx, run, "approve", map[string]any{"approved": false}, client.WithUpdateID("u-ok")); !errors.Is(err, client.ErrUpdateIDReused) {
		t.Fatalf("update id reused with other data: %v, want ErrUpdateIDReused", err)
	}
	end, err := c.Wait(ctx, run)
	if err != nil || end.Status != projection.RunCompleted || end.Stats.Refused != 4 {
		t.Fatalf("run %s refused %d, %v", end.Status, end.Stats.Refused, err)
	}
	if _, err := c.Update(ctx, run, "approve", map[string]any{"approved": false}, client.WithUpdateID("u-late")); !errors.Is(err, client.ErrRunEnded) {
		t.Fatalf("update to an ended run: %v, want ErrRunEnded", err)
	}
	if n := signalCount(t, c, run); n != 5 {
		t.Fatalf("%d signals in the log, want 5 (4 refused updates, 1 accepted)", n)
	}
}

// An update to a human node that declares no input is refused: its
// verdict could not mean anything.
func TestUpdateNoDeclaredInput(t *testing.T) {
	c, _ := engine(t)
	ctx := timeout(t)
	g := mustGraph(t, `
name: loose
nodes:
  - {id: ask, type: human}
  - id: later
    type: human
    outputSchema: {type: object}
edges:
  - {from: START, to: ask}
  - {from: ask, to: later}
  - {from: later, to: END}
`)
	run, err := c.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitIteration(t, c, run, "ask", 1)
	res, err := c.Update(ctx, run, "ask", json.RawMessage(`{"ok":true}`))
	if !errors.Is(err, client.ErrUpdateRefused) || !strings.Contains(res.Reason, "declares no input") || res.ID == "" {
		t.Fatalf("update to a node with no declared input: %+v, %v", res, err)
	}
	res, err = c.Update(ctx, run, "later", json.RawMessage(`{}`))
	if !errors.Is(err, client.ErrUpdateRefused) || !strings.Contains(res.Reason, `node "later" is not waiting for input (the run has not reached it)`) {
		t.Fatalf("update to a node not waiting: %+v, %v", res, err)
	}
	if st, err := c.Get(ctx, run); err != nil || st.Stats.Refused != 2 || st.Nodes["ask"].Status != projection.NodeWaiting {
		t.Fatalf("after 2 refused updates: %+v, %v", st, err)
	}
	if _, err := c.Update(ctx, run, "ask", nil, client.WithUpdateID("bad.id")); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("bad update id: %v", err)
	}
}
