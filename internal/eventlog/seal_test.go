package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
)

func testRing(t *testing.T, ids ...string) eventlog.KeyRing {
	t.Helper()
	var r eventlog.KeyRing
	for _, id := range ids {
		k, err := eventlog.NewKey(id)
		if err != nil {
			t.Fatal(err)
		}
		r = append(r, k)
	}
	return r
}

// Every event seals and opens again, by the fast and the SDK's decoder
// alike; the envelope stays plain, the data does not.
func TestSealRoundTrip(t *testing.T) {
	ring := testRing(t, "k1")
	for _, e := range sampleEvents(t) {
		m, err := eventlog.EncodeSealed(e, ring)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("content-type"); got != eventlog.ContentSealed {
			t.Fatalf("%s: content-type %q", e.Type, got)
		}
		if m.Header.Get("ce-"+eventlog.ExtKeyID) != "k1" || m.Header.Get("ce-type") != string(e.Type) || m.Header.Get("ce-runid") != "run1" || m.Header.Get(nats.MsgIdHdr) != e.ID {
			t.Fatalf("%s: envelope %q", e.Type, m.Header)
		}
		if len(e.Data) > 8 && bytes.Contains(m.Data, e.Data[1:len(e.Data)-1]) {
			t.Fatalf("%s: plain data in the sealed body", e.Type)
		}
		fast, err := eventlog.DecodeSealed(m.Subject, maps.Clone(m.Header), m.Data, ring)
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		sdk, err := eventlog.DecodeSDKSealed(m.Subject, m.Header, m.Data, ring)
		if err != nil {
			t.Fatalf("%s: sdk: %v", e.Type, err)
		}
		if !sameEvent(fast, sdk) || !bytes.Equal(fast.Data, e.Data) || fast.KeyID != "k1" || sdk.KeyID != "k1" {
			t.Fatalf("%s:\nfast %+v\n sdk %+v", e.Type, fast, sdk)
		}
		again, err := eventlog.EncodeSealed(e, ring)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Data, m.Data) {
			t.Fatalf("%s: sealing the same event twice gave two messages: a retried append would not be recognised", e.Type)
		}
	}
}

