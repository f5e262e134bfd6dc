package readmodel_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
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

// envInt is the environment variable name as a positive number, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// largeRuns is a store whose bodies over 1 KiB are kept beside the log,
// and its read model.
type largeRuns struct {
	store events.Store
	js    jetstream.JetStream
	model *readmodel.Model
}

func newLargeRuns(t *testing.T, ctx context.Context) *largeRuns {
	t.Helper()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	store, err := eventlog.Open(ctx, js, eventlog.WithOffloadAt(1024))
	if err != nil {
		t.Fatal(err)
	}
	m, err := readmodel.Ensure(ctx, js, store.StreamName(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	return &largeRuns{store: store, js: js, model: m}
}

// write appends n ended runs, each started with an input and completed
// with an output of 4 KiB (two objects beside the log), indexed in the
// read model with the given retention.
func (l *largeRuns) write(t *testing.T, ctx context.Context, n int, retention time.Duration) []string {
	t.Helper()
	runs := make([]string, n)
	for i := range runs {
		run := events.NewRunID()
		runs[i] = run
		in, _ := json.Marshal(map[string]string{"in": run + strings.Repeat("i", 4096)})
		out, _ := json.Marshal(map[string]string{"out": run + strings.Repeat("o", 4096)})
		start, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: "large", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"large"}`)), Graph: []byte(`{"name":"large"}`),
			Input: in, Retention: retention.String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		end, err := events.New(run, eventlog.DecisionID(run, events.RunCompleted), time.Time{}, &events.RunCompletedData{Output: out})
		if err != nil {
			t.Fatal(err)
		}
		eventlog.MarkDecision(end)
		if _, err := l.store.Append(ctx, run, 0, start); err != nil {
			t.Fatal(err)
		}
		if _, err := eventlog.Must(l.store).AppendDecisions(ctx, run, events.AnySeq, end); err != nil {
			t.Fatal(err)
		}
		s := l.read(t, ctx, run)
		if err := l.model.Put(ctx, readmodel.Summarize(s, time.Hour), false); err != nil {
			t.Fatal(err)
		}
	}
	return runs
}

// read folds a live run, checking that its output is read back whole.
func (l *largeRuns) read(t *testing.T, ctx context.Context, run string) *projection.State {
	t.Helper()
	evs, err := l.store.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return wholeRun(t, run, evs)
}

// wholeRun folds a run's events: ended, its output whole.
func wholeRun(t *testing.T, run string, evs []*events.Event) *projection.State {
	t.Helper()
	s := projection.Fold(evs)
	if s.Status != projection.RunCompleted || !bytes.Contains(s.Output, []byte(run+strings.Repeat("o", 4096))) {
		t.Fatalf("run %s: %s with a %d-byte output, want it completed with its output whole", run, s.Status, len(s.Output))
	}
	return s
}

// objects lists the payloads bucket's objects by run.
func (l *largeRuns) objects(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	obs, err := l.js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, info := range infos {
		run, _, _ := strings.Cut(info.Name, ".")
		out[run]++
	}
	return out
}

// TestSweepRemovesLargePayloads: a retention sweep over ended runs whose
// input and output are kept beside the log (two objects each), half of
// them removed without an archive and half archived (after a sweep to an
// archive that fails, which removes nothing): once they are gone,
// the payloads bucket holds none of their objects, only those of the
// runs still kept, which read whole; an archived run reads whole from its
// archive. WEFT_PAYLOADGC_RUNS sets how many runs each sweep removes (8),
// WEFT_PAYLOADGC_KEPT how many runs are kept (3); the sweeps' times are
// logged:
//
//	WEFT_PAYLOADGC_RUNS=300 WEFT_PAYLOADGC_KEPT=1000 go test -v -count=1 -run '^TestSweepRemovesLargePayloads$' ./internal/readmodel/
func TestSweepRemovesLargePayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, k := envInt(t, "WEFT_PAYLOADGC_RUNS", 8), envInt(t, "WEFT_PAYLOADGC_KEPT", 3)
	l := newLargeRuns(t, ctx)
	kept := l.write(t, ctx, k, 1000*time.Hour)
	plain := l.write(t, ctx, n, time.Hour)
	if got := l.objects(t, ctx); len(got) != n+k || got[plain[0]] != 2 {
		t.Fatalf("objects by run: %d runs, want %d with two each", len(got), n+k)
	}
	// The first sweep removes the plain runs only: the others are
	// written after it.
	t0 := time.Now()
	res, err := readmodel.Sweep(ctx, l.store, nil, time.Now().Add(2*time.Hour), 0, quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if len(res.Removed) != n || len(res.Failed) != 0 {
		t.Fatalf("sweep without an archive: %d removed, failed %v; want %d", len(res.Removed), res.Failed, n)
	}
	t.Logf("%d runs with 2 objects each, among %d kept runs' objects: swept without an archive in %s", n, 2*k, took.Round(time.Millisecond))
	archivedRuns := l.write(t, ctx, n, time.Hour)
	// An archive that fails removes nothing: the objects stay with the
	// runs, which read whole.
	if res, err = readmodel.Sweep(ctx, l.store, failingArchive{}, time.Now().Add(2*time.Hour), 0, quiet(t)); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || len(res.Failed) != n {
		t.Fatalf("sweep to a failing archive: %d removed, %d failed; want none and %d", len(res.Removed), len(res.Failed), n)
	}
	if got := l.objects(t, ctx); len(got) != n+k || got[archivedRuns[0]] != 2 {
		t.Fatalf("after a failed archive: objects of %d runs, want %d with two each", len(got), n+k)
	}
	l.read(t, ctx, archivedRuns[0])
	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if res, err = readmodel.Sweep(ctx, l.store, arch, time.Now().Add(2*time.Hour), 0, quiet(t)); err != nil {
		t.Fatal(err)
	}
	tookArchived := time.Since(t1)
	if len(res.Removed) != n || len(res.Failed) != 0 {
		t.Fatalf("sweep to an archive: %d removed, failed %v; want %d", len(res.Removed), res.Failed, n)
	}
	got := l.objects(t, ctx)
	for _, run := range slices.Concat(plain, archivedRuns) {
		if got[run] != 0 {
			t.Errorf("removed run %s: %d objects left", run, got[run])
		}
	}
	for _, run := range kept {
		if got[run] != 2 {
			t.Errorf("kept run %s: %d objects, want its 2", run, got[run])
		}
		l.read(t, ctx, run)
	}
	if len(got) != len(kept) {
		t.Errorf("objects of %d runs left, want the %d kept runs'", len(got), len(kept))
	}
	evs, err := readmodel.Read(ctx, l.store, arch, archivedRuns[0])
	if err != nil {
		t.Fatal(err)
	}
	wholeRun(t, archivedRuns[0], evs)
	t.Logf("%d runs with 2 objects each: swept to a directory archive in %s", n, tookArchived.Round(time.Millisecond))
}

// TestArchivedSealedPayloads: under a key ring, a run's objects are
// sealed, and so they stay in its archive (the Object Store archive): the archive holds none of the
// run's output in plain, the bucket none of its objects; read from the
// archive and restored, the run's output is whole again.
func TestArchivedSealedPayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := events.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := events.UseKeys(events.KeyRing{k}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.UseKeys(nil) }) // the ring is process-wide
	l := newLargeRuns(t, ctx)
	run := l.write(t, ctx, 1, time.Hour)[0]
	arch, err := readmodel.OpenObjectStore(ctx, l.js, readmodel.ArchiveBucket, l.store.StreamName(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Remove(ctx, l.store, run, arch); err != nil {
		t.Fatal(err)
	}
	if got := l.objects(t, ctx); len(got) != 0 {
		t.Fatalf("objects of %d runs left after the archive, want none", len(got))
	}
	data, err := arch.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	plain, carried := splitArchive(t, data)
	if len(carried) != 2 {
		t.Fatalf("the archive carries %d objects, want the run's 2", len(carried))
	}
	for name, b := range carried {
		if bytes.Contains(b, []byte(strings.Repeat("o", 64))) || bytes.Contains(b, []byte(strings.Repeat("i", 64))) {
			t.Errorf("archived object %s holds the run's data in plain", name)
		}
	}
	if unzipped := gunzip(t, plain); bytes.Contains(unzipped, []byte(strings.Repeat("o", 64))) {
		t.Errorf("the archive's messages hold the run's output in plain")
	}
	evs, err := readmodel.Read(ctx, l.store, arch, run)
	if err != nil {
		t.Fatal(err)
	}
	wholeRun(t, run, evs)
	if _, err := readmodel.Restore(ctx, l.store, arch, run, time.Hour); err != nil {
		t.Fatal(err)
	}
	l.read(t, ctx, run)
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSweepPayloadsLeavesOnlyWhatRunsNeed: objects left behind are found
// by SweepPayloads, which lists the bucket once: a run whose events were
// purged without its objects (a removal cut short), an object whose event
// never landed, a run's copies put back by a restore cut short before its
// first message (its archive carries them). A live run keeps its objects,
// and a run archived by a Weft before this one (its archive holds
// references only, its objects in the bucket) gets an archive that carries
// them, then loses them from the bucket, and still reads and restores
// whole. Objects younger than the grace are left, whatever their run.
//
// Size: one scene of five kinds of runs set up, swept early and late,
// each kind's outcome asserted where it is.
func TestSweepPayloadsLeavesOnlyWhatRunsNeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newLargeRuns(t, ctx)
	runs := l.write(t, ctx, 4, time.Hour)
	live, purged, older, cut := runs[0], runs[1], runs[2], runs[3]
	st, err := l.js.Stream(ctx, l.store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	// A removal cut short: the events purged, the objects left.
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(eventlog.RunFilter(purged))); err != nil {
		t.Fatal(err)
	}
	// An object whose event never landed.
	never := events.NewRunID()
	if err := eventlog.RestorePayload(ctx, l.store, never, never+"."+sha(t, []byte("lost")), []byte("lost")); err != nil {
		t.Fatal(err)
	}
	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A run archived by an older Weft: references only, objects kept.
	if _, err := readmodel.Remove(ctx, l.store, older, arch); err != nil {
		t.Fatal(err)
	}
	data, err := arch.Get(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	refsOnly, carried := splitArchive(t, data)
	if err := arch.Put(ctx, older, refsOnly); err != nil {
		t.Fatal(err)
	}
	for name, b := range carried {
		if err := eventlog.RestorePayload(ctx, l.store, older, name, b); err != nil {
			t.Fatal(err)
		}
	}
	// A restore cut short: the objects back, no message yet.
	if _, err := readmodel.Remove(ctx, l.store, cut, arch); err != nil {
		t.Fatal(err)
	}
	data, err = arch.Get(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	_, carriedCut := splitArchive(t, data)
	for name, b := range carriedCut {
		if err := eventlog.RestorePayload(ctx, l.store, cut, name, b); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{live: 2, purged: 2, never: 1, older: 2, cut: 2}
	if got := l.objects(t, ctx); !maps.Equal(got, want) {
		t.Fatalf("objects by run before the sweep: %v, want %v", got, want)
	}

	// Early: every object is younger than the grace.
	res, err := readmodel.SweepPayloads(ctx, l.store, arch, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 9 || res.Deleted != 0 || len(res.Failed) != 0 {
		t.Fatalf("sweep within the grace: %+v, want 9 objects, none deleted", res)
	}
	// Late: only the live run keeps objects.
	if res, err = readmodel.SweepPayloads(ctx, l.store, arch, time.Now().Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 7 || len(res.Failed) != 0 || !slices.Equal(res.Migrated, []string{older}) {
		t.Fatalf("sweep past the grace: %+v, want 7 deleted, the older archive migrated", res)
	}
	if got := l.objects(t, ctx); !maps.Equal(got, map[string]int{live: 2}) {
		t.Fatalf("objects by run after the sweep: %v, want the live run's 2", got)
	}
	l.read(t, ctx, live)
	if data, err = arch.Get(ctx, older); err != nil {
		t.Fatal(err)
	}
	if _, carried := splitArchive(t, data); len(carried) != 2 {
		t.Fatalf("the older run's archive carries %d objects, want its 2", len(carried))
	}
	for _, run := range []string{older, cut} {
		evs, err := readmodel.Read(ctx, l.store, arch, run)
		if err != nil {
			t.Fatal(err)
		}
		wholeRun(t, run, evs)
		if _, err := readmodel.Restore(ctx, l.store, arch, run, time.Hour); err != nil {
			t.Fatal(err)
		}
		l.read(t, ctx, run)
	}
}

func sha(t *testing.T, b []byte) string {
	t.Helper()
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestArchivedObjectTamperedWith: an archive whose carried object is not
// its name's bytes (one byte changed), or is named as another run's, is
// refused whole, reading and restoring, with an error naming the object;
// nothing is put back. A run one of whose objects (a late signal's) was
// overwritten in the bucket is archived and removed all the same, that
// event refused in the archive as it is in the log.
func TestArchivedObjectTamperedWith(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newLargeRuns(t, ctx)
	run := l.write(t, ctx, 1, time.Hour)[0]
	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Remove(ctx, l.store, run, arch); err != nil {
		t.Fatal(err)
	}
	data, err := arch.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	refsOnly, carried := splitArchive(t, data)
	var name string
	for n := range carried {
		name = n
	}
	other := events.NewRunID()
	for _, tc := range []struct{ what, object, want string }{
		{"a changed byte", name, "not its digest"},
		{"another run's name", other + "." + strings.TrimPrefix(name, run+"."), "not the name of one of run " + run},
	} {
		obj := bytes.Clone(carried[name])
		if tc.object == name {
			obj[len(obj)/2] ^= 1
		}
		line, _ := json.Marshal(map[string]any{"object": tc.object, "data": obj})
		tampered := append(gunzip(t, refsOnly), append(line, '\n')...)
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(tampered)
		_ = zw.Close()
		if err := arch.Put(ctx, run, buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		if _, err := readmodel.Read(ctx, l.store, arch, run); err == nil || !strings.Contains(err.Error(), tc.object) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: read %v, want an error naming %s: %q", tc.what, err, tc.object, tc.want)
		}
		if _, err := readmodel.Restore(ctx, l.store, arch, run, time.Hour); err == nil || !strings.Contains(err.Error(), tc.object) {
			t.Errorf("%s: restore %v, want an error naming %s", tc.what, err, tc.object)
		}
		if got := l.objects(t, ctx); len(got) != 0 {
			t.Errorf("%s: objects put back: %v", tc.what, got)
		}
		if _, err := l.store.Read(ctx, run, 0, 0); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("%s: the run is in the log: %v", tc.what, err)
		}
	}

	// An object overwritten in the bucket: its event is refused, live or
	// archived, and the run is archived and removed all the same.
	run = l.write(t, ctx, 1, time.Hour)[0]
	late, _ := json.Marshal(map[string]string{"late": strings.Repeat("l", 4096)})
	sig, err := events.New(run, run+":late", time.Time{}, &events.SignalReceivedData{Node: "n", Data: late})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.Append(ctx, run, events.AnySeq, sig); err != nil {
		t.Fatal(err)
	}
	names, err := eventlog.RunPayloads(ctx, l.store, run)
	if err != nil || len(names) != 3 {
		t.Fatalf("run's objects %v, %v; want 3", names, err)
	}
	obs, err := l.js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, names[2], []byte(`{"forged":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Remove(ctx, l.store, run, arch); err != nil {
		t.Fatalf("removing a run with an overwritten object: %v", err)
	}
	if got := l.objects(t, ctx); len(got) != 0 {
		t.Errorf("objects left: %v", got)
	}
	evs, err := readmodel.Read(ctx, l.store, arch, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || !errors.Is(evs[2].Refused, events.ErrMalformedEvent) {
		t.Fatalf("the archived run: %d events; want its late signal refused", len(evs))
	}
	wholeRun(t, run, evs)
}
