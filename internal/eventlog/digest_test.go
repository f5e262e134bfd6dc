package eventlog_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestGraphDigestChecked: a run-started whose graphDigest is not its
// graph's is refused by the encoder and the decoder (GraphDigestError,
// wrapping ErrMalformedEvent), so no reader keeps a graph under another
// graph's digest; the digest is pkg/graph's.
func TestGraphDigestChecked(t *testing.T) {
	g, err := graph.Parse([]byte(`{"name":"g","nodes":[{"id":"a","type":"echo"}],"edges":[{"from":"START","to":"a"},{"from":"a","to":"END"}]}`), "g", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	if got := eventlog.GraphDigest(g.Canonical()); got != g.Digest() {
		t.Fatalf("eventlog.GraphDigest %s, pkg/graph %s", got, g.Digest())
	}
	other := json.RawMessage(`{"name":"g","nodes":[{"id":"a","type":"evil"}]}`)
	good, err := eventlog.New("run1", "run1", time.Time{}, &eventlog.RunStartedData{GraphName: "g", GraphDigest: g.Digest(), Graph: g.Canonical()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Decode(m.Subject, m.Header, m.Data); err != nil {
		t.Fatalf("a start with its graph's digest: %v", err)
	}
	bad, err := eventlog.New("run1", "run1", time.Time{}, &eventlog.RunStartedData{GraphName: "g", GraphDigest: g.Digest(), Graph: other})
	if err != nil {
		t.Fatal(err)
	}
	var de *eventlog.GraphDigestError
	if _, err := eventlog.Encode(bad); !errors.As(err, &de) {
		t.Fatalf("encoding a start under another graph's digest: %v", err)
	}
	m.Data, _ = json.Marshal(&eventlog.RunStartedData{GraphName: "g", GraphDigest: g.Digest(), Graph: other})
	_, err = eventlog.Decode(m.Subject, m.Header, m.Data)
	if !errors.As(err, &de) || !errors.Is(err, eventlog.ErrMalformedEvent) || de.Claimed != g.Digest() || de.Actual != eventlog.GraphDigest(other) {
		t.Fatalf("decoding a start under another graph's digest: %v", err)
	}
	if ev := eventlog.DecodeStored(m.Subject, m.Header, m.Data, 1, time.Now()); !errors.As(ev.Refused, &de) {
		t.Fatalf("stored: refused %v", ev.Refused)
	}
}
