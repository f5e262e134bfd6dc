package schedule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/schedule"
)

// TestSealedDefinitions: with a key ring in use, a schedule's definition
// is kept sealed (its input can hold customers' data): the raw bucket and
// the raw events stream hold no byte of the secret in its input, yet the
// schedule fires and its run starts with the input; without the key, the
// definition is refused naming the key id, never read as garbage.
func TestSealedDefinitions(t *testing.T) {
	const secret = "SCHEDULE-SECRET-7e1d"
	k, err := eventlog.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := eventlog.UseKeys(eventlog.KeyRing{k}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eventlog.UseKeys(nil) }) // the ring is process-wide
	e := newEnv(t)
	e.runner()
	e.create(&schedule.Definition{Name: "sealed", Every: schedule.Duration(time.Second), Overlap: schedule.OverlapAllowAll, Input: json.RawMessage(`{"card":"` + secret + `"}`)})
	st := e.waitFires("sealed", 1, 20*time.Second)
	if d := e.started(st.Fires[0].RunID); !strings.Contains(string(d.Input), secret) {
		t.Fatalf("the run started with input %s", d.Input)
	}
	d, _, err := e.ss.Get(e.ctx, "sealed")
	if err != nil || !strings.Contains(string(d.Input), secret) {
		t.Fatalf("reading the definition: %v", err)
	}
	e.stopAll()
	js := eventlog.JetStream(e.st)
	for _, stream := range []string{"KV_" + schedule.Bucket, e.st.StreamName()} {
		n := grepStream(e.ctx, t, js, stream, secret)
		t.Logf("stream %s: %d messages, no secret", stream, n)
	}
	if err := eventlog.UseKeys(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ss.Get(e.ctx, "sealed"); !errors.Is(err, eventlog.ErrKeyMissing) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("reading the sealed definition without its key: %v, want ErrKeyMissing naming k1", err)
	}
}

// grepStream fails the test if any message of stream (its subject,
// headers or body, as stored) holds secret; it returns how many it read.
func grepStream(ctx context.Context, t *testing.T, js jetstream.JetStream, stream, secret string) int {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
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
	if n == 0 {
		t.Fatalf("stream %s: nothing read", stream)
	}
	return n
}
