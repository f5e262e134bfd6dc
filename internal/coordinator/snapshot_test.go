package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// paused is a run that stops at a person, after a checkpointed node that
// sets the state its result is made of.
const paused = `
name: paused
nodes:
  - {id: a, type: transform, config: {set: {verdict: '"real"'}}, checkpoint: after}
  - {id: approve, type: human}
edges:
  - {from: START, to: a}
  - {from: a, to: approve}
  - {from: approve, to: END}
`

// A snapshot that the log does not attest is discarded, whatever is wrong
// with it, and the run ends with the log's result, not the forgery's. Each
// case stops the coordinator while its run waits for a person, puts a
// forged entry in the snapshots bucket, starts a new coordinator (whose
// cache is empty, so it loads the run through its snapshot) and sends the
// signal.
func TestSnapshotNotAttestedIsDiscarded(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCustomWorker(t, ctx, st, nil)
	g := mustGraph(t, paused)

	// other is a genuine, attested snapshot of another run: the first
	// case's.
	var other []byte
	cases := []struct {
		name  string
		forge func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte
	}{
		// The record holds no digest to recompute: the log has it.
		{"state changed, right sequence and attestation", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			rec.State = json.RawMessage(bytes.ReplaceAll(rec.State, []byte(`real`), []byte(`forged`)))
			return mustMarshal(t, rec)
		}},
		{"wrong sequence", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			rec.Seq--
			s, err := projection.Unmarshal(rec.State)
			if err != nil {
				t.Fatal(err)
			}
			s.LastSeq = rec.Seq
			rec.State = s.Marshal()
			return mustMarshal(t, rec)
		}},
		{"attestation pointing at another decision", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			rec.Attested++
			return mustMarshal(t, rec)
		}},
		{"another run's snapshot", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			if other == nil {
				t.Fatal("no snapshot of another run")
			}
			return other
		}},
		{"truncated", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			return raw[:len(raw)/2]
		}},
		{"garbage", func(t *testing.T, rec *coordinator.SnapshotRecord, raw []byte) []byte {
			return []byte("\x00\xffnot a snapshot")
		}},
	}
	cl := client.New(st, client.WithIdentity("test"))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cctx, stop := context.WithCancel(ctx)
			c := startCoordinator(cctx, st)
			run := start(t, st, g, 1)[0]
			waitWaiting(t, st, run, "approve")
			stop()
			c.wait()

			kv, err := eventlog.JetStream(st).KeyValue(ctx, coordinator.SnapshotsBucket)
			if err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, run)
			if err != nil {
				t.Fatalf("no snapshot: %v", err)
			}
			if i == 0 {
				other = e.Value()
			}
			rec, err := coordinator.DecodeSnapshot(run, e.Value())
			if err != nil {
				t.Fatalf("the coordinator's own snapshot: %v", err)
			}
			if !bytes.Contains(rec.State, []byte(`"verdict":"real"`)) {
				t.Fatalf("snapshot without the state it should hold: %s", rec.State)
			}
			if _, err := kv.Put(ctx, run, tc.forge(t, rec, e.Value())); err != nil {
				t.Fatal(err)
			}

			ctx2, stop2 := context.WithCancel(ctx)
			c2 := startCoordinator(ctx2, st)
			defer func() { stop2(); c2.wait() }()
			if err := cl.Signal(ctx, run, "approve", map[string]any{"ok": true}); err != nil {
				t.Fatal(err)
			}
			s := waitEnded(t, st, []string{run}, 30*time.Second)[run]
			if s.Status != projection.RunCompleted {
				t.Fatalf("run %s: %v", s.Status, s.Error)
			}
			done := payloadsOf[*events.RunCompletedData](readRun(t, st, run))
			if len(done) != 1 || string(done[0].Output) != `{"i":0,"verdict":"real"}` {
				t.Fatalf("run completed with %s, want the log's", done[0].Output)
			}
			if n := c2.Stats().SnapshotsDiscarded; n != 1 {
				t.Errorf("snapshots discarded: %d, want 1", n)
			}
		})
	}
}

