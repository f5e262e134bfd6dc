package readmodel_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// TestLargePayloadsGoWithTheRun: runs whose input and output are kept
// beside the log (1 MB each, over the 256 KiB default) lose their objects
// when they are removed, and only theirs; an archived run keeps them (its
// archive holds the references), and restored, it reads whole again.
func TestLargePayloadsGoWithTheRun(t *testing.T) {
	ctx := timeout(t)
	c, store := engine(t, time.Hour)
	g := mustGraph(t, "name: big\nnodes: [{id: e, type: echo}]\nedges: [{from: START, to: e}, {from: e, to: END}]\n")
	blob := strings.Repeat("b", 1<<20)
	runs := startAll(t, ctx, c, g, []map[string]any{{"blob": "A" + blob}, {"blob": "B" + blob}})
	testkit.WaitEnded(t, store, runs, 60*time.Second)
	js := eventlog.JetStream(store)
	objects := func(run string) int {
		t.Helper()
		obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := obs.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Fatal(err)
		}
		n := 0
		for _, info := range infos {
			if strings.HasPrefix(info.Name, run+".") {
				n++
			}
		}
		return n
	}
	whole := func(run, marker string) {
		t.Helper()
		evs, err := store.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs {
			if e.Refused != nil {
				t.Fatalf("run %s: event %d refused: %v", run, e.Seq, e.Refused)
			}
			found = found || bytes.Contains(e.Data, []byte(marker+blob[:64]))
		}
		if !found {
			t.Fatalf("run %s: its large input is not read back", run)
		}
	}
	a, b := runs[0], runs[1]
	if objects(a) == 0 || objects(b) == 0 {
		t.Fatalf("objects: %d of run a, %d of run b; want each run's bodies beside the log", objects(a), objects(b))
	}
	if _, err := readmodel.Remove(ctx, store, a, nil); err != nil {
		t.Fatal(err)
	}
	if n := objects(a); n != 0 {
		t.Errorf("%d objects of the removed run left", n)
	}
	whole(b, "B")

	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kept := objects(b)
	if _, err := readmodel.Remove(ctx, store, b, arch); err != nil {
		t.Fatal(err)
	}
	if n := objects(b); n != kept {
		t.Errorf("archived run: %d of its %d objects left", n, kept)
	}
	if _, err := store.Read(ctx, b, 0, 0); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("the archived run is still in the log: %v", err)
	}
	if _, err := readmodel.Restore(context.WithoutCancel(ctx), store, arch, b, time.Hour); err != nil {
		t.Fatal(err)
	}
	whole(b, "B")
}
