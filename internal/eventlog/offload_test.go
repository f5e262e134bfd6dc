package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestOffloadRefusals: what goes wrong beside the log gets a clear error
// that names where. A body over the object limit is refused at the
// append, naming the limit; in a stored history, a reference to an object
// that is missing, a reference over the limit and a body of an unknown
// codec are each refused (the event keeps its place, never read as data),
// naming the subject, and the events around them stay readable.
func TestOffloadRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	st, err := eventlog.Open(ctx, js, eventlog.WithOffloadAt(1024))
	if err != nil {
		t.Fatal(err)
	}
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	signal := func(id string, n int) *eventlog.Event {
		data, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", n)})
		return mustEvent(t, run, run+":"+id, &eventlog.SignalReceivedData{Node: "a", Data: data})
	}

	// Over the object limit: refused before anything is written.
	_, err = eventlog.Append(ctx, st, run, eventlog.AnySeq, signal("huge", eventlog.MaxPayloadObject+1))
	if !errors.Is(err, eventlog.ErrPayloadTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(eventlog.MaxPayloadObject)) || !strings.Contains(err.Error(), run) {
		t.Fatalf("a body over the object limit: %v, want ErrPayloadTooLarge naming the run and the limit", err)
	}

	// A large body, then its object deleted behind the log's back.
	gone, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, signal("gone", 4096))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil || len(infos) != 1 {
		t.Fatalf("objects %d, %v; want the one body", len(infos), err)
	}
	missing := infos[0].Name
	if err := obs.Delete(ctx, missing); err != nil {
		t.Fatal(err)
	}

	// Forged messages: a reference over the limit, an unknown codec.
	subject := signal("x", 1).Subject()
	forge := func(id, contentType string, body []byte) {
		t.Helper()
		m, err := eventlog.EncodePlain(signal(id, 1))
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Set("content-type", contentType)
		m.Data = body
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ref, _ := json.Marshal(map[string]any{"bucket": eventlog.PayloadsBucket, "object": run + "." + strings.Repeat("a", 64),
		"size": eventlog.MaxPayloadObject + 1, "sha256": strings.Repeat("a", 64), "contentType": "application/json"})
	forge("over", eventlog.ContentRef, ref)
	forge("zstd", "application/vnd.weft.zstd", []byte("(compressed)"))
	last, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, signal("after", 10))
	if err != nil {
		t.Fatal(err)
	}

	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		err  error
		text string
	}{
		{nil, ""}, // run-started
		{eventlog.ErrMalformedEvent, missing + " of bucket " + eventlog.PayloadsBucket + " is missing"},
		{eventlog.ErrPayloadTooLarge, fmt.Sprint(eventlog.MaxPayloadObject)},
		{eventlog.ErrMalformedEvent, `unknown codec: content type "application/vnd.weft.zstd"`},
		{nil, ""}, // the event after them
	}
	if len(evs) != len(want) || evs[1].Seq != gone || evs[4].Seq != last {
		t.Fatalf("read %d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		e := evs[i]
		switch {
		case w.err == nil && e.Refused != nil:
			t.Errorf("event %d: refused %v", e.Seq, e.Refused)
		case w.err != nil && (!errors.Is(e.Refused, w.err) || !strings.Contains(e.Refused.Error(), w.text) || !strings.Contains(e.Refused.Error(), subject)):
			t.Errorf("event %d: refused %v, want %v naming %s and %q", e.Seq, e.Refused, w.err, subject, w.text)
		case w.err != nil && (e.Data != nil || bytes.Contains([]byte(e.Refused.Error()), []byte("xxxx"))):
			t.Errorf("event %d: refused, yet read as data", e.Seq)
		}
	}
}

// TestEachBoundsResolvedBytes: a history of references to large bodies
// (each a few hundred bytes in the log, 4 MB once resolved) is walked by
// Each in bounded memory: a batch is cut by the bytes it resolves, not by
// the bytes of its references, so 20 of them (80 MB) are never all held
// at once; every event comes, in order, whole.
func TestEachBoundsResolvedBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	st, err := eventlog.Open(ctx, js, eventlog.WithOffloadAt(eventlog.DefaultOffloadAt))
	if err != nil {
		t.Fatal(err)
	}
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	const n, size = 20, 4 << 20
	pad := strings.Repeat("x", size)
	for i := range n {
		data, _ := json.Marshal(map[string]string{"i": fmt.Sprint(i), "pad": pad})
		e := mustEvent(t, run, fmt.Sprintf("%s:big:%d", run, i), &eventlog.SignalReceivedData{Node: "a", Data: data})
		if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, e); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	pad = ""
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	seen := 0
	err = eventlog.Each(ctx, st, run, 0, 0, func(e *eventlog.Event) error {
		if e.Refused != nil {
			return fmt.Errorf("seq %d refused: %v", e.Seq, e.Refused)
		}
		if seen > 0 {
			var sig eventlog.SignalReceivedData
			var body struct{ I, Pad string }
			if json.Unmarshal(e.Data, &sig) != nil || json.Unmarshal(sig.Data, &body) != nil || body.I != fmt.Sprint(seen-1) || len(body.Pad) != size {
				return fmt.Errorf("seq %d: not body %d whole", e.Seq, seen-1)
			}
		}
		seen++
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != n+1 {
		t.Fatalf("Each saw %d events, want %d", seen, n+1)
	}
	grew := int64(peak) - int64(base)
	// Under the bodies' total: holding them all at once (as a batch of
	// 1000 resolved references did: 184 MB) cannot pass. The embedded
	// server shares the heap, and its block caches of the bucket count.
	if grew >= n*size {
		t.Errorf("walking %d references to %d MB bodies kept %d MB live", n, size>>20, grew>>20)
	}
	t.Logf("walked %d MB of resolved bodies, live heap grew by at most %d MB", n*size>>20, grew>>20)
}
