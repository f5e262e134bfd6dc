package projection_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// FuzzSignal feeds a client's signal, as it arrives on the wire (its
// subject, its ce-* headers, any body), to a run whose human node waits
// for it: decoding never panics and a refusal names the subject; the fold
// never panics, and a signal it does not take in leaves the run as it
// was (but for what counts: LastSeq, UpdatedAt, Stats).
func FuzzSignal(f *testing.F) {
	t := &testing.T{}
	var before []*events.Event
	for _, e := range histories(t)["human"] {
		if e.Type == events.SignalReceived {
			break
		}
		before = append(before, e)
	}
	if len(before) == 0 {
		f.Fatal("no human history")
	}
	run := before[0].RunID
	good, err := events.New(run, run+":signal:1", before[len(before)-1].Time, &events.SignalReceivedData{Node: "approve", Data: []byte(`{"approved":true}`)})
	if err != nil {
		f.Fatal(err)
	}
	m, err := eventlog.Encode(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m.Subject, m.Data)
	f.Add(m.Subject, []byte(`{"node":"approve","data":`))
	f.Add(m.Subject, []byte(`{"node":"nope","data":1}`))
	f.Add(m.Subject, []byte(`{"node":"approve","data":{"approved":"yes"},"by":7}`))
	f.Add(eventlog.RunFilter(run)[:len(eventlog.RunFilter(run))-1]+"d.completed", m.Data)
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		h := nats.Header{}
		for k, v := range m.Header {
			h[k] = v
		}
		e := events.DecodeStored(subject, h, data, uint64(len(before)+1), before[len(before)-1].Time)
		if e.Refused != nil && subject != "" && !strings.Contains(e.Refused.Error(), subject) && !errors.Is(e.Refused, events.ErrMisplaced) {
			t.Fatalf("refusal does not name the subject %q: %v", subject, e.Refused)
		}
		s := projection.Fold(before)
		was := s.Clone()
		err := s.Apply(e)
		if err == nil {
			return
		}
		was.LastSeq, was.UpdatedAt, was.Stats = s.LastSeq, s.UpdatedAt, s.Stats
		if string(was.Marshal()) != string(s.Marshal()) {
			t.Fatalf("a signal the fold refused (%v) changed the run", err)
		}
	})
}
