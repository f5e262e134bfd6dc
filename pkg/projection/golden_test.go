package projection_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

var update = flag.Bool("update", false, "rewrite the golden states from the recorded histories")

// Recorded histories (testdata/histories, written by the coordinator's
// TestRecordHistories -record from real runs on JetStream) are replayed
// and their final states compared with testdata/golden: a change that
// alters the fold shows up here.

func loadHistory(t testing.TB, path string) []*events.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []*events.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var e events.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		evs = append(evs, &e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

func histories(t testing.TB) map[string][]*events.Event {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "histories", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded histories in testdata/histories (%v)", err)
	}
	out := map[string][]*events.Event{}
	for _, p := range paths {
		out[strings.TrimSuffix(filepath.Base(p), ".jsonl")] = loadHistory(t, p)
	}
	return out
}

func TestGoldenHistories(t *testing.T) {
	for name, evs := range histories(t) {
		t.Run(name, func(t *testing.T) {
			got := projection.Fold(evs).Marshal()
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", "golden", name+".state.json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("fold of %s differs from %s:\n%s", name, path, firstDiff(pretty.String(), string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + itoa(i+1) + ":\n got: " + g[i] + "\nwant: " + w[i]
		}
	}
	return "lengths differ"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestGoldenHistoriesEndAsRecorded(t *testing.T) {
	for name, evs := range histories(t) {
		s := projection.Fold(evs)
		last := evs[len(evs)-1]
		if !last.Type.Terminal() || !s.Status.Ended() {
			t.Errorf("%s: ends with %s, status %s", name, last.Type, s.Status)
		}
		if s.Stats.Rejected != 0 {
			t.Errorf("%s: %d events rejected by the fold", name, s.Stats.Rejected)
		}
		// Every event counts, or is refused (signals the run did not take).
		if s.LastSeq != last.Seq || s.Stats.Events+s.Stats.Refused != len(evs) {
			t.Errorf("%s: lastSeq %d events %d refused %d, want %d and %d in all", name, s.LastSeq, s.Stats.Events, s.Stats.Refused, last.Seq, len(evs))
		}
	}
}

// TestSnapshotPlusTail: for every recorded history and every cut, the
// snapshot of the prefix (written and read back) plus the tail folds to
// the same bytes as the whole; FoldTo at each sequence is that prefix.
func TestSnapshotPlusTail(t *testing.T) {
	for name, evs := range histories(t) {
		whole := projection.Fold(evs).Marshal()
		if again := projection.Fold(evs).Marshal(); !bytes.Equal(whole, again) {
			t.Fatalf("%s: two folds differ", name)
		}
		for cut := range len(evs) + 1 {
			prefix := projection.Fold(evs[:cut])
			if cut > 0 {
				at := projection.FoldTo(evs, evs[cut-1].Seq)
				if !bytes.Equal(at.Marshal(), prefix.Marshal()) {
					t.Fatalf("%s: FoldTo(%d) is not the prefix fold", name, evs[cut-1].Seq)
				}
			}
			snap, err := projection.Unmarshal(prefix.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs[cut:] {
				_ = snap.Apply(e)
			}
			if got := snap.Marshal(); !bytes.Equal(got, whole) {
				t.Fatalf("%s: snapshot at %d + tail differs from the whole fold", name, cut)
			}
		}
	}
}

func TestDiffBetweenPoints(t *testing.T) {
	evs := histories(t)["hello"]
	var mid uint64
	for _, e := range evs {
		if e.Type == events.NodeInvoking && e.NodeID == "greet" {
			mid = e.Seq
		}
	}
	a := projection.FoldTo(evs, mid)
	b := projection.Fold(evs)
	changes := projection.Diff(a, b)
	found := map[string]bool{}
	for _, c := range changes {
		found[c.Path] = true
	}
	for _, p := range []string{"/status", "/state/greeting", "/nodes/greet/status", "/nodes/shout"} {
		if !found[p] {
			t.Errorf("diff lacks %s: %v", p, changes)
		}
	}
	if len(projection.Diff(b, b)) != 0 {
		t.Error("a state differs from itself")
	}
}

// FuzzFold: arbitrary sequences of events (drawn from the recorded
// histories, reordered, repeated, with broken payloads, refused or of
// unknown types) never panic the fold, and folding a prefix, snapshotting
// it, then folding the rest equals folding the whole.
func FuzzFold(f *testing.F) {
	t := &testing.T{}
	var pool []*events.Event
	for _, evs := range histories(t) {
		pool = append(pool, evs...)
	}
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uint8(3))
	f.Add([]byte{0, 0, 200, 7, 7, 7, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, picks []byte, cut uint8) {
		var evs []*events.Event
		for i, p := range picks {
			e := fresh(pool[int(p)%len(pool)])
			e.Seq = uint64(i + 1)
			switch {
			case p%19 == 0:
				e.Refused = events.ErrMalformedEvent
			case p%23 == 0:
				e.Type = "dev.weft.node.future.v9"
			case p%17 == 0:
				e.Data = []byte(`{"node": [broken`)
			case p%13 == 0:
				e.Data = []byte(`{}`)
			case p%11 == 0:
				e.RunID = "someone-else"
			}
			evs = append(evs, e)
		}
		whole := projection.Fold(evs).Marshal()
		k := int(cut) % (len(evs) + 1)
		snap, err := projection.Unmarshal(projection.Fold(evs[:k]).Marshal())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs[k:] {
			_ = snap.Apply(e)
		}
		if !bytes.Equal(snap.Marshal(), whole) {
			t.Fatalf("prefix %d + rest differs from the whole", k)
		}
	})
}

// fresh copies an event without its decoded payload, so that the copy
// decodes its own Data (and its Type) when folded.
func fresh(e *events.Event) *events.Event {
	c := &events.Event{ID: e.ID, Type: e.Type, Source: e.Source, Time: e.Time, RunID: e.RunID, NodeID: e.NodeID,
		Attempt: e.Attempt, Data: e.Data, Queue: e.Queue, Seq: e.Seq, Stored: e.Stored}
	if e.IsDecision() {
		eventlog.MarkDecision(c)
	}
	return c
}
