package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// stuck runs a node that heartbeats and then works until it is stopped,
// beside a person's approval with a deadline.
const stuck = `
name: stuck
nodes:
  - id: crawl
    type: crawl
    queue: slow
    timeout: 1h
    heartbeat: 10m
  - id: approve
    type: human
    config: {timeout: 24h}
    outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}}}
edges:
  - {from: START, to: crawl}
  - {from: START, to: approve}
  - {from: crawl, to: END}
  - {from: approve, to: END}
`

// TestStatusShowsWhereItIsStuck: 'weft status' says, for a running node,
// how long it has run, its worker, its last heartbeat with the details it
// reported, and when it times out; for a node waiting for a person, its
// deadline and the exact command that answers it (which works);
// 'weft describe -o json' gives the same as data.
func TestStatusShowsWhereItIsStuck(t *testing.T) {
	url, cl, store := engineStore(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New(store, worker.WithName("slow-worker"), worker.WithQueues("slow"), worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	w.Handle("crawl", worker.NodeFunc(func(ctx context.Context, _ *worker.Input) (*worker.Result, error) {
		if err := worker.Heartbeat(ctx, map[string]any{"page": 3}); err != nil {
			return nil, err
		}
		select { // works until the run ends or the test does
		case <-ctx.Done():
		case <-release:
		}
		return &worker.Result{}, nil
	}))
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { close(release); stop(); wg.Wait() })
	waitConsumers(t, store, workqueue.QueueConsumer("slow"))

	g, err := graph.Parse([]byte(stuck), "stuck.yaml", graph.WithTypes("crawl"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := cl.Start(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // crawl heartbeats, approve waits
		st, err := cl.Get(context.Background(), run)
		return err == nil && st.Nodes["crawl"] != nil && st.Nodes["crawl"].HeartbeatAt != nil &&
			st.Nodes["approve"] != nil && st.Nodes["approve"].WaitingFor == "signal"
	})

	r := weft(t, "status", run, "-nats", url)
	if r.code != 0 {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantMatch(t, "status of a stuck run", r.stdout,
		`(?m)^crawl +running +1 +1 +slow-worker +\d\S* so far`,
		`(?m)^  crawl attempt 1 on worker slow-worker: running for \S+; last heartbeat \S+ ago \([^)]+\) \{"page":3\}; times out in 1h0m\d+s \(`,
		`(?m)^  approve: waiting for a signal \(a person\) for \S+; deadline in 2[34]h\S* \(`,
		`(?m)^    answer: weft signal `+run+` approve -data '\{"approved":true\}' -nats `+url+`$`)

	r = weft(t, "describe", run, "-nats", url, "-o", "json")
	var d struct {
		State   projection.State `json:"state"`
		Pending []client.Pending `json:"pending"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Pending) != 2 {
		t.Fatalf("describe -o json: %v, %d pending\n%s%s", err, len(d.Pending), r.stdout, r.stderr)
	}
	crawl, approve := d.Pending[0], d.Pending[1]
	var details bytes.Buffer
	_ = json.Compact(&details, crawl.HeartbeatDetails)
	if crawl.Node != "crawl" || crawl.Worker != "slow-worker" || details.String() != `{"page":3}` ||
		crawl.TimeoutAt == nil || crawl.HeartbeatTimeoutAt == nil || crawl.Since == nil {
		t.Errorf("crawl pending = %+v", crawl)
	}
	if approve.Node != "approve" || approve.Deadline == nil || !strings.HasPrefix(approve.Answer, "weft signal "+run+" approve -data ") {
		t.Errorf("approve pending = %+v", approve)
	}

	// The answer is a command that works.
	answer := strings.TrimPrefix(approve.Answer, "weft ")
	words := []string{"signal", run, "approve", "-data", `{"approved":true}`, "-nats", url}
	if want := "signal " + run + " approve -data '{\"approved\":true}'"; answer != want {
		t.Errorf("answer = %q, want %q", answer, want)
	}
	if r := weft(t, words...); r.code != 0 {
		t.Fatalf("the answer: exit %d\n%s", r.code, r.stderr)
	}
	waitFor(t, func() bool { // approve succeeds
		st, err := cl.Get(context.Background(), run)
		return err == nil && st.Nodes["approve"].Status == projection.NodeSucceeded
	})
	r = weft(t, "status", run, "-nats", url)
	if strings.Contains(r.stdout, "approve:") || !strings.Contains(r.stdout, "  crawl attempt 1") {
		t.Errorf("status after the answer: approve still pending, or crawl not:\n%s", r.stdout)
	}
}
