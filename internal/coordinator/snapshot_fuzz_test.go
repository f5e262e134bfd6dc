package coordinator_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/pkg/projection"
)

// FuzzDecodeSnapshot feeds the snapshot decoder (whose input is whatever
// the snapshots bucket holds) any bytes: it never panics, refuses with
// ErrBadSnapshot naming the run, and what it accepts restores to the
// run's state at the snapshot's sequence.
func FuzzDecodeSnapshot(f *testing.F) {
	s := &projection.State{RunID: "run1", LastSeq: 7}
	good, _ := json.Marshal(&coordinator.SnapshotRecord{Run: "run1", Attested: 9, Snapshot: *projection.TakeSnapshot(s, 5)})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"run":"run1","attested":9,"seq":7,"state":null}`))
	f.Add([]byte(`{"run":"run1","attested":9,"seq":7,"state":{"runId":"run1","lastSeq":7,"nodes":{"a":null}}}`))
	f.Add([]byte(`{"run":"run2","attested":9,"seq":7,"state":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := coordinator.DecodeSnapshot("run1", b)
		if err != nil {
			if rec != nil || !errors.Is(err, coordinator.ErrBadSnapshot) || !strings.Contains(err.Error(), "run run1") {
				t.Fatalf("refusal %v (record %v)", err, rec)
			}
			return
		}
		st, err := rec.Restore()
		if err != nil || st.RunID != "run1" || st.LastSeq != rec.Seq || rec.Attested <= rec.Seq {
			t.Fatalf("accepted %+v: %v", rec, err)
		}
		_ = st.Clone().Marshal()
	})
}
