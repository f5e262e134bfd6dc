package weft_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// score is a node type of the user's: it scores the input's amount.
func score(_ context.Context, in *worker.Input) (*worker.Result, error) {
	amount, _ := in.State["amount"].(float64)
	return &worker.Result{Updates: map[string]any{"score": amount * 2}}, nil
}

// reviewGraph uses both styles of Go condition: over the state (big,
// small) and over the state and the invocation state (vip).
func reviewGraph(t *testing.T) (*graph.Graph, map[string]any) {
	t.Helper()
	b := graph.New("review").
		Node("score", "score").
		Node("fast", "echo").
		Node("big", "echo").
		Node("small", "echo").
		Edge(graph.Start, "fast", graph.IfFunc("vip", func(_, inv map[string]any) bool { return inv["tier"] == "vip" })).
		Edge(graph.Start, "score", graph.IfFunc("regular", func(_, inv map[string]any) bool { return inv["tier"] != "vip" })).
		Edge("score", "big", graph.IfFunc("big", func(s map[string]any) bool { v, _ := s["score"].(float64); return v > 10 })).
		Edge("score", "small", graph.IfFunc("small", func(s map[string]any) bool { v, _ := s["score"].(float64); return v <= 10 })).
		Edge("fast", graph.End).
		Edge("big", graph.End).
		Edge("small", graph.End)
	g, err := b.Build(graph.WithTypes("score"))
	if err != nil {
		t.Fatal(err)
	}
	return g, b.Conditions()
}

func TestGoConditionsEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, conds := reviewGraph(t)
	eng, err := weft.Start(ctx, weft.Embedded(t.TempDir()),
		weft.WithNode("score", worker.NodeFunc(score)),
		weft.WithConditions(conds))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	if !strings.HasPrefix(eng.URL(), "nats://127.0.0.1:") {
		t.Errorf("URL %q, want the embedded server on loopback", eng.URL())
	}
	c := eng.Client()
	cases := []struct {
		amount float64
		tier   string
		ran    []string
		not    []string
	}{
		{amount: 50, tier: "regular", ran: []string{"score", "big"}, not: []string{"small", "fast"}},
		{amount: 2, tier: "regular", ran: []string{"score", "small"}, not: []string{"big", "fast"}},
		{amount: 50, tier: "vip", ran: []string{"fast"}, not: []string{"score", "big", "small"}},
	}
	for _, tc := range cases {
		id, err := c.Start(ctx, g, clientInput(tc.amount), clientInvocation(tc.tier))
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != projection.RunCompleted {
			t.Fatalf("amount %v tier %s: run %s, error %v", tc.amount, tc.tier, st.Status, st.Error)
		}
		for _, n := range tc.ran {
			if ns := st.Nodes[n]; ns == nil || ns.Status != projection.NodeSucceeded {
				t.Errorf("amount %v tier %s: node %s did not succeed (%+v)", tc.amount, tc.tier, n, ns)
			}
		}
		for _, n := range tc.not {
			if ns := st.Nodes[n]; ns != nil && ns.Status == projection.NodeSucceeded {
				t.Errorf("amount %v tier %s: node %s ran", tc.amount, tc.tier, n)
			}
		}
	}
	if err := eng.Err(); err != nil {
		t.Errorf("engine error: %v", err)
	}
}

// TestMissingConditionNamesTheOption: an engine without the graph's
// functions fails the run at once, saying how to register them.
func TestMissingConditionNamesTheOption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, _ := reviewGraph(t)
	eng, err := weft.Start(ctx, weft.Embedded(""), weft.WithNode("score", worker.NodeFunc(score)))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	id, err := eng.Client().Start(ctx, g, clientInput(1), clientInvocation("regular"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Client().Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunFailed || st.Error == nil || !strings.Contains(st.Error.Error(), "weft.WithConditions") {
		t.Fatalf("run %s, error %v; want failed, naming weft.WithConditions", st.Status, st.Error)
	}
}

func TestStartRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts []weft.Option
		want string
	}{
		{nil, "weft.WithNATS(conn) or weft.Embedded(dir)"},
		{[]weft.Option{weft.Embedded(""), weft.WithNode("", nil)}, "needs a name and a node"},
		{[]weft.Option{weft.Embedded(""), weft.WithoutWorker(), weft.WithNode("x", worker.NodeFunc(score))}, "no worker would run"},
		{[]weft.Option{weft.WithNATS(&nats.Conn{}), weft.WithRoles("")}, "weft.WithRoles needs weft.Embedded"},
		{[]weft.Option{weft.Embedded(""), weft.WithRoles(""), weft.WithQueues("_local")}, "reserved"},
	} {
		if eng, err := weft.Start(ctx, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			if eng != nil {
				eng.Stop()
			}
			t.Errorf("Start: %v, want an error with %q", err, tc.want)
		}
	}
}

func clientInput(amount float64) client.StartOption {
	return client.WithInput(map[string]any{"amount": amount})
}

func clientInvocation(tier string) client.StartOption {
	return client.WithInvocation(map[string]any{"tier": tier})
}
