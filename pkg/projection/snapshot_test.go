package projection_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// readHistory reads a recorded history: one CloudEvents JSON event a line.
func readHistory(t *testing.T, path string) []*events.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []*events.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e events.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s: line %d: %v", path, len(evs)+1, err)
		}
		evs = append(evs, &e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// Snapshot plus tail equals the full fold, at every point of every
// recorded history.
func TestSnapshotPlusTailEqualsFold(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "histories", "*.jsonl"))
	if len(files) == 0 {
		t.Skip("no recorded histories")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			evs := readHistory(t, path)
			want := projection.Fold(evs).Marshal()
			for k := range len(evs) + 1 {
				var last uint64
				for _, e := range evs[:k] {
					if e.IsDecision() {
						last = e.Seq
					}
				}
				snapAt := projection.Fold(evs[:k])
				b, err := json.Marshal(projection.TakeSnapshot(snapAt, last))
				if err != nil {
					t.Fatal(err)
				}
				var sn projection.Snapshot
				if err := json.Unmarshal(b, &sn); err != nil {
					t.Fatal(err)
				}
				s, err := sn.Restore()
				if err != nil {
					t.Fatalf("at %d: %v", k, err)
				}
				if sn.LastDecision != last {
					t.Fatalf("at %d: last decision %d, want %d", k, sn.LastDecision, last)
				}
				// The tail is read from the snapshot's sequence on, and may
				// overlap it: the overlap is passed over.
				from := max(k-1, 0)
				got := projection.Resume(s, evs[from:]).Marshal()
				if !bytes.Equal(got, want) {
					t.Fatalf("snapshot after %d of %d events plus tail differs from the full fold:\n got %s\nwant %s", k, len(evs), got, want)
				}
			}
		})
	}
}