// A stock CloudEvents client reads a sealed event's envelope, and its data
// as opaque bytes of the sealed content type.
func TestSealStockCloudEvents(t *testing.T) {
	e := sampleEvents(t)[0]
	m, err := eventlog.EncodeSealed(e, testRing(t, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{}
	for k, vs := range m.Header {
		for _, v := range vs {
			hdr.Add(k, v)
		}
	}
	ce, err := binding.ToEvent(context.Background(), cehttp.NewMessage(hdr, io.NopCloser(bytes.NewReader(m.Data))))
	if err != nil {
		t.Fatal(err)
	}
	if err := ce.Validate(); err != nil {
		t.Fatal(err)
	}
	if ce.DataContentType() != eventlog.ContentSealed || ce.Extensions()[eventlog.ExtKeyID] != "k1" || ce.Type() != string(e.Type) || !bytes.Equal(ce.Data(), m.Data) {
		t.Fatalf("read %s %v", ce.DataContentType(), ce.Extensions())
	}
}

// Rotation: a new current key seals; the old one still opens what it
// sealed; a ring without it refuses, naming it.
func TestSealRotation(t *testing.T) {
	old := testRing(t, "k1")
	rotated, err := old.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if rotated[0].ID != "k2" || rotated[1].ID != "k1" {
		t.Fatalf("rotated ring %v", rotated)
	}
	e := sampleEvents(t)[0]
	before, err := eventlog.EncodeSealed(e, old)
	if err != nil {
		t.Fatal(err)
	}
	after, err := eventlog.EncodeSealed(e, rotated)
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Get("ce-weftkey") != "k2" {
		t.Fatalf("sealed with %q after rotation, want k2", after.Header.Get("ce-weftkey"))
	}
	for _, m := range []*nats.Msg{before, after} {
		got, err := eventlog.DecodeSealed(m.Subject, m.Header, m.Data, rotated)
		if err != nil || !bytes.Equal(got.Data, e.Data) {
			t.Fatalf("key %s under the rotated ring: %v", m.Header.Get("ce-weftkey"), err)
		}
	}
	retired := rotated[:1]
	_, err = eventlog.DecodeSealed(before.Subject, before.Header, before.Data, retired)
	if !errors.Is(err, eventlog.ErrKeyMissing) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("k1 retired: %v, want ErrKeyMissing naming k1", err)
	}
}

// What cannot be opened is refused with an error that says where and
// why, never read as data.
func TestSealRefusals(t *testing.T) {
	ring := testRing(t, "k1")
	e := sampleEvents(t)[0] // a run-started: its input is the secret
	good, err := eventlog.EncodeSealed(e, ring)
	if err != nil {
		t.Fatal(err)
	}
	other := testRing(t, "k1") // same id, another secret
	mutate := func(f func(h nats.Header, d []byte) (nats.Header, []byte)) (string, nats.Header, []byte) {
		h, d := f(maps.Clone(good.Header), bytes.Clone(good.Data))
		return good.Subject, h, d
	}
	tests := []struct {
		name    string
		keys    eventlog.Keys
		msg     func(h nats.Header, d []byte) (nats.Header, []byte)
		wantErr error
		want    string
	}{
		{name: "no key ring", keys: nil, wantErr: eventlog.ErrKeyMissing, want: `key "k1"`},
		{name: "key missing", keys: testRing(t, "k9"), wantErr: eventlog.ErrKeyMissing, want: `key "k1"`},
		{name: "wrong key", keys: other, wantErr: eventlog.ErrMalformedEvent, want: "does not authenticate"},
		{name: "tampered", keys: ring, msg: func(h nats.Header, d []byte) (nats.Header, []byte) { d[len(d)/2] ^= 1; return h, d }, wantErr: eventlog.ErrMalformedEvent, want: "does not authenticate"},
		{name: "truncated", keys: ring, msg: func(h nats.Header, d []byte) (nats.Header, []byte) { return h, d[:10] }, wantErr: eventlog.ErrMalformedEvent, want: "truncated"},
		{name: "type changed", keys: ring, msg: func(h nats.Header, d []byte) (nats.Header, []byte) {
			h.Set("ce-type", string(eventlog.RunCancelled))
			return h, d
		}, wantErr: eventlog.ErrMalformedEvent},
		{name: "no key id", keys: ring, msg: func(h nats.Header, d []byte) (nats.Header, []byte) { h.Del("ce-weftkey"); return h, d }, wantErr: eventlog.ErrMalformedEvent, want: "weftkey"},
		{name: "unknown codec", keys: ring, msg: func(h nats.Header, d []byte) (nats.Header, []byte) {
			h.Set("content-type", "application/vnd.weft.zstd")
			h.Del("ce-weftkey")
			return h, d
		}, wantErr: eventlog.ErrMalformedEvent, want: "unknown codec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.msg
			if f == nil {
				f = func(h nats.Header, d []byte) (nats.Header, []byte) { return h, d }
			}
			subject, h, d := mutate(f)
			var keys eventlog.Keys
			if tc.keys != nil {
				keys = tc.keys
			}
			_, err := eventlog.DecodeSealed(subject, h, d, keys)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), subject) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %v naming %s and %q", err, tc.wantErr, subject, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error shows data: %v", err)
			}
		})
	}
	// Moved to another run: the subject and run id of another run.
	h := maps.Clone(good.Header)
	h.Set("ce-runid", "run2")
	subject := strings.Replace(good.Subject, ".run1.", ".run2.", 1)
	if _, err := eventlog.DecodeSealed(subject, h, good.Data, ring); !errors.Is(err, eventlog.ErrMalformedEvent) {
		t.Fatalf("sealed data moved to another run: %v", err)
	}
}

// Without a key ring in use, DecodeStored refuses a sealed event and
// keeps its place and envelope.
func TestSealedStoredWithoutKey(t *testing.T) {
	e := sampleEvents(t)[0]
	m, err := eventlog.EncodeSealed(e, testRing(t, "k7"))
	if err != nil {
		t.Fatal(err)
	}
	got := eventlog.DecodeStored(m.Subject, m.Header, m.Data, 3, e.Time)
	if !errors.Is(got.Refused, eventlog.ErrKeyMissing) || got.Type != e.Type || got.ID != e.ID || got.Seq != 3 || got.Data != nil {
		t.Fatalf("refused %v type %s id %s seq %d data %q", got.Refused, got.Type, got.ID, got.Seq, got.Data)
	}
}

