package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// A run's history of about 100 MB (over the server's default max_pending
// of 64 MB, where one batched read used to be cut off as a slow consumer
// and the run could no longer be read) is read whole by Read, and walked
// by Each in bounded memory, on an embedded server with file storage.
//
// Offloading off: the history's bodies are in the stream itself (with it
// on, batches are cut by resolved bytes: TestEachBoundsResolvedBytes).
func TestLargeHistoryStreams(t *testing.T) {
	_, st := testkit.Store(t, eventlog.WithOffloadAt(0))
	ctx := context.Background()
	run := eventlog.NewRunID()
	if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
		t.Fatal(err)
	}
	// Signals of ~900 KB each: a client's own subject, no decision needed.
	chunk := 900 << 10
	payload, _ := json.Marshal(map[string]string{"pad": string(bytes.Repeat([]byte("x"), chunk))})
	const n = 115
	for i := range n {
		e := mustEvent(t, run, fmt.Sprintf("%s:big:%d", run, i), &eventlog.SignalReceivedData{Node: "a", Data: payload})
		if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, e); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	total := int64(n) * int64(len(payload))
	if total < 100<<20 {
		t.Fatalf("history of %d bytes, want over 100 MB", total)
	}

	// Each: what stays live while walking is far below the history's
	// size. (The embedded server shares the heap: its block caches are in
	// the baseline and the peak alike.)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var seen int
	var bytesSeen int64
	var peak uint64
	err := eventlog.Each(ctx, st, run, 0, 0, func(e *eventlog.Event) error {
		if e.Refused != nil {
			return fmt.Errorf("seq %d refused: %v", e.Seq, e.Refused)
		}
		seen++
		bytesSeen += int64(len(e.Data))
		if seen%10 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	if seen != n+1 || bytesSeen < total {
		t.Fatalf("Each saw %d events, %d bytes; want %d, ≥ %d", seen, bytesSeen, n+1, total)
	}
	grew := int64(peak) - int64(base)
	if grew > 48<<20 {
		t.Errorf("walking a %d MB history kept %d MB live", total>>20, grew>>20)
	}
	t.Logf("walked %d MB in %d events, live heap grew by at most %d MB", total>>20, seen, grew>>20)

	// Read gives the whole history (in memory: its caller asked for it).
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(evs) != n+1 || evs[len(evs)-1].Seq != evs[0].Seq+uint64(n) {
		t.Fatalf("Read gave %d events", len(evs))
	}
	// ReadThrough from the middle reaches the end.
	evs, err = st.ReadThrough(ctx, run, evs[n/2].Seq, evs[n].Seq)
	if err != nil || len(evs) != n-n/2+1 {
		t.Fatalf("ReadThrough: %d events, %v", len(evs), err)
	}
	// ErrStop ends a walk early without an error.
	count := 0
	if err := eventlog.Each(ctx, st, run, 0, 0, func(*eventlog.Event) error {
		if count++; count == 3 {
			return eventlog.ErrStop
		}
		return nil
	}); err != nil || count != 3 {
		t.Fatalf("stopped walk: %d events, %v", count, err)
	}
}
