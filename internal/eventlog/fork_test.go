package eventlog_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
)

// A forked run's run-started round-trips with its lineage and start state,
// and a run-started written before forks existed still decodes, without
// them.
func TestRunStartedForkFieldsRoundTrip(t *testing.T) {
	want := &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`),
		Fork:  &eventlog.ForkRef{RunID: "parent", Position: 7, Seq: 41, Reason: "reset to node b"},
		State: json.RawMessage(`{"runId":"","status":"","state":{"k":1},"stats":{"events":0},"lastSeq":0}`)}
	e, err := eventlog.New("child", "child", time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC), want)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eventlog.Decode(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := got.Payload()
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("round trip: %+v (%v), want %+v", p, err, want)
	}

	old := json.RawMessage(`{"graphName":"g","graphDigest":"sha256:00","graph":{"name":"g"},"input":{"a":1}}`)
	p, err = (&eventlog.Event{Type: eventlog.RunStarted, RunID: "r", Data: old}).Payload()
	if err != nil {
		t.Fatal(err)
	}
	if d := p.(*eventlog.RunStartedData); d.Fork != nil || d.State != nil || string(d.Input) != `{"a":1}` {
		t.Errorf("an old run-started decodes as %+v", d)
	}
}
