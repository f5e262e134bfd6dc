package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// largeBytes is the payload of the large-payload rows (issue 32, item 5).
const largeBytes = 50 << 20

// runSealed measures what encryption at rest and large payloads cost.
// The hop: figure 1's chain run twice on the same server, plain and then
// with every event's data sealed (AES-256-GCM), the sealed p50 against
// the plain one (target ≤ 1.15×); the throughput: figure 2's burst the
// same way (sealed at least 0.87 of plain, 1/1.15). The large payload: a 50 MB signal
// appended sealed (its body kept beside the log, in the payloads bucket)
// and the run read back whole, each timed against the raw Object Store
// put and get of the same number of bytes on the same server (its floor).
// It seals and unseals itself, so it does not run under -encrypt.
func runSealed(ctx context.Context, e *env) ([]Result, error) {
	if events.Sealing() {
		return nil, errors.New("run without -encrypt: this figure compares sealed with plain itself")
	}
	plain, err := e.hopOnce(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("plain chain: %w", err)
	}
	k, err := events.NewKey("bench-sealed")
	if err != nil {
		return nil, err
	}
	ring := events.KeyRing{k}
	sealed, err := e.hopOnce(ctx, ring)
	if err != nil {
		return nil, fmt.Errorf("sealed chain: %w", err)
	}
	rows := []Result{
		row("hop latency p50, sealed", ms(sealed), "ms", ms(plain), ratioAtMost(1.15),
			fmt.Sprintf("%d-node chain with every event's data sealed; floor: the same chain plain, just before on the same server", e.sizes.HopNodes)),
	}
	ptput, err := e.tputOnce(ctx, nil)
	if err != nil {
		return rows, fmt.Errorf("plain burst: %w", err)
	}
	stput, err := e.tputOnce(ctx, ring)
	if err != nil {
		return rows, fmt.Errorf("sealed burst: %w", err)
	}
	rows = append(rows, row("throughput, sealed", stput, "nodes/s", ptput, ratioAtLeast(0.87),
		fmt.Sprintf("figure 2's burst (%d runs × %d noop nodes) with every event's data sealed; floor: the same burst plain, just before", e.sizes.TputRuns, e.sizes.TputNodes)))
	large, err := e.largePayload(ctx, ring)
	return append(rows, large...), err
}

// tputOnce runs figure 2's burst once, sealed under ring unless it is
// nil, and returns its sustained nodes/s.
func (e *env) tputOnce(ctx context.Context, ring events.KeyRing) (float64, error) {
	if ring != nil {
		if err := events.UseKeys(ring); err != nil {
			return 0, err
		}
		defer func() { _ = events.UseKeys(nil) }()
	}
	runs, nodes := e.sizes.TputRuns, e.sizes.TputNodes
	g, err := chainGraph("throughput", "noop", nodes, nil)
	if err != nil {
		return 0, err
	}
	eng, err := e.engineFlow(ctx, g, runs, e.sizes.TputWorkerConc, time.Minute+time.Duration(runs*nodes)*10*time.Millisecond)
	if err != nil {
		return 0, err
	}
	if eng.partial != "" {
		return 0, fmt.Errorf("the burst did not finish: %s", eng.partial)
	}
	return eng.tput, nil
}

// hopOnce runs figure 1's chain once, sealed under ring unless it is nil,
// and returns its p50 hop.
func (e *env) hopOnce(ctx context.Context, ring events.KeyRing) (time.Duration, error) {
	if ring != nil {
		if err := events.UseKeys(ring); err != nil {
			return 0, err
		}
		defer func() { _ = events.UseKeys(nil) }()
	}
	n := e.sizes.HopNodes
	g, err := chainGraph("hop", "noop", n, nil)
	if err != nil {
		return 0, err
	}
	stream, st, done, err := e.engineOn(ctx, "WEFT_SEALHOP", 16)
	if err != nil {
		return 0, err
	}
	defer done()
	ch, err := e.runChain(ctx, stream, st, g, n, time.Minute+time.Duration(n)*100*time.Millisecond, "", 0)
	if err != nil {
		return 0, err
	}
	return pct(ch.hops, 50), nil
}

// largePayload times a 50 MB signal's append (sealed, kept beside the
// log) and the run's read back, against the raw Object Store put and get.
//
// Size: one figure's phases in order (set up, write, read, floor, rows),
// each a few lines; split, the rows would be far from what they report.
func (e *env) largePayload(ctx context.Context, ring events.KeyRing) ([]Result, error) {
	if err := events.UseKeys(ring); err != nil {
		return nil, err
	}
	defer func() { _ = events.UseKeys(nil) }()
	stream := e.name("WEFT_LARGE")
	defer e.dropStream(stream)
	st, err := e.openStore(ctx, e.js, stream)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, largeBytes*3/4)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"blob": base64.StdEncoding.EncodeToString(raw)})
	run := events.NewRunID()
	start, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "large", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"large"}`)), Graph: []byte(`{"name":"large"}`)})
	if err != nil {
		return nil, err
	}
	if _, err := st.Append(ctx, run, 0, start); err != nil {
		return nil, err
	}
	sig, err := events.New(run, run+":large", time.Time{}, &events.SignalReceivedData{Node: "a", Data: body})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := st.Append(ctx, run, events.AnySeq, sig); err != nil {
		return nil, fmt.Errorf("appending the %d-byte signal: %w", len(body), err)
	}
	write := time.Since(t0)
	defer func() { _ = eventlog.DeletePayloads(context.WithoutCancel(ctx), st, run) }()
	t0 = time.Now()
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil {
		return nil, err
	}
	read := time.Since(t0)
	if len(evs) != 2 || evs[1].Refused != nil || !bytes.Contains(evs[1].Data, body[len(body)-64:]) {
		return nil, fmt.Errorf("the large signal did not come back whole (%d events)", len(evs))
	}
	fw, fr, err := e.rawObject(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	notes := fmt.Sprintf("a %d MB signal appended sealed, its body kept in the payloads bucket; floor: the raw Object Store put of as many bytes", len(body)>>20)
	return []Result{
		row("large payload write", ms(write), "ms", ms(fw), nil, notes),
		row("large payload read back", ms(read), "ms", ms(fr), nil, "the run's history read whole (reference resolved by direct gets, digest checked, unsealed); floor: the raw Object Store get"),
	}, nil
}

// rawObject times a raw Object Store put and get of b, in a bucket of its
// own that it removes.
func (e *env) rawObject(ctx context.Context, b []byte) (write, read time.Duration, err error) {
	bucket := e.name("weft-bench-raw")
	obs, err := setup.CreateObjectStore(ctx, e.js, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: e.storage()})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = e.js.DeleteObjectStore(context.WithoutCancel(ctx), bucket) }()
	t0 := time.Now()
	if _, err := obs.PutBytes(ctx, "blob", b); err != nil {
		return 0, 0, err
	}
	write = time.Since(t0)
	t0 = time.Now()
	got, err := obs.GetBytes(ctx, "blob")
	if err != nil {
		return 0, 0, err
	}
	if len(got) != len(b) {
		return 0, 0, fmt.Errorf("got %d bytes of %d", len(got), len(b))
	}
	return write, time.Since(t0), nil
}
