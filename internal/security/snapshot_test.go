package security

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestSnapshotPoisoning: a forged snapshot does not write a run's result.
// Under the roles only the coordinator and the admin may write the
// snapshots bucket: the client, the UI and the workers are refused. The
// attack is then made with what is left, write access to the bucket and
// nothing else (here the admin's connection stands in for it: a leaked
// bucket credential, a restored backup): while a run waits for a person,
// its snapshot is replaced with one whose state says what the attacker
// wants, and the coordinator process is killed, so that the next one
// loads the run through the snapshot. The log does not attest the forgery
// (its digest is recorded on a decision only coordinators may write): it
// is discarded, and the run completes with the log's result.
func TestSnapshotPoisoning(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	coord := startProcess(t, "coordinator", filepath.Join(dir, "coordinator-1.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")

	cl := client.New(openStore(t, s.connect(t, userClient)))
	g, err := graph.Parse([]byte(`
name: poisoned
nodes:
  - {id: a, type: transform, config: {set: {verdict: '"real"'}}, checkpoint: after}
  - {id: approve, type: human}
edges:
  - {from: START, to: a}
  - {from: a, to: approve}
  - {from: approve, to: END}
`), "poisoned.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := cl.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	admin := s.connect(t, userAdmin)
	kv, err := admin.js.KeyValue(ctx, coordinator.SnapshotsBucket)
	if err != nil {
		t.Fatal(err)
	}
	var genuine []byte
	deadline := time.Now().Add(30 * time.Second)
	for genuine == nil {
		st, err := cl.Get(ctx, run)
		if err == nil && st.Nodes["approve"] != nil && st.Nodes["approve"].Status == projection.NodeWaiting {
			if e, err := kv.Get(ctx, run); err == nil {
				genuine = e.Value()
			}
		}
		if genuine == nil && time.Now().After(deadline) {
			t.Fatalf("no snapshot of the waiting run: %+v %v", st, err)
		}
		// Polls: a snapshot is stored by the coordinator in its own time, with no event.
		time.Sleep(20 * time.Millisecond)
	}

	// The roles that may not write the bucket are refused.
	for _, user := range []string{userClient, userUI, userWorker} {
		c := s.connect(t, user)
		subj := "$KV." + coordinator.SnapshotsBucket + "." + run
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := c.js.PublishMsg(pctx, &nats.Msg{Subject: subj, Data: []byte(`{}`)})
		pcancel()
		if err == nil {
			t.Fatalf("%s wrote the snapshots bucket", user)
		}
		c.violation(t, "Publish", subj)
	}
	if e, err := kv.Get(ctx, run); err != nil || !bytes.Equal(e.Value(), genuine) {
		t.Fatalf("the snapshot changed: %v", err)
	}

	// The forgery: the same record, with the state the attacker wants.
	rec, err := coordinator.DecodeSnapshot(run, genuine)
	if err != nil {
		t.Fatal(err)
	}
	rec.State = bytes.ReplaceAll(rec.State, []byte(`"real"`), []byte(`"forged"`))
	if bytes.Equal(rec.State, mustDecode(t, genuine).State) {
		t.Fatal("nothing to forge in the snapshot")
	}
	forged, _ := json.Marshal(rec)
	_ = coord.Process.Signal(syscall.SIGKILL)
	_, _ = coord.Process.Wait()
	if _, err := kv.Put(ctx, run, forged); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator-2.log"), s.roleEnv(userCoord), "-nats", s.url)
	if err := cl.Signal(ctx, run, "approve", map[string]any{"ok": true}); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Wait(ctx, run)
	if err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("run: %+v %v", st, err)
	}
	store := openStore(t, admin)
	var out json.RawMessage
	evs, err := store.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == events.RunCompleted {
			p, _ := e.Payload()
			out = p.(*events.RunCompletedData).Output
		}
	}
	var vars map[string]any
	if json.Unmarshal(out, &vars) != nil || vars["verdict"] != "real" {
		t.Fatalf("the run completed with %s: the forgery was used", out)
	}
	// The coordinator said so, naming the run.
	logged, _ := os.ReadFile(filepath.Join(dir, "coordinator-2.log"))
	if !bytes.Contains(logged, []byte("discarding a snapshot the log does not attest")) || !bytes.Contains(logged, []byte(run)) {
		t.Errorf("the coordinator did not log the discarded snapshot:\n%s", logged)
	}
	testkit.CheckNoViolations(t, dir)
}

func mustDecode(t *testing.T, b []byte) *coordinator.SnapshotRecord {
	t.Helper()
	rec, err := coordinator.DecodeSnapshot(rec0(b), b)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// rec0 is the run a stored snapshot says it is of.
func rec0(b []byte) string {
	var r struct {
		Run string `json:"run"`
	}
	_ = json.Unmarshal(b, &r)
	return r.Run
}
