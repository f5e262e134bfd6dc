package readmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const ordersYAML = `
name: orders
retention: 1h
searchAttributes: [customer, region]
nodes:
  - id: greet
    type: echo
edges:
  - {from: START, to: greet}
  - {from: greet, to: END}
`

const brokenYAML = `
name: broken
searchAttributes: [customer]
nodes:
  - id: boom
    type: fail
    config: {retryable: false}
edges:
  - {from: START, to: boom}
  - {from: boom, to: END}
`

const approveYAML = `
name: approve
nodes:
  - id: ask
    type: human
edges:
  - {from: START, to: ask}
  - {from: ask, to: END}
`

const defaultRetention = 48 * time.Hour

// fixture starts an engine and, on it, three orders runs, two broken runs
// and one run waiting for a person, and waits until the read model has
// them all.
type fixture struct {
	c              *client.Client
	store          events.Store
	orders, broken []string
	waiting        string
	all            []string
	status         map[string]projection.RunStatus
	startedBefore  time.Time
}

func newFixture(t *testing.T, ctx context.Context) *fixture {
	t.Helper()
	c, store := engine(t, defaultRetention)
	f := &fixture{c: c, store: store, status: map[string]projection.RunStatus{}}
	f.orders = startAll(t, ctx, c, mustGraph(t, ordersYAML), []map[string]any{
		{"customer": "acme", "region": "eu"}, {"customer": "acme", "region": "us"}, {"customer": "zeta", "region": "eu"},
	})
	f.broken = startAll(t, ctx, c, mustGraph(t, brokenYAML), []map[string]any{{"customer": "acme"}, {"customer": "acme"}})
	f.waiting = startAll(t, ctx, c, mustGraph(t, approveYAML), []map[string]any{{}})[0]
	f.startedBefore = time.Now()
	testkit.WaitEnded(t, store, append(slices.Clone(f.orders), f.broken...), 30*time.Second)
	for _, r := range f.orders {
		f.status[r] = projection.RunCompleted
	}
	for _, r := range f.broken {
		f.status[r] = projection.RunFailed
	}
	f.status[f.waiting] = projection.RunWaiting // it only waits, on a person
	f.all = slices.Concat(f.orders, f.broken, []string{f.waiting})
	waitIndexed(t, ctx, store, f.status)
	return f
}

