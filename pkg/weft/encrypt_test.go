package weft_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// The secrets a sealed run carries, one per kind of data; none may be
// found in the stream's raw bytes.
const (
	secretInput      = "INPUT-SECRET-5a1f"
	secretInvocation = "INVOCATION-SECRET-77c2"
	secretOutput     = "OUTPUT-SECRET-e90b"
	secretState      = "STATE-SECRET-31d8"
	secretSignal     = "SIGNAL-SECRET-c4a6"
)

const sealedGraph = `name: sealed
version: "1"
nodes:
  - {id: work, type: secretive, checkpoint: after}
  - {id: ask, type: human, config: {timeout: 5m}}
edges:
  - {from: START, to: work}
  - {from: work, to: ask}
  - {from: ask, to: END}
`

func useKeys(t *testing.T, ring events.KeyRing) {
	t.Helper()
	if err := events.UseKeys(ring); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.UseKeys(nil) }) // the ring is process-wide
}

func newRing(t *testing.T, ids ...string) events.KeyRing {
	t.Helper()
	var r events.KeyRing
	for _, id := range ids {
		k, err := events.NewKey(id)
		if err != nil {
			t.Fatal(err)
		}
		r = append(r, k)
	}
	return r
}

// TestEncryptedRunEndToEnd runs a run under sealing on real JetStream: a
// node reads its input and writes output and state (and the run is
// checkpointed after it), a human node takes a signal, and the key is
// rotated while the run waits for it. The run completes with every secret
// where it belongs in the fold; the raw stream (every message's headers
// and body, as the NATS CLI would show them to an admin) and JetStream's
// files on disk (the stream, the snapshots and the read model's buckets)
// hold none of them.
func TestEncryptedRunEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k1 := newRing(t, "k1")
	t.Cleanup(func() { _ = events.UseKeys(nil) })
	seen := make(chan map[string]any, 1)
	secretive := worker.NodeFunc(func(_ context.Context, in *worker.Input) (*worker.Result, error) {
		seen <- in.State
		return &worker.Result{Output: map[string]any{"out": secretOutput}, Updates: map[string]any{"st": secretState}}, nil
	})
	eng, err := weft.Start(ctx, weft.Embedded(dir), weft.WithEncryptKeys(k1), weft.WithNode("secretive", secretive))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	g, err := graph.Parse([]byte(sealedGraph), "sealed.yaml", graph.WithTypes("secretive"))
	if err != nil {
		t.Fatal(err)
	}
	c := eng.Client()
	id, err := c.Start(ctx, g, client.WithInput(map[string]any{"in": secretInput}), client.WithInvocation(map[string]any{"inv": secretInvocation}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-seen:
		if st["in"] != secretInput {
			t.Fatalf("the node saw state %v, want the plain input", st)
		}
	case <-ctx.Done():
		t.Fatal("the node never ran")
	}
	waitNode(ctx, t, c, id, "ask", projection.NodeWaiting)

	// Rotation mid-run: k2 seals from now on, k1 still opens.
	rotated, err := k1.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	useKeys(t, rotated)
	if err := c.Signal(ctx, id, "ask", map[string]any{"answer": secretSignal}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", st.Status, st.Error)
	}
	if got := string(st.Vars["st"]); got != `"`+secretState+`"` {
		t.Errorf("state st = %s, want %q", got, secretState)
	}

	raw := rawStream(ctx, t, eng)
	keys := map[string]int{}
	for _, m := range raw {
		if !strings.Contains(m.Subject, "."+id+".") {
			continue
		}
		if ct := m.Header.Get("content-type"); ct != events.ContentSealed {
			t.Errorf("%s (%s): content-type %q, want sealed", m.Subject, m.Header.Get("ce-type"), ct)
		}
		keys[m.Header.Get("ce-"+events.ExtKeyID)]++
	}
	if keys["k1"] == 0 || keys["k2"] == 0 || len(keys) != 2 {
		t.Errorf("events by key %v: want some under k1 (before the rotation) and some under k2 (after)", keys)
	}
	secrets := []string{secretInput, secretInvocation, secretOutput, secretState, secretSignal}
	for _, m := range raw {
		var b bytes.Buffer
		b.WriteString(m.Subject)
		for k, vs := range m.Header {
			b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
		b.Write(m.Data)
		for _, s := range secrets {
			if bytes.Contains(b.Bytes(), []byte(s)) {
				t.Errorf("the raw stream shows %s in %s (%s)", s, m.Subject, m.Header.Get("ce-type"))
			}
		}
	}
	t.Logf("raw stream: %d messages of run %s, by key %v: no secret found", len(raw), id, keys)

	// Reading after the fact: a reader under the rotated ring reads the
	// whole history; one without k1 is refused the early events, by key
	// id, and reads nothing of them.
	evs, err := c.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Refused != nil {
			t.Fatalf("event %d refused under the rotated ring: %v", e.Seq, e.Refused)
		}
	}
	useKeys(t, rotated[:1])
	evs, err = c.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range evs {
		if e.Refused != nil {
			refused++
			if !strings.Contains(e.Refused.Error(), `key "k1"`) || e.Data != nil {
				t.Fatalf("event %d: refused %v with data %q; want the key named and no data", e.Seq, e.Refused, e.Data)
			}
		}
	}
	if refused == 0 {
		t.Fatal("k1 retired, yet every event was read")
	}
	eng.Stop()

	// JetStream's own files: the stream's blocks hold no secret either
	// (the read model's KV buckets hold summaries, which name no data).
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %s", strings.TrimPrefix(path, dir), s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitNode waits for a node of a run to reach a status.
func waitNode(ctx context.Context, t *testing.T, c *client.Client, run, node string, want projection.NodeStatus) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Get(ctx, run)
		if err == nil && st.Nodes[node] != nil && st.Nodes[node].Status == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s of run %s never %s (%v)", node, run, want, err)
		case <-tick.C:
		}
	}
}

