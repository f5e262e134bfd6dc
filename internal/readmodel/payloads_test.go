package readmodel_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestLargePayloadsGoWithTheRun: runs whose input and output are kept
// beside the log (512 KiB each, over the 256 KiB default; the runs
// complete) lose their objects
// when they are removed, and only theirs. An archived run's objects go
// into its archive with its events and leave the bucket: read from the
// archive, and restored (its objects put back), the run's output is the
// bytes it was; removed again, nothing of it is left in the bucket. An
// archive written before archives carried objects (references only, the
// objects left in the bucket) still reads and restores whole.
//
// Size: one run's life through remove, archive, read, restore and an
// older archive, each step asserted where it happens.
func TestLargePayloadsGoWithTheRun(t *testing.T) {
	ctx := timeout(t)
	c, store := engine(t, time.Hour)
	g := mustGraph(t, "name: big\nnodes: [{id: e, type: echo}]\nedges: [{from: START, to: e}, {from: e, to: END}]\n")
	blob := strings.Repeat("b", 512<<10)
	runs := startAll(t, ctx, c, g, []map[string]any{{"blob": "A" + blob}, {"blob": "B" + blob}})
	testkit.WaitEnded(t, store, runs, 60*time.Second)
	js := eventlog.JetStream(store)
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	objects := func(run string) int {
		t.Helper()
		infos, err := obs.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Fatal(err)
		}
		n := 0
		for _, info := range infos {
			if strings.HasPrefix(info.Name, run) {
				n++
			}
		}
		return n
	}
	// whole checks that evs hold the run's large input, none refused,
	// and fold to the output its node ended with.
	var output []byte
	whole := func(from string, evs []*events.Event, marker string) {
		t.Helper()
		found := false
		for _, e := range evs {
			if e.Refused != nil {
				t.Fatalf("%s: event %d refused: %v", from, e.Seq, e.Refused)
			}
			found = found || bytes.Contains(e.Data, []byte(marker+blob[:64]))
		}
		var out []byte
		if n := projection.Fold(evs).Nodes["e"]; n != nil {
			out = n.Output
		}
		if !found || len(out) < len(blob) || output != nil && !bytes.Equal(out, output) {
			t.Fatalf("%s: the large input (found %t) or the %d-byte output is not read back whole", from, found, len(out))
		}
		output = out
	}
	live := func(run string) []*events.Event {
		t.Helper()
		evs, err := store.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return evs
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
	whole("run b, live", live(b), "B")

	// Archived: the objects leave the bucket with the events.
	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kept := objects(b)
	if _, err := readmodel.Remove(ctx, store, b, arch); err != nil {
		t.Fatal(err)
	}
	if n := objects(""); n != 0 {
		t.Errorf("archived run: %d objects left in the bucket", n)
	}
	if _, err := store.Read(ctx, b, 0, 0); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("the archived run is still in the log: %v", err)
	}
	evs, err := readmodel.Read(ctx, store, arch, b)
	if err != nil {
		t.Fatal(err)
	}
	whole("run b, read from its archive", evs, "B")
	if _, err := readmodel.Restore(context.WithoutCancel(ctx), store, arch, b, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := objects(b); n != kept {
		t.Errorf("restored run: %d of its %d objects back", n, kept)
	}
	whole("run b, restored", live(b), "B")

	// An older archive: the references alone, the objects left in the
	// bucket (as a Weft before this one archived).
	data, err := arch.Get(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	refsOnly, carried := splitArchive(t, data)
	if len(carried) != kept {
		t.Fatalf("the archive carries %d objects, want the run's %d", len(carried), kept)
	}
	older, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := older.Put(ctx, b, refsOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Remove(ctx, store, b, nil); err != nil {
		t.Fatal(err)
	}
	if n := objects(""); n != 0 {
		t.Fatalf("removed without an archive: %d objects left in the bucket", n)
	}
	for name, obj := range carried {
		if err := eventlog.RestorePayload(ctx, store, b, name, obj); err != nil {
			t.Fatal(err)
		}
	}
	if evs, err = readmodel.Read(ctx, store, older, b); err != nil {
		t.Fatal(err)
	}
	whole("run b, read from an older archive", evs, "B")
	if _, err := readmodel.Restore(context.WithoutCancel(ctx), store, older, b, time.Hour); err != nil {
		t.Fatal(err)
	}
	whole("run b, restored from an older archive", live(b), "B")
	if _, err := readmodel.Remove(ctx, store, b, nil); err != nil {
		t.Fatal(err)
	}
	if n := objects(""); n != 0 {
		t.Errorf("at the end: %d objects left in the bucket", n)
	}
}

// splitArchive splits an archive object into one without the payload
// objects it carries (as an older Weft wrote it) and those objects.
func splitArchive(t *testing.T, data []byte) ([]byte, map[string][]byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	objects := map[string][]byte{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r struct {
			Object string `json:"object"`
			Data   []byte `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Object != "" {
			objects[r.Object] = append(objects[r.Object], r.Data...)
			continue
		}
		_, _ = zw.Write(append(sc.Bytes(), '\n'))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), objects
}
