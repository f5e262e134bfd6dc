package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// TestProtocolSealedVector holds the document's sealed-event vector to the
// code: the event it describes, sealed under its key, is its body, which
// opens to its data; and the headers of a sealed event are the table's.
func TestProtocolSealedVector(t *testing.T) {
	v := map[string]string{}
	for _, r := range docTables(t)["sealed-vector"] {
		v[r["field"]] = r["value"]
	}
	secret, err := base64.StdEncoding.DecodeString(v["key"])
	if err != nil {
		t.Fatal(err)
	}
	ring := events.KeyRing{{ID: v["key id"], Secret: secret}}
	var p events.SignalReceivedData
	if err := json.Unmarshal([]byte(v["data"]), &p); err != nil {
		t.Fatal(err)
	}
	ev, err := events.New(v["ce-runid"], v["ce-id"], time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), &p)
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Type) != v["ce-type"] || string(ev.Data) != v["data"] {
		t.Fatalf("the vector's event is %s %s", ev.Type, ev.Data)
	}
	m, err := eventlog.EncodeSealed(ev, ring)
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.StdEncoding.EncodeToString(m.Data); got != v["body (base64)"] {
		t.Errorf("sealed-vector: the body is %s; the document says %s", got, v["body (base64)"])
	}
	if m.Header.Get("content-type") != events.ContentSealed || m.Header.Get("ce-"+events.ExtKeyID) != v["key id"] {
		t.Errorf("sealed headers %q", m.Header)
	}
	got, err := eventlog.DecodeSealed(m.Subject, m.Header, m.Data, ring)
	if err != nil || !bytes.Equal(got.Data, ev.Data) {
		t.Fatalf("opening the vector: %v", err)
	}
	on := map[string][]string{}
	for _, r := range docTables(t)["headers"] {
		on[r["written on"]] = append(on[r["written on"]], r["header"])
	}
	if h := on["sealed events"]; len(h) != 1 || h[0] != "ce-"+events.ExtKeyID {
		t.Errorf("headers: the document's sealed-event headers %q, the code's %q", h, "ce-"+events.ExtKeyID)
	}
}
