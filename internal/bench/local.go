package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// runLocal measures the "local" figure: a chain of local transform nodes
// (as long as the hop chain, Sizes.HopNodes), which the coordinator runs
// itself with no worker and no queue hop. A step is from the stored time
// of node i's invoked event to that of node i+1's: the coordinator runs
// node i+1's transform, folds its outcome, decides node i+2's ready
// (routing attached) and writes the outcome and the ready as one step
// (eventlog.Engine.AppendStep: pipelined, one round trip when no other
// message comes between them).
//
// Its floor is the raw JetStream synchronous publish (publish, wait for
// the ack) measured in the same run on a stream of the same storage, with
// a body of the engine's average event size: the step's p50 over the
// publish's p50 is the ratio. Targets (issue 30, item 3): the ratio ≤ 3,
// and the p50 ≤ 0.3 ms (an in-process database step, DBOS-SQLite's, took
// 0.31 ms on the same machine).
//
// Size: a benchmark script, read top to bottom (set up, measure, report
// rows).
func runLocal(ctx context.Context, e *env) ([]Result, error) {
	n := e.sizes.HopNodes
	g, err := chainGraph("local", "transform", n, map[string]any{"set": map[string]string{"x": "state.x + 1"}})
	if err != nil {
		return nil, err
	}
	stream := e.name("WEFT_LOCAL")
	defer e.dropStream(stream)
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		return nil, err
	}
	defer coord.stop()
	timeout := time.Minute + time.Duration(n)*100*time.Millisecond

	run := events.NewRunID()
	err = e.profile("", func() error {
		ev, err := startedEvent(run, g, []byte(`{"x":0}`))
		if err != nil {
			return err
		}
		if _, err := st.Append(ctx, run, 0, ev); err != nil {
			return err
		}
		_, err = waitRuns(ctx, e.js, stream, 1, timeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	msgs, _, err := e.streamBytes(ctx, stream)
	if err != nil {
		return nil, err
	}
	log, err := collect(ctx, e.js, stream, []string{eventlog.RunFilter(run)}, int(msgs), time.Minute)
	if err != nil {
		return nil, err
	}
	invoked := map[int]time.Time{}
	size := 0
	for _, s := range log {
		size += s.size
		i, err := strconv.Atoi(strings.TrimPrefix(s.node, "n"))
		if err != nil {
			continue
		}
		if strings.HasSuffix(s.subject, ".w."+events.LocalQueue+".invoked") {
			invoked[i] = s.at
		}
	}
	var steps []time.Duration
	for i := 0; i+1 < n; i++ {
		a, ok1 := invoked[i]
		b, ok2 := invoked[i+1]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("local chain: node %d or %d has no invoked event on queue %s", i, i+1, events.LocalQueue)
		}
		steps = append(steps, b.Sub(a))
	}
	avgSize := size / max(len(log), 1)
	stats := coord.coord.Stats()

	var pubs []time.Duration
	err = e.profile("floor", func() error {
		var err error
		pubs, err = e.syncPublishes(ctx, 2*n, floorBody(avgSize))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	p50, p99, f50 := pct(steps, 50), pct(steps, 99), pct(pubs, 50)
	notes := fmt.Sprintf("%d-node chain of local transforms, no worker; server-stored times (invoked i → invoked i+1); %d events (%.1f per node, avg %d B); %d of %d nodes outran the shard's inline budget, %d reloads, %d events handed back; floor: %d synchronous publishes (publish + ack), client-timed",
		n, len(log), float64(len(log))/float64(n), avgSize, stats.LocalDetached, stats.LocalRuns, stats.Reloads, stats.HandedBack, len(pubs))
	return []Result{
		row("local step p50", ms(p50), "ms", ms(f50), ratioAtMost(3), notes),
		row("local step p50, absolute", ms(p50), "ms", 0, valueAtMost(0.3), "issue 30: at most 0.3 ms, an in-process database step (DBOS-SQLite, 0.31 ms p50 on the same machine)"),
		row("local step p99", ms(p99), "ms", ms(pct(pubs, 99)), nil, "floor: sync publish p99"),
	}, nil
}

// syncPublishes publishes n messages of body bytes to a fresh stream one
// at a time, each waiting for its ack, and returns each round trip.
func (e *env) syncPublishes(ctx context.Context, n, body int) ([]time.Duration, error) {
	stream := e.name("FLOOR_PUB")
	prefix := strings.ToLower(stream)
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{prefix + ".>"}, Storage: e.storage(),
		Retention: jetstream.LimitsPolicy, Duplicates: 2 * time.Minute,
	}); err != nil {
		return nil, fmt.Errorf("creating floor stream: %w", err)
	}
	defer e.dropStream(stream)
	data := []byte(strings.Repeat("x", max(body, 1)))
	out := make([]time.Duration, 0, n)
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("%s.r.%d", prefix, i))
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, m.Subject)
		t0 := time.Now()
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}
