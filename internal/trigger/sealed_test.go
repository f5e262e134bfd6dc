package trigger_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/trigger"
	"github.com/weft-dev/weft/pkg/events"
)

// TestSealedTriggerDefinitions: with a key ring in use, a trigger's
// definition is kept sealed (its input template can hold customers'
// data: here a constant secret): the raw bucket and the raw events stream
// hold none of it, yet the trigger starts its run with the input, paused
// and resumed (a rewrite, sealed again); without the key, the definition
// is refused naming the key id.
func TestSealedTriggerDefinitions(t *testing.T) {
	const secret = "TRIGGER-SECRET-40bb"
	k, err := eventlog.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := eventlog.UseKeys(eventlog.KeyRing{k}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eventlog.UseKeys(nil) }) // the ring is process-wide
	e := newEnv(t, time.Minute)
	e.runner(e.st)
	e.create(&trigger.Definition{Name: "sealed", Subject: "orders.created", Input: `{"order": input.id, "card": "` + secret + `"}`, ID: "input.id"})
	if err := e.ts.SetPaused(e.ctx, "sealed", true, "checking"); err != nil {
		t.Fatal(err)
	}
	if err := e.ts.SetPaused(e.ctx, "sealed", false, ""); err != nil {
		t.Fatal(err)
	}
	e.publish("orders.created", "", `{"id":"o1"}`)
	e.waitState("sealed", func(s *trigger.State) bool { return s.Started == 1 }, 20*time.Second)
	for run := range e.starts("sealed-") {
		var input []byte
		_ = eventlog.Each(e.ctx, e.st, run, 0, 0, func(ev *events.Event) error {
			if p, _ := ev.Payload(); p != nil {
				if s, ok := p.(*events.RunStartedData); ok {
					input = s.Input
				}
			}
			return nil
		})
		if !strings.Contains(string(input), secret) {
			t.Fatalf("run %s started with input %s", run, input)
		}
	}
	for _, stream := range []string{"KV_" + schedule.Bucket, e.st.StreamName()} {
		s, err := e.js.Stream(e.ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(e.ctx, seq)
			if err != nil {
				continue // deleted
			}
			n++
			var b bytes.Buffer
			b.WriteString(m.Subject)
			for k, vs := range m.Header {
				b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
			}
			b.Write(m.Data)
			if bytes.Contains(b.Bytes(), []byte(secret)) {
				t.Errorf("stream %s shows the secret in %s (seq %d)", stream, m.Subject, seq)
			}
		}
		t.Logf("stream %s: %d messages read raw, no secret", stream, n)
	}
	if err := eventlog.UseKeys(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ts.Get(e.ctx, "sealed"); !errors.Is(err, eventlog.ErrKeyMissing) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("reading the sealed definition without its key: %v, want ErrKeyMissing naming k1", err)
	}
}