// rawStream reads every message of the events stream as stored, without
// Weft's decoder.
func rawStream(ctx context.Context, t *testing.T, eng *weft.Engine, opts ...nats.Option) []*jetstream.RawStreamMsg {
	t.Helper()
	nc, err := nats.Connect(eng.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, eng.Store().StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		out = append(out, m)
	}
	return out
}

// TestMissingKeyWaitsAndResumes: a coordinator that does not hold the key
// a run's history is sealed with neither passes those events over nor
// decides without them: the run stays as it was, a client's read names
// the key, and once the key is back the run goes on and completes.
func TestMissingKeyWaitsAndResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k1 := newRing(t, "k1")
	t.Cleanup(func() { _ = events.UseKeys(nil) })
	secretive := worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		return &worker.Result{Output: map[string]any{"out": secretOutput}}, nil
	})
	eng, err := weft.Start(ctx, weft.Embedded(dir), weft.WithEncryptKeys(k1), weft.WithNode("secretive", secretive))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse([]byte(sealedGraph), "sealed.yaml", graph.WithTypes("secretive"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := eng.Client().Start(ctx, g, client.WithInput(map[string]any{"in": secretInput}))
	if err != nil {
		t.Fatal(err)
	}
	waitNode(ctx, t, eng.Client(), id, "ask", projection.NodeWaiting)
	eng.Stop()

	// Started again with only k9: a cold coordinator must read the run
	// from its log to decide anything about it.
	k9 := newRing(t, "k9")
	eng, err = weft.Start(ctx, weft.Embedded(dir), weft.WithEncryptKeys(k9), weft.WithNode("secretive", secretive))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	c := eng.Client()
	if _, err := c.Get(ctx, id); !errors.Is(err, events.ErrKeyMissing) || !strings.Contains(err.Error(), `key "k1"`) {
		t.Fatalf("reading the run without k1: %v, want ErrKeyMissing naming k1", err)
	}
	// The signal goes in under k9 (the client's checks need the run's
	// history, so it is appended as it would be by a client that has it).
	sig, err := events.New(id, "sig-1", time.Time{}, &events.SignalReceivedData{Node: "ask", Iteration: 1, Data: []byte(`{"answer":"` + secretSignal + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Store().Append(ctx, id, events.AnySeq, sig); err != nil {
		t.Fatal(err)
	}
	before := len(rawStream(ctx, t, eng))
	// Sleep: the coordinator's deliveries of the signal come after
	// back-offs of 100 ms, 200 ms, 400 ms…; 1.5 s lets several of them
	// try, and none may decide anything.
	time.Sleep(1500 * time.Millisecond)
	if after := len(rawStream(ctx, t, eng)); after != before {
		t.Fatalf("the stream grew from %d to %d messages while the coordinator could not read the run", before, after)
	}

	// The key is back (a rotated ring that keeps k1): the run completes.
	useKeys(t, append(events.KeyRing{k9[0]}, k1...))
	st, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunCompleted || st.Nodes["ask"] == nil || !strings.Contains(string(st.Nodes["ask"].Output), secretSignal) {
		t.Fatalf("run %s (%v), ask %+v", st.Status, st.Error, st.Nodes["ask"])
	}
}

// TestMissingKeyFailsTheRun: the end of the road of a run whose history
// is sealed under a key its coordinator never gets. The coordinator hands
// the event back (tries and back-off shortened by WithRedelivery: by
// default twenty tries take minutes), then fails the run with an error
// naming the key id: one run-failed, nothing else decided, and the whole
// history, read with the key, is intact.
func TestMissingKeyFailsTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k1 := newRing(t, "k1")
	t.Cleanup(func() { _ = events.UseKeys(nil) })
	secretive := worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		return &worker.Result{Output: map[string]any{"out": secretOutput}}, nil
	})
	eng, err := weft.Start(ctx, weft.Embedded(dir), weft.WithEncryptKeys(k1), weft.WithNode("secretive", secretive))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse([]byte(sealedGraph), "sealed.yaml", graph.WithTypes("secretive"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := eng.Client().Start(ctx, g, client.WithInput(map[string]any{"in": secretInput}))
	if err != nil {
		t.Fatal(err)
	}
	waitNode(ctx, t, eng.Client(), id, "ask", projection.NodeWaiting)
	eng.Stop()

	// Started again with only k9, and three tries 10 ms apart.
	k9 := newRing(t, "k9")
	eng, err = weft.Start(ctx, weft.Embedded(dir), weft.WithEncryptKeys(k9), weft.WithNode("secretive", secretive),
		weft.WithRedelivery(3, 10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	sig, err := events.New(id, "sig-1", time.Time{}, &events.SignalReceivedData{Node: "ask", Iteration: 1, Data: []byte(`{"answer":"` + secretSignal + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Store().Append(ctx, id, events.AnySeq, sig); err != nil {
		t.Fatal(err)
	}
	failed := func() int {
		n := 0
		for _, m := range rawStream(ctx, t, eng) {
			if strings.Contains(m.Subject, "."+id+".") && m.Header.Get("ce-type") == string(events.RunFailed) {
				n++
			}
		}
		return n
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for failed() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the run never failed: a coordinator without its key left it waiting")
		case <-tick.C:
		}
	}

	// Read with the key: the run failed, naming k1; every event reads.
	useKeys(t, append(events.KeyRing{k9[0]}, k1...))
	c := eng.Client()
	st, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != projection.RunFailed || st.Error == nil || !strings.Contains(st.Error.Message, `key "k1"`) {
		t.Fatalf("run %s (%+v), want failed naming key \"k1\"", st.Status, st.Error)
	}
	evs, err := c.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Refused != nil {
			t.Fatalf("event %d (%s) refused: %v", e.Seq, e.Type, e.Refused)
		}
	}
	if n := failed(); n != 1 {
		t.Fatalf("%d run-failed events, want one", n)
	}
	t.Logf("run %s failed: %s", id, st.Error.Message)
}
