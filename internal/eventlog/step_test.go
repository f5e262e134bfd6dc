package eventlog_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
)

// TestStepSubject: a node step goes on its activation's own step subject,
// and is refused anywhere else: on the plain worker subject of its kind,
// on another activation's step subject, and as a decision; no other type
// is accepted on a step subject.
func TestStepSubject(t *testing.T) {
	ref := eventlog.NodeRef{Node: "agent", Iteration: 2}
	ev, err := eventlog.New("run1", "s1", time.Time{}, &eventlog.NodeStepData{NodeRef: ref, Attempt: 1, Step: 1, Kind: "model", Data: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ev.Queue = "default"
	msg, err := eventlog.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := eventlog.StepSubject("run1", "default", ref.Key())
	if msg.Subject != want || !strings.HasSuffix(want, ".w.default.step."+eventlog.StepToken("agent/2")) {
		t.Fatalf("subject = %s, want %s", msg.Subject, want)
	}
	if _, err := eventlog.Decode(msg.Subject, msg.Header, msg.Data); err != nil {
		t.Fatalf("decoding on its subject: %v", err)
	}
	base := eventlog.RunBase("run1")
	for _, subject := range []string{
		base + "w.default.step",
		eventlog.StepSubject("run1", "default", "other/1"),
		base + "w.default.heartbeat.x",
		base + "w.default.step." + eventlog.StepToken("agent/2") + ".more",
	} {
		if _, err := eventlog.Decode(subject, msg.Header, msg.Data); !errors.Is(err, eventlog.ErrMisplaced) {
			t.Errorf("a step on %s: %v, want ErrMisplaced", subject, err)
		}
	}
	hb, _ := eventlog.New("run1", "h1", time.Time{}, &eventlog.HeartbeatData{NodeRef: ref, Attempt: 1})
	hb.Queue = "default"
	hm, err := eventlog.Encode(hb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.Decode(want, hm.Header, hm.Data); !errors.Is(err, eventlog.ErrMisplaced) {
		t.Errorf("a heartbeat on a step subject: %v, want ErrMisplaced", err)
	}
	eventlog.MarkDecision(ev)
	if _, err := eventlog.Encode(ev); !errors.Is(err, eventlog.ErrMisplaced) {
		t.Errorf("a step as a decision: %v, want ErrMisplaced", err)
	}
	if got := eventlog.KindFilter(eventlog.NodeStep); got != "weft.r.*.*.w.*.step.*" {
		t.Errorf("KindFilter(NodeStep) = %s", got)
	}
}