func ids(rs []readmodel.Summary) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.RunID
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestReadModelFilters: the coordinator keeps one summary per run, and
// List filters it by status, graph, time and search attribute, pages
// through it with a cursor, and counts.
func TestReadModelFilters(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)

	sum, err := f.c.Summary(ctx, f.orders[0])
	if err != nil {
		t.Fatal(err)
	}
	if sum.Graph != "orders" || sum.GraphDigest == "" || sum.StartedAt.IsZero() || sum.EndedAt.IsZero() {
		t.Errorf("summary = %+v, want graph, digest, start and end", sum)
	}
	if want := map[string]string{"customer": "acme", "region": "eu"}; !reflect.DeepEqual(sum.Attrs, want) {
		t.Errorf("attrs = %v, want %v", sum.Attrs, want)
	}
	if got := sum.ExpiresAt.Sub(sum.EndedAt); got != time.Hour {
		t.Errorf("orders run expires %s after its end, want the graph's 1h", got)
	}
	bsum, err := f.c.Summary(ctx, f.broken[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := bsum.ExpiresAt.Sub(bsum.EndedAt); got != defaultRetention {
		t.Errorf("broken run expires %s after its end, want the coordinator's %s", got, defaultRetention)
	}
	wsum, err := f.c.Summary(ctx, f.waiting)
	if err != nil {
		t.Fatal(err)
	}
	if !wsum.ExpiresAt.IsZero() || !wsum.EndedAt.IsZero() {
		t.Errorf("a running run has an end or an expiry: %+v", wsum)
	}
	// It waits on its human node, with no deadline, and says how to answer.
	if len(wsum.Waiting) != 1 || wsum.Waiting[0].Node != "ask" || wsum.Waiting[0].For != "signal" || wsum.Waiting[0].Deadline != nil ||
		readmodel.SignalCommand(wsum.RunID, wsum.Waiting[0]) != "weft signal "+f.waiting+" ask -data '{}'" {
		t.Errorf("waiting run's waits: %+v", wsum.Waiting)
	}

	for _, tc := range []struct {
		name string
		opts []client.ListOption
		want []string
	}{
		{"all", nil, f.all},
		{"failed", []client.ListOption{client.WithStatus(projection.RunFailed)}, f.broken},
		{"running (waiting included)", []client.ListOption{client.WithStatus(projection.RunRunning)}, []string{f.waiting}},
		{"waiting", []client.ListOption{client.WithStatus(projection.RunWaiting)}, []string{f.waiting}},
		{"running or waiting", []client.ListOption{client.WithStatus(projection.RunRunning, projection.RunWaiting)}, []string{f.waiting}},
		{"completed or failed", []client.ListOption{client.WithStatus(projection.RunCompleted, projection.RunFailed)}, slices.Concat(f.orders, f.broken)},
		{"graph", []client.ListOption{client.WithGraph("orders")}, f.orders},
		{"graph and status", []client.ListOption{client.WithGraph("orders"), client.WithStatus(projection.RunFailed)}, nil},
		{"attr", []client.ListOption{client.WithAttr("customer", "acme")}, slices.Concat(f.orders[:2], f.broken)},
		{"two attrs", []client.ListOption{client.WithAttr("customer", "acme"), client.WithAttr("region", "eu")}, f.orders[:1]},
		{"since", []client.ListOption{client.WithStartedBetween(f.startedBefore.Add(-time.Hour), time.Time{})}, f.all},
		{"until", []client.ListOption{client.WithStartedBetween(time.Time{}, f.startedBefore.Add(-time.Hour))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := f.c.ListPage(ctx, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p.Runs); !slices.Equal(sorted(got), sorted(tc.want)) {
				t.Errorf("runs = %v, want %v", got, tc.want)
			}
			if p.Total != len(tc.want) {
				t.Errorf("total = %d, want %d", p.Total, len(tc.want))
			}
			if !slices.IsSortedFunc(p.Runs, readmodel.Newer) {
				t.Errorf("not newest first: %v", ids(p.Runs))
			}
		})
	}

	// Paging: pages of 4 cover every run once, newest first.
	for _, filter := range [][]client.ListOption{nil, {client.WithAttr("customer", "acme")}} {
		var got []string
		cursor := ""
		for range 10 {
			p, err := f.c.ListPage(ctx, append([]client.ListOption{client.WithLimit(2), client.WithCursor(cursor)}, filter...)...)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(p.Runs)...)
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		all, err := f.c.List(ctx, filter...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ids(all)) {
			t.Errorf("pages = %v, want %v", got, ids(all))
		}
	}

	// Bad queries are refused with the setting named.
	for _, bad := range []client.ListOption{client.WithStatus("bogus"), client.WithLimit(-1), client.WithCursor("a.b"),
		client.WithStartedBetween(time.Now(), time.Now().Add(-time.Hour))} {
		if _, err := f.c.List(ctx, bad); err == nil {
			t.Error("a bad query was answered")
		}
	}
}

// TestListWithoutEventsStream: listing never reads the events stream: it
// answers with the stream gone.
func TestListWithoutEventsStream(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	js := eventlog.JetStream(f.store)
	// The coordinator may still write to the stream; once it is gone, it
	// has nothing to decide.
	if err := js.DeleteStream(ctx, f.store.StreamName()); err != nil {
		t.Fatal(err)
	}
	p, err := f.c.ListPage(ctx, client.WithStatus(projection.RunFailed))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(ids(p.Runs)), sorted(f.broken)) || p.Total != 2 {
		t.Errorf("failed runs = %v (total %d), want %v", ids(p.Runs), p.Total, f.broken)
	}
	all, err := f.c.List(ctx, client.WithGraph("orders"))
	if err != nil || len(all) != 3 {
		t.Errorf("orders runs = %v, %v; want 3", ids(all), err)
	}
}

