package readmodel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
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

const chainYAML = `
name: chain
retention: 1h
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
  - {id: c, type: echo}
  - {id: d, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: d}
  - {from: d, to: END}
`

// foldWithoutSeq is a run's fold as JSON with its stream positions (LastSeq,
// and StartSeq, where its start sits) cleared: a restore gives the run new
// sequences.
func foldWithoutSeq(evs []*events.Event) string {
	s := projection.Fold(evs)
	s.LastSeq, s.StartSeq = 0, 0
	return string(s.Marshal())
}

// TestRestoreFoldsAsBefore: a removed run restored from its archive is
// live again, on its own subjects, and folds to the state it had before
// the archive (but for LastSeq); the engine's coordinator and worker pass
// its messages over (nothing is appended, no node runs again); its
// read-model entry is back, kept for its retention from the restore; a
// second restore, and a restore of a run that was never removed, are
// refused; a restore cut short is completed by the next.
func TestRestoreFoldsAsBefore(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	// A longer run, restored in an atomic batch rather than one by one.
	long := startAll(t, ctx, f.c, mustGraph(t, chainYAML), []map[string]any{{"customer": "lee"}})[0]
	testkit.WaitEnded(t, f.store, []string{long}, 30*time.Second)
	f.status[long] = projection.RunCompleted
	waitIndexed(t, ctx, f.store, map[string]projection.RunStatus{long: projection.RunCompleted})
	targets := []string{f.orders[0], f.broken[0], long}
	before := map[string]string{}
	counts := map[string]int{}
	for _, r := range targets {
		evs, err := f.store.Read(ctx, r, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		before[r], counts[r] = foldWithoutSeq(evs), len(evs)
	}
	if counts[long] <= 8 {
		t.Fatalf("the long run has %d events, want more than 8", counts[long])
	}
	arch, err := readmodel.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range targets {
		if _, err := readmodel.Remove(ctx, f.store, r, arch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readmodel.Restore(ctx, f.store, arch, f.orders[1], defaultRetention); !errors.Is(err, readmodel.ErrLive) {
		t.Errorf("restoring a live run that was never archived: %v, want ErrLive", err)
	}
	for _, r := range targets {
		res, err := readmodel.Restore(ctx, f.store, arch, r, defaultRetention)
		if err != nil {
			t.Fatalf("restoring %s: %v", r, err)
		}
		if res.Events != counts[r] || res.Status != f.status[r] {
			t.Errorf("restore of %s = %+v, want %d events, status %s", r, res, counts[r], f.status[r])
		}
		if _, err := readmodel.Restore(ctx, f.store, arch, r, defaultRetention); !errors.Is(err, readmodel.ErrLive) {
			t.Errorf("restoring %s again: %v, want ErrLive", r, err)
		}
		sum, err := f.c.Summary(ctx, r)
		if err != nil || sum.Status != f.status[r] || sum.Restored.IsZero() {
			t.Fatalf("read-model entry of restored run %s: %+v, %v; want it marked restored", r, sum, err)
		}
		// orders keep their runs 1h, broken ones the default: from now.
		if keep := time.Until(sum.ExpiresAt); keep < 50*time.Minute {
			t.Errorf("restored run %s expires in %s, want its retention from the restore", r, keep)
		}
	}
	// Rebuilt from the log, the entries count the retention from the
	// restore too.
	if _, err := readmodel.Reindex(ctx, f.store, defaultRetention, quiet(t)); err != nil {
		t.Fatal(err)
	}
	for _, r := range targets {
		if sum, err := f.c.Summary(ctx, r); err != nil || time.Until(sum.ExpiresAt) < 50*time.Minute {
			t.Errorf("reindexed entry of restored run %s: %+v, %v; want it kept from the restore", r, sum, err)
		}
	}
	// The engine has seen every restored message and acted on none.
	waitConsumersIdle(t, ctx, f.store)
	for _, r := range targets {
		evs, err := f.store.Read(ctx, r, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != counts[r] {
			t.Errorf("restored run %s has %d events, want %d: the engine acted on it", r, len(evs), counts[r])
		}
		if got := foldWithoutSeq(evs); got != before[r] {
			t.Errorf("fold of restored run %s differs from its fold before the archive:\n got %s\nwant %s", r, got, before[r])
		}
		for _, e := range evs {
			if e.Restored.IsZero() || !e.Stored.Before(e.Restored) {
				t.Errorf("event %s of %s: stored %s, restored %s; want the original stamp kept", e.ID, r, e.Stored, e.Restored)
			}
		}
	}

	// A restore cut short: the last two messages did not land.
	r := f.orders[0]
	if _, err := readmodel.Remove(ctx, f.store, r, arch); err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Restore(ctx, f.store, arch, r, defaultRetention); err != nil {
		t.Fatal(err)
	}
	evs, err := f.store.Read(ctx, r, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.JetStream(f.store).Stream(ctx, f.store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[len(evs)-2:] {
		if err := st.DeleteMsg(ctx, e.Seq); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readmodel.Restore(ctx, f.store, arch, r, defaultRetention); err != nil {
		t.Fatalf("completing a restore cut short: %v", err)
	}
	evs, err = f.store.Read(ctx, r, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := foldWithoutSeq(evs); len(evs) != counts[r] || got != before[r] {
		t.Errorf("completed restore of %s: %d events, want %d; fold\n got %s\nwant %s", r, len(evs), counts[r], got, before[r])
	}

	// An archive of a run that had not ended does not come back: the
	// engine would never take it up.
	data, _, err := readmodel.Encode(ctx, f.store, f.waiting)
	if err != nil {
		t.Fatal(err)
	}
	if err := arch.Put(ctx, f.waiting, data); err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Restore(ctx, f.store, arch, f.waiting, defaultRetention); !errors.Is(err, readmodel.ErrNotEnded) {
		t.Errorf("restoring an archive of a running run: %v, want ErrNotEnded", err)
	}

	// A writer that marks its own event restored is not passed over: the
	// run was not restored (the read model says so), and the signal is
	// decided on.
	sig, err := events.New(f.waiting, eventlog.RandomID(), time.Time{}, &events.SignalReceivedData{Node: "ask", Data: []byte(`{"ok":true}`), By: "forger"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := eventlog.Encode(sig)
	if err != nil {
		t.Fatal(err)
	}
	msg.Header.Set(eventlog.HdrRestored, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano))
	if _, err := eventlog.JetStream(f.store).PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if st := testkit.WaitEnded(t, f.store, []string{f.waiting}, 30*time.Second)[f.waiting]; st.Status != projection.RunCompleted {
		t.Errorf("run signalled with a forged restored mark: %s, want completed", st.Status)
	}

	// Bad input: no such run, not a run id, no archive.
	if _, err := readmodel.Restore(ctx, f.store, arch, "nosuchrun", defaultRetention); !errors.Is(err, readmodel.ErrNotArchived) {
		t.Errorf("restoring an unknown run: %v, want ErrNotArchived", err)
	}
	for _, bad := range []string{"a.b", "", "run>"} {
		if _, err := readmodel.Restore(ctx, f.store, arch, bad, defaultRetention); err == nil {
			t.Errorf("restoring run %q: no error", bad)
		}
	}
	if _, err := readmodel.Restore(ctx, f.store, nil, f.broken[1], defaultRetention); err == nil {
		t.Error("restoring with no archive: no error")
	}
	if _, err := readmodel.Restore(ctx, f.store, arch, f.broken[1], -time.Hour); err == nil {
		t.Error("restoring with a negative retention: no error")
	}
}

// waitConsumersIdle waits until every consumer of the events stream has
// had every message delivered and acknowledged.
func waitConsumersIdle(t *testing.T, ctx context.Context, store events.Store) {
	t.Helper()
	st, err := eventlog.JetStream(store).Stream(ctx, store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	for {
		var busy []string
		names := st.ConsumerNames(ctx)
		for name := range names.Name() {
			c, err := st.Consumer(ctx, name)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if info := c.CachedInfo(); info.NumPending > 0 || info.NumAckPending > 0 {
				busy = append(busy, name)
			}
		}
		if names.Err() != nil {
			t.Fatal(names.Err())
		}
		if len(busy) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("consumers %v still have messages to handle", slices.Sorted(slices.Values(busy)))
		}
		// Polls: consumer info is a read, which notifies nobody.
		time.Sleep(20 * time.Millisecond)
	}
}

// TestArchiveSettingsRefused: retention and archive settings that cannot
// be honoured get an error that names them, and change nothing.
func TestArchiveSettingsRefused(t *testing.T) {
	ctx := timeout(t)
	_, store := testkit.Store(t)
	js := eventlog.JetStream(store)
	dir := t.TempDir()
	arch, err := readmodel.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, setting string
		wants         []string
	}{
		{"missing bucket", "nosuchbucket", []string{"nosuchbucket", "does not exist"}},
		{"missing bucket, obj:", "obj:nosuchbucket", []string{"nosuchbucket", "does not exist"}},
		{"bad bucket name", "obj:bad.name", []string{"bad.name", "not a valid bucket name"}},
		{"missing directory", "dir:/nonexistent/weft", []string{"dir:/nonexistent/weft"}},
		{"not a directory", "dir:" + file, []string{file, "not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readmodel.ParseArchive(ctx, js, store.StreamName(), tc.setting, false)
			if err == nil {
				t.Fatalf("ParseArchive(%q): no error", tc.setting)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseArchive(%q) = %v, want it to name %q", tc.setting, err, w)
				}
			}
		})
	}
	if _, err := js.ObjectStore(ctx, "nosuchbucket"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("a refused archive setting created its bucket: %v", err)
	}
	if _, err := readmodel.Reindex(ctx, store, -time.Hour, quiet(t)); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("Reindex with a negative retention: %v, want an error naming the retention", err)
	}
	if _, err := readmodel.Sweep(ctx, store, arch, time.Now(), 0, quiet(t)); !errors.Is(err, readmodel.ErrNoReadModel) {
		t.Errorf("Sweep with no read model: %v, want ErrNoReadModel", err)
	}
	// A run that does not exist: nothing is archived, nothing purged.
	if _, err := readmodel.Remove(ctx, store, "nosuchrun", arch); !errors.Is(err, events.ErrRunNotFound) {
		t.Errorf("removing an unknown run: %v, want ErrRunNotFound", err)
	}
	if _, err := readmodel.Remove(ctx, store, "a.b", arch); err == nil {
		t.Error("removing run a.b: no error")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the archive holds %d files after refused removals, want only the plain file", len(ents))
	}
	if _, err := arch.Get(ctx, "nosuchrun"); !errors.Is(err, readmodel.ErrNotArchived) {
		t.Errorf("Get of an unknown run: %v, want ErrNotArchived", err)
	}
}