// The attested snapshot is used: a new coordinator folds only the tail.
func TestAttestedSnapshotIsUsed(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCustomWorker(t, ctx, st, nil)
	g := mustGraph(t, paused)
	cctx, stop := context.WithCancel(ctx)
	c := startCoordinator(cctx, st)
	run := start(t, st, g, 1)[0]
	waitWaiting(t, st, run, "approve")
	stop()
	c.wait()

	sn, err := coordinator.LoadSnapshot(ctx, eventlog.JetStream(st), run)
	if err != nil || sn == nil {
		t.Fatalf("snapshot: %v %v", sn, err)
	}
	// The decision after the snapshot records its digest.
	evs := readRun(t, st, run)
	var attest *jetstream.RawStreamMsg
	for _, e := range evs {
		if e.Seq > sn.Seq && e.IsDecision() {
			if attest, err = eventlog.LeaderSeq(ctx, st, e.Seq); err != nil {
				t.Fatal(err)
			}
			if attest.Header.Get(eventlog.HdrCheckpoint) != "" {
				break
			}
		}
	}
	if attest == nil || !strings.HasPrefix(attest.Header.Get(eventlog.HdrCheckpoint), strings.TrimSpace(jsonNum(sn.Seq))+" sha256:") {
		t.Fatalf("no decision attests the snapshot at %d", sn.Seq)
	}

	c2 := startCoordinator(ctx, st)
	cl := client.New(st, client.WithIdentity("test"))
	if err := cl.Signal(ctx, run, "approve", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	if s := waitEnded(t, st, []string{run}, 30*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s", s.Status)
	}
	if n := c2.Stats().SnapshotsDiscarded; n != 0 {
		t.Errorf("snapshots discarded: %d, want 0", n)
	}
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type running struct {
	*coordinator.Coordinator
	wg sync.WaitGroup
}

func (r *running) wait() { r.wg.Wait() }

// startCoordinator runs a coordinator until ctx ends.
func startCoordinator(ctx context.Context, st events.Store) *running {
	r := &running{Coordinator: coordinator.New(st, coordinator.WithLogger(quiet()))}
	r.wg.Go(func() { _ = r.Run(ctx) })
	return r
}

// waitWaiting waits for a node of the run to wait (followed, at each
// event of the run) and for the run's snapshot to be stored.
func waitWaiting(t *testing.T, st events.Store, run, node string) {
	t.Helper()
	waitState(t, st, run, func(s *projection.State) bool {
		ns := s.Nodes[node]
		return ns != nil && ns.Status == projection.NodeWaiting
	})
	waitSnapshot(t, st, run)
}

// waitSnapshot waits for the run's snapshot to be in its bucket. No event
// of the run says it was stored (the bucket may not exist yet, to be
// watched): this polls the condition.
func waitSnapshot(t *testing.T, st events.Store, run string) *projection.Snapshot {
	t.Helper()
	return waitSnapshotAfter(t, st, run, 0)
}

// waitSnapshotAfter waits for a snapshot of the run past sequence seq.
func waitSnapshotAfter(t *testing.T, st events.Store, run string, seq uint64) *projection.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sn, err := coordinator.LoadSnapshot(context.Background(), eventlog.JetStream(st), run)
		if err != nil {
			t.Fatal(err)
		}
		if sn != nil && sn.Seq > seq {
			return sn
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no snapshot stored", run)
		}
		// Polls: a snapshot is stored by the coordinator in its own time, with no event.
		time.Sleep(10 * time.Millisecond)
	}
}

// A stale snapshot (an older one of the same run, which the log attested)
// is a true fold of the log at its sequence: it is used, and the tail from
// it gives the log's result.
func TestStaleSnapshotGivesTheLogsResult(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCustomWorker(t, ctx, st, nil)
	g := mustGraph(t, `
name: twice
nodes:
  - {id: a, type: transform, config: {set: {verdict: '"early"'}}, checkpoint: after}
  - {id: first, type: human}
  - {id: b, type: transform, config: {set: {verdict: '"final"'}}, checkpoint: after}
  - {id: second, type: human}
edges:
  - {from: START, to: a}
  - {from: a, to: first}
  - {from: first, to: b}
  - {from: b, to: second}
  - {from: second, to: END}
`)
	cl := client.New(st, client.WithIdentity("test"))
	kv := func() jetstream.KeyValue {
		kv, err := eventlog.JetStream(st).KeyValue(ctx, coordinator.SnapshotsBucket)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	cctx, stop := context.WithCancel(ctx)
	c := startCoordinator(cctx, st)
	run := start(t, st, g, 1)[0]
	waitWaiting(t, st, run, "first")
	old, err := kv().Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var oldSn projection.Snapshot
	if err := json.Unmarshal(old.Value(), &oldSn); err != nil {
		t.Fatal(err)
	}
	if err := cl.Signal(ctx, run, "first", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, st, run, "second")
	// b's checkpoint is stored after the decision that follows it.
	waitSnapshotAfter(t, st, run, oldSn.Seq)
	stop()
	c.wait()
	if cur, err := kv().Get(ctx, run); err != nil || bytes.Equal(cur.Value(), old.Value()) {
		t.Fatalf("no newer snapshot: %v", err)
	}
	if _, err := kv().Put(ctx, run, old.Value()); err != nil {
		t.Fatal(err)
	}
	c2 := startCoordinator(ctx, st)
	if err := cl.Signal(ctx, run, "second", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	if s := waitEnded(t, st, []string{run}, 30*time.Second)[run]; s.Status != projection.RunCompleted {
		t.Fatalf("run %s", s.Status)
	}
	done := payloadsOf[*events.RunCompletedData](readRun(t, st, run))
	if len(done) != 1 || string(done[0].Output) != `{"i":0,"verdict":"final"}` {
		t.Fatalf("run completed with %+v", done)
	}
	if n := c2.Stats().SnapshotsDiscarded; n != 0 {
		t.Errorf("snapshots discarded: %d, want 0", n)
	}
}
