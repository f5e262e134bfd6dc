package weft_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
	"github.com/weft-dev/weft/pkg/worker"
)

// TestLargeOutputBesideTheLog: a node that outputs 20 MB (more than the
// server's 8 MiB message limit) completes, sealed, with the defaults (large
// payloads on) under the roles (the worker writes the object, the
// coordinator and the client read it): its node-invoked event keeps its
// body in the payloads bucket, every message of the stream stays small,
// the fold reads the output whole, and the bucket holds the body sealed
// (no marker of the output in it). WEFT_LARGE_MB=50 runs it with 50 MB
// ('make large').
func TestLargeOutputBesideTheLog(t *testing.T) {
	mb := 20
	if v := os.Getenv("WEFT_LARGE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 60 {
			t.Fatalf("WEFT_LARGE_MB=%q: want 1 to 60", v)
		}
		mb = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	raw := make([]byte, mb<<20*3/4)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	const marker = "LARGE-OUTPUT-MARKER-91f3"
	big := marker + base64.StdEncoding.EncodeToString(raw) // mb MiB of text
	large := worker.NodeFunc(func(context.Context, *worker.Input) (*worker.Result, error) {
		return &worker.Result{Output: map[string]any{"blob": big}}, nil
	})
	dir := t.TempDir()
	eng, err := weft.Start(ctx, weft.Embedded(filepath.Join(dir, "js")), weft.WithRoles(filepath.Join(dir, "roles")), weft.WithEncryptKeys(newRing(t, "k1")), weft.WithNode("large", large))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.UseKeys(nil) })
	defer eng.Stop()
	g, err := graph.Parse([]byte("name: large\nversion: \"1\"\nnodes: [{id: big, type: large}]\nedges: [{from: START, to: big}, {from: big, to: END}]\n"), "large.yaml", graph.WithTypes("large"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	id, err := eng.Client().Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Client().Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if st.Status != projection.RunCompleted {
		t.Fatalf("run %s: %v", st.Status, st.Error)
	}
	var out struct{ Blob string }
	if n := st.Nodes["big"]; n == nil || json.Unmarshal(n.Output, &out) != nil || out.Blob != big {
		t.Fatalf("the node's output did not come back whole")
	}
	var refs int
	for _, m := range rawStream(ctx, t, eng, adminAuth(t, filepath.Join(dir, "roles"))) {
		if len(m.Data) > eventlog.DefaultOffloadAt {
			t.Errorf("%s (%s): a %d-byte body in the stream", m.Subject, m.Header.Get("ce-type"), len(m.Data))
		}
		if m.Header.Get("content-type") == eventlog.ContentRef {
			refs++
		}
	}
	if refs == 0 {
		t.Fatal("no event refers to the payloads bucket")
	}
	nc, err := nats.Connect(eng.URL(), adminAuth(t, filepath.Join(dir, "roles")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		b, err := obs.GetBytes(ctx, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("object %s holds the output in plain", info.Name)
		}
	}
	t.Logf("a %d-byte output: run completed in %s; %d events refer to %d objects", len(big), took.Round(time.Millisecond), refs, len(infos))

	// Deleting the run's payloads removes its objects.
	store, err := eventlog.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if err := eventlog.DeletePayloads(ctx, store, id); err != nil {
		t.Fatal(err)
	}
	if infos, err := obs.List(ctx); err == nil && len(infos) > 0 {
		t.Errorf("%d objects left after DeletePayloads", len(infos))
	}
}

// adminAuth is the admin's user and password, from the roles' directory
// (weft-admin.env).
func adminAuth(t *testing.T, rolesDir string) nats.Option {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rolesDir, "weft-admin.env"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return nats.UserInfo(vars["WEFT_NATS_USER"], vars["WEFT_NATS_PASSWORD"])
}
