package eventlog_test

import (
	"bytes"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
)

// The fast encoder writes exactly what the SDK's binding writes.
func TestFastEncodeMatchesSDK(t *testing.T) {
	for _, e := range sampleEvents(t) {
		for _, trace := range []bool{false, true} {
			if !trace {
				e.TraceParent, e.TraceState = "", ""
			}
			fast, err := eventlog.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := eventlog.EncodeSDK(e)
			if err != nil {
				t.Fatal(err)
			}
			if fast.Subject != sdk.Subject || !bytes.Equal(fast.Data, sdk.Data) || !reflect.DeepEqual(map[string][]string(fast.Header), map[string][]string(sdk.Header)) {
				t.Fatalf("%s:\nfast %s %q\n sdk %s %q", e.Type, fast.Subject, fast.Header, sdk.Subject, sdk.Header)
			}
		}
	}
}

// sameEvent compares what a decoder reads.
func sameEvent(a, b *eventlog.Event) bool {
	return a.ID == b.ID && a.Type == b.Type && a.Source == b.Source && a.Time.Equal(b.Time) && a.RunID == b.RunID &&
		a.NodeID == b.NodeID && a.Attempt == b.Attempt && a.TraceParent == b.TraceParent && a.TraceState == b.TraceState &&
		bytes.Equal(a.Data, b.Data) && a.IsDecision() == b.IsDecision() && a.Queue == b.Queue && a.Subject() == b.Subject()
}

// The fast decoder reads every event Weft writes as the SDK's does.
func TestFastDecodeMatchesSDK(t *testing.T) {
	for _, e := range sampleEvents(t) {
		m, err := eventlog.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok, err := eventlog.DecodeFast(m.Subject, m.Header, m.Data)
		if !ok || err != nil {
			t.Fatalf("%s: the fast decoder did not take it (ok %v): %v", e.Type, ok, err)
		}
		sdk, err := eventlog.DecodeSDK(m.Subject, m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !sameEvent(fast, sdk) {
			t.Fatalf("%s:\nfast %+v\n sdk %+v", e.Type, fast, sdk)
		}
	}
}

// FuzzFastDecodeMatchesSDK: on any headers, a message the fast decoder
// takes is accepted or refused as by the SDK's decoder, and read alike.
func FuzzFastDecodeMatchesSDK(f *testing.F) {
	for _, e := range sampleEvents(&testing.T{}) {
		m, _ := eventlog.Encode(e)
		f.Add(m.Subject, m.Header.Get("ce-id"), m.Header.Get("ce-source"), m.Header.Get("ce-type"), m.Header.Get("ce-time"),
			m.Header.Get("ce-attempt"), m.Header.Get("ce-runid"), "", m.Data)
	}
	f.Add("weft.r.21.run1.c.started", "x", "a b", "t", "2026-01-01T00:00:00Z", "1", "run1", "ce-Extra", []byte(`{}`))
	f.Fuzz(func(t *testing.T, subject, id, source, typ, at, attempt, run, extra string, data []byte) {
		h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {source}, "ce-type": {typ},
			"ce-time": {at}, "ce-attempt": {attempt}, "ce-runid": {run}, "content-type": {"application/json"}}
		for k, v := range h {
			if v[0] == "" {
				delete(h, k)
			}
		}
		if extra != "" {
			h[extra] = []string{"v"}
		}
		fast, ok, ferr := eventlog.DecodeFast(subject, maps.Clone(h), data)
		if !ok {
			return
		}
		sdk, serr := eventlog.DecodeSDK(subject, h, data)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("fast err %v, sdk err %v (headers %q)", ferr, serr, h)
		}
		if ferr == nil && !sameEvent(fast, sdk) {
			t.Fatalf("\nfast %+v\n sdk %+v", fast, sdk)
		}
	})
}

func benchEvent(b *testing.B) *eventlog.Event {
	e, err := eventlog.New("06h0cqv455l1fp9hqo8n8mr9a8", "06h0cqv455l1fp9hqo8n8mr9a8:ready:a/1:1", time.Now(), &eventlog.NodeReadyData{
		NodeRef: eventlog.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default",
		IdempotencyKey: "k", Input: []byte(`{"name":"Ada","n":1}`)})
	if err != nil {
		b.Fatal(err)
	}
	e.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	return e
}

func BenchmarkEncode(b *testing.B) {
	e := benchEvent(b)
	for _, c := range []struct {
		name string
		enc  func(*eventlog.Event) (*nats.Msg, error)
	}{{"fast", eventlog.Encode}, {"sdk", eventlog.EncodeSDK}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.enc(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	m, _ := eventlog.Encode(benchEvent(b))
	for _, c := range []struct {
		name string
		dec  func(string, nats.Header, []byte) (*eventlog.Event, error)
	}{{"fast", eventlog.Decode}, {"sdk", eventlog.DecodeSDK}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.dec(m.Subject, m.Header, m.Data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