// TestReindexEqualsLive: the read model rebuilt from the log equals the
// one the coordinator kept.
func TestReindexEqualsLive(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	live, err := f.c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	js := eventlog.JetStream(f.store)
	if err := js.DeleteKeyValue(ctx, readmodel.Bucket); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(f.store).List(ctx); !errors.Is(err, readmodel.ErrNoReadModel) {
		t.Fatalf("List with no bucket: %v, want ErrNoReadModel", err)
	}
	res, err := readmodel.Reindex(ctx, f.store, defaultRetention, quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Indexed != len(f.all) {
		t.Errorf("indexed %d runs, want %d", res.Indexed, len(f.all))
	}
	rebuilt, err := client.New(f.store).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(live)
	b, _ := json.Marshal(rebuilt)
	if string(a) != string(b) {
		t.Errorf("rebuilt read model differs from the live one:\nlive:    %s\nrebuilt: %s", a, b)
	}
	// A stray entry of a run the log does not have goes.
	m, err := readmodel.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, readmodel.Summary{RunID: "ghost", Status: projection.RunCompleted}, true); err != nil {
		t.Fatal(err)
	}
	if res, err = readmodel.Reindex(ctx, f.store, defaultRetention, nil); err != nil || res.Dropped != 1 {
		t.Errorf("reindex = %+v, %v; want one entry dropped", res, err)
	}
	if _, err := m.Get(ctx, "ghost"); !errors.Is(err, readmodel.ErrNotFound) {
		t.Errorf("ghost entry: %v, want ErrNotFound", err)
	}
	if _, err := readmodel.Reindex(ctx, f.store, -time.Hour, nil); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("reindex with a negative retention: %v, want an error naming the retention", err)
	}
}

// subjectsOf counts the subjects the run has in the stream.
func subjectsOf(t *testing.T, ctx context.Context, store events.Store, stream, filter string) int {
	t.Helper()
	st, err := eventlog.JetStream(store).Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	return len(info.State.Subjects)
}