func TestParseKeyRing(t *testing.T) {
	ring := testRing(t, "k2", "k1")
	back, err := eventlog.ParseKeyRing("file", ring.Text())
	if err != nil || len(back) != 2 || back[0].ID != "k2" || !bytes.Equal(back[1].Secret, ring[1].Secret) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	inline := fmt.Sprintf("%s:%s", "a", strings.TrimPrefix(strings.Split(ring.Text(), "\n")[1], "k2:"))
	if r, err := eventlog.ParseKeyRing("env", inline+" , "); err != nil || r[0].ID != "a" {
		t.Fatalf("inline: %v %v", r, err)
	}
	for _, s := range []string{ring.String(), fmt.Sprint(ring[0]), fmt.Sprintf("%v", ring)} {
		if strings.Contains(s, strings.Split(strings.Split(ring.Text(), "\n")[1], ":")[1]) {
			t.Fatalf("a ring prints its secret: %s", s)
		}
	}
	for name, text := range map[string]string{
		"empty":      "# nothing\n",
		"no colon":   "k1\n",
		"bad base64": "k1:%%%\n",
		"short key":  "k1:AAAA\n",
		"bad id":     "k 1:" + strings.Repeat("A", 44) + "\n",
		"twice":      "k1:" + strings.Repeat("A", 43) + "=\nk1:" + strings.Repeat("B", 43) + "=\n",
	} {
		if _, err := eventlog.ParseKeyRing("f", text); !errors.Is(err, eventlog.ErrBadKey) {
			t.Errorf("%s: %v, want ErrBadKey", name, err)
		}
	}
}

// FuzzDecodeSealed: whatever the body of a sealed event, decoding gives an
// error or the event, and never panics.
func FuzzDecodeSealed(f *testing.F) {
	k, err := eventlog.NewKey("k1")
	if err != nil {
		f.Fatal(err)
	}
	ring := eventlog.KeyRing{k}
	e, err := eventlog.New("run1", "id1", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), &eventlog.RunCancelledData{Reason: "x"})
	if err != nil {
		f.Fatal(err)
	}
	m, err := eventlog.EncodeSealed(e, ring)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m.Data, "k1")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		h := maps.Clone(m.Header)
		h.Set("ce-weftkey", key)
		if got, err := eventlog.DecodeSealed(m.Subject, h, body, ring); err == nil && got.Type != eventlog.RunCancelled {
			t.Fatalf("decoded as %s", got.Type)
		}
	})
}

// BenchmarkSeal is the cost sealing adds to an event's encoding and
// decoding: plain beside sealed, for the hop's work item and for a node
// output of 1 KiB and of 64 KiB.
func BenchmarkSeal(b *testing.B) {
	k, err := eventlog.NewKey("k1")
	if err != nil {
		b.Fatal(err)
	}
	ring := eventlog.KeyRing{k}
	events := map[string]*eventlog.Event{"ready": benchEvent(b)}
	for _, size := range []int{1 << 10, 64 << 10} {
		out := []byte(`{"text":"` + strings.Repeat("x", size) + `"}`)
		e, err := eventlog.New("06h0cqv455l1fp9hqo8n8mr9a8", fmt.Sprintf("out-%d", size), time.Now(), &eventlog.NodeInvokedData{
			NodeRef: eventlog.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Output: out})
		if err != nil {
			b.Fatal(err)
		}
		e.Queue = "default"
		events[fmt.Sprintf("invoked-%dKiB", size>>10)] = e
	}
	for _, name := range []string{"ready", "invoked-1KiB", "invoked-64KiB"} {
		e := events[name]
		for _, mode := range []string{"plain", "sealed"} {
			var keys eventlog.Keys
			if mode == "sealed" {
				keys = ring
			}
			enc, dec := eventlog.Codec(keys)
			b.Run(name+"/"+mode+"/encode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := enc(e); err != nil {
						b.Fatal(err)
					}
				}
			})
			m, err := enc(e)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+mode+"/decode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := dec(m.Subject, m.Header, m.Data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// FuzzPayloadRef: whatever a reference's body, decoding an event that
// carries one gives an error or the event (here always an error: this
// process opened no store holding the object), and never panics.
func FuzzPayloadRef(f *testing.F) {
	e, err := eventlog.New("run1", "id1", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), &eventlog.RunCancelledData{Reason: "x"})
	if err != nil {
		f.Fatal(err)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		f.Fatal(err)
	}
	m.Header.Set("content-type", eventlog.ContentRef)
	f.Add([]byte(`{"bucket":"weft-payloads","object":"run1.` + strings.Repeat("a", 64) + `","size":10,"sha256":"` + strings.Repeat("a", 64) + `","contentType":"application/json"}`))
	f.Add([]byte(`{"bucket":"other"}`))
	f.Add([]byte(`{"bucket":"weft-payloads","object":"run2.x","size":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := eventlog.DecodeSealed(m.Subject, m.Header, body, nil); err == nil {
			t.Fatal("a reference resolved with no store")
		}
	})
}