// TestRetentionArchivesAndRemoves: a sweep past the retention archives
// the ended runs whose time came and purges their subjects; the run that
// has not ended, and the ended runs whose time has not come, stay; an
// archived run reads, and folds, as its live log did.
func TestRetentionArchivesAndRemoves(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	// One more orders run, kept for a minute only.
	short := startAll(t, ctx, f.c, mustGraph(t, ordersYAML), []map[string]any{{"customer": "kim"}}, client.WithRetention(time.Minute))[0]
	testkit.WaitEnded(t, f.store, []string{short}, 30*time.Second)
	waitIndexed(t, ctx, f.store, map[string]projection.RunStatus{short: projection.RunCompleted})
	if s, err := f.c.Summary(ctx, short); err != nil || s.ExpiresAt.Sub(s.EndedAt) != time.Minute {
		t.Fatalf("short run: %+v, %v; want it kept a minute", s, err)
	}

	live := map[string]*projection.State{}
	for _, r := range append(slices.Clone(f.all), short) {
		st, err := f.c.Get(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		live[r] = st
	}
	arch, err := readmodel.OpenObjectStore(ctx, eventlog.JetStream(f.store), readmodel.ArchiveBucket, f.store.StreamName(), true)
	if err != nil {
		t.Fatal(err)
	}

	// Ten minutes on: only the short run's time has come.
	res, err := readmodel.Sweep(ctx, f.store, arch, time.Now().Add(10*time.Minute), 0, quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].RunID != short || res.Removed[0].Archived == "" {
		t.Fatalf("sweep at +10m = %+v, want the short run archived and removed", res)
	}
	// Three days on: every ended run goes, the waiting one stays.
	res, err = readmodel.Sweep(ctx, f.store, arch, time.Now().Add(72*time.Hour), 0, quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sorted(removedIDs(res)), sorted(slices.Concat(f.orders, f.broken)); !slices.Equal(got, want) || len(res.Failed) > 0 {
		t.Fatalf("sweep at +72h removed %v (failed %v), want %v", got, res.Failed, want)
	}
	for _, r := range slices.Concat(f.orders, f.broken, []string{short}) {
		if n := subjectsOf(t, ctx, f.store, f.store.StreamName(), eventlog.RunFilter(r)); n != 0 {
			t.Errorf("run %s left %d subjects in the stream", r, n)
		}
		if _, err := f.store.Read(ctx, r, 0, 0); !isNotFound(err) {
			t.Errorf("live read of removed run %s: %v, want not found", r, err)
		}
		if _, err := f.c.Summary(ctx, r); !errors.Is(err, readmodel.ErrNotFound) {
			t.Errorf("read model still has removed run %s: %v", r, err)
		}
		// Transparent reads: the client folds the archive to the same state.
		got, err := f.c.Get(ctx, r)
		if err != nil {
			t.Fatalf("reading archived run %s: %v", r, err)
		}
		if string(got.Marshal()) != string(live[r].Marshal()) {
			t.Errorf("fold of archived run %s differs from its live fold", r)
		}
	}
	if n := subjectsOf(t, ctx, f.store, f.store.StreamName(), eventlog.RunFilter(f.waiting)); n == 0 {
		t.Error("the waiting run was removed")
	}
	if s, err := f.c.Summary(ctx, f.waiting); err != nil || s.Status != projection.RunWaiting {
		t.Errorf("waiting run's entry: %+v, %v", s, err)
	}
	// The run that has not ended cannot be removed, however asked.
	if _, err := readmodel.Remove(ctx, f.store, f.waiting, nil); !errors.Is(err, readmodel.ErrNotEnded) {
		t.Errorf("removing a running run: %v, want ErrNotEnded", err)
	}
	if _, err := readmodel.Remove(ctx, f.store, "nosuchrun", nil); !isNotFound(err) {
		t.Errorf("removing an unknown run: %v, want ErrRunNotFound", err)
	}
}

func removedIDs(res *readmodel.SweepResult) []string {
	out := make([]string, len(res.Removed))
	for i, r := range res.Removed {
		out[i] = r.RunID
	}
	return out
}

// failingArchive refuses every object.
type failingArchive struct{}

func (failingArchive) Put(context.Context, string, []byte) error {
	return errors.New("archive unavailable")
}
func (failingArchive) Get(_ context.Context, run string) ([]byte, error) {
	return nil, fmt.Errorf("%w: %s", readmodel.ErrNotArchived, run)
}
func (failingArchive) String() string { return "failing archive" }

// TestArchiveFailureKeepsLog: a run whose archive fails is not removed.
func TestArchiveFailureKeepsLog(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	before := subjectsOf(t, ctx, f.store, f.store.StreamName(), eventlog.AllEvents)
	res, err := readmodel.Sweep(ctx, f.store, failingArchive{}, time.Now().Add(72*time.Hour), 0, quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || len(res.Failed) != 5 {
		t.Fatalf("sweep with a failing archive = %+v, want five failures and nothing removed", res)
	}
	if after := subjectsOf(t, ctx, f.store, f.store.StreamName(), eventlog.AllEvents); after != before {
		t.Errorf("stream subjects %d → %d after a failed archive", before, after)
	}
	list, err := f.c.List(ctx)
	if err != nil || len(list) != len(f.all) {
		t.Errorf("read model after a failed archive: %d runs, %v; want %d", len(list), err, len(f.all))
	}
	// A directory archive that does not exist is refused by name.
	if _, err := readmodel.ParseArchive(ctx, eventlog.JetStream(f.store), f.store.StreamName(), "dir:/nonexistent/weft", false); err == nil || !strings.Contains(err.Error(), "dir:/nonexistent/weft") {
		t.Errorf("missing archive directory: %v", err)
	}
	if _, err := readmodel.ParseArchive(ctx, eventlog.JetStream(f.store), f.store.StreamName(), "nosuchbucket", false); err == nil || !strings.Contains(err.Error(), "nosuchbucket") {
		t.Errorf("missing archive bucket: %v", err)
	}
	// A run started with a negative retention is refused, and nothing starts.
	if _, err := f.c.Start(ctx, mustGraph(t, ordersYAML), client.WithRetention(-time.Hour)); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("start with a negative retention: %v, want an error naming the retention", err)
	}
	if p, err := f.c.ListPage(ctx); err != nil || p.Total != len(f.all) {
		t.Errorf("after a refused start: %v runs, %v; want %d", p, err, len(f.all))
	}
	if _, err := readmodel.ParseRetention("-1h"); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("ParseRetention(-1h): %v", err)
	}
}

// TestLostPutRepaired: an entry lost from the read model comes back with
// the run's next status change, and a terminated run's entry says so.
func TestLostPutRepaired(t *testing.T) {
	ctx := timeout(t)
	f := newFixture(t, ctx)
	m, err := readmodel.Open(ctx, eventlog.JetStream(f.store))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, f.waiting); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, f.waiting); !errors.Is(err, readmodel.ErrNotFound) {
		t.Fatalf("entry still there: %v", err)
	}
	if err := f.c.Terminate(ctx, f.waiting, "lost entry"); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, ctx, f.store, map[string]projection.RunStatus{f.waiting: projection.RunCancelled})
	s, err := m.Get(ctx, f.waiting)
	if err != nil || !s.Terminated || s.EndedAt.IsZero() {
		t.Fatalf("repaired entry: %+v, %v; want terminated, ended", s, err)
	}
	// One entry per run: the waiting one went when the run ended.
	p, err := m.List(ctx, readmodel.Query{Statuses: []projection.RunStatus{projection.RunRunning, projection.RunWaiting}})
	if err != nil || p.Total != 0 {
		t.Errorf("running runs after the end: %+v, %v", p, err)
	}
}

// TestListMidMove: between Put writing a run's new entry and purging its
// old one, both keys exist; List shows the run once, with the later status.
func TestListMidMove(t *testing.T) {
	ctx := timeout(t)
	_, store := testkit.Store(t)
	m, err := readmodel.Ensure(ctx, eventlog.JetStream(store), store.StreamName(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []projection.RunStatus{projection.RunRunning, projection.RunCompleted} {
		if err := m.Put(ctx, readmodel.Summary{RunID: "r1", Graph: "g", Status: st}, false); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // the status map is filled in Go's random map order
		page, err := m.List(ctx, readmodel.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != 1 || page.Runs[0].Status != projection.RunCompleted || page.Total != 1 {
			t.Fatalf("List mid-move = %+v, want r1 once, completed", page)
		}
	}
}

// TestListNewestByStart: runs are listed by start time, newest first, ties
// by id, whatever their ids say (a user's "my-order-1" started before a
// generated id's run sorts after it), and paging with a cursor stays
// consistent while newer runs start between pages. Count counts from the
// keys alone what List selects.
func TestListNewestByStart(t *testing.T) {
	ctx := timeout(t)
	_, store := testkit.Store(t)
	m, err := readmodel.Ensure(ctx, eventlog.JetStream(store), store.StreamName(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 27, 10, 17, 14, 0, time.UTC)
	put := func(id string, at time.Time, st projection.RunStatus) {
		t.Helper()
		if err := m.Put(ctx, readmodel.Summary{RunID: id, Graph: "g", Status: st, StartedAt: at}, false); err != nil {
			t.Fatal(err)
		}
	}
	put("my-order-1", t0, projection.RunCompleted)
	put(events.NewRunID(), t0.Add(29*time.Second), projection.RunRunning)
	put("zz-tie", t0.Add(10*time.Second), projection.RunFailed)
	put("aa-tie", t0.Add(10*time.Second), projection.RunRunning)
	put("0-first", t0.Add(-time.Hour), projection.RunCompleted)
	all, err := m.List(ctx, readmodel.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{all.Runs[0].RunID, "zz-tie", "aa-tie", "my-order-1", "0-first"}
	if got := ids(all.Runs); !slices.Equal(got, want) || all.Runs[0].StartedAt != t0.Add(29*time.Second) {
		t.Fatalf("runs = %v, want %v (newest start first, ties by id)", got, want)
	}

	// Page by two; two runs start between the pages.
	p1, err := m.List(ctx, readmodel.Query{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	put("late-1", t0.Add(time.Minute), projection.RunRunning)
	put("late-2", t0.Add(2*time.Minute), projection.RunRunning)
	got := ids(p1.Runs)
	for cursor := p1.Next; cursor != ""; {
		p, err := m.List(ctx, readmodel.Query{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(p.Runs)...)
		cursor = p.Next
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages = %v, want %v: runs started meanwhile shift no page", got, want)
	}

	for _, tc := range []struct {
		name string
		q    readmodel.Query
		want int
	}{
		{"all", readmodel.Query{}, 7},
		{"running", readmodel.Query{Statuses: []projection.RunStatus{projection.RunRunning}}, 4},
		{"since", readmodel.Query{Since: t0.Add(time.Second)}, 5},
	} {
		n, err := m.Count(ctx, tc.q)
		if err != nil || n != tc.want {
			t.Errorf("%s: Count = %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}

	for _, bad := range []string{"my-order-1", "x-my-order-1", "-1-a", "12-a.b"} {
		if _, err := m.List(ctx, readmodel.Query{Cursor: bad}); err == nil {
			t.Errorf("cursor %q was taken", bad)
		}
	}
}
