package flow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/flow"
)

// cancel-newest: a run over the limit is refused and not queued.
func TestAcquireRunCancelNewest(t *testing.T) {
	ctx := t.Context()
	l := open(t, nil)
	s := flow.Slot{Limit: "g", Key: "acme", Max: 1}
	if g, err := l.AcquireRun(ctx, s, flow.RunHolder("r1", 0, ""), flow.StrategyCancelNewest); err != nil || !g.Granted {
		t.Fatalf("r1: %+v %v, want granted", g, err)
	}
	g, err := l.AcquireRun(ctx, s, flow.RunHolder("r2", 0, ""), flow.StrategyCancelNewest)
	if err != nil || g.Granted || !g.Full {
		t.Fatalf("r2: %+v %v, want full", g, err)
	}
	es, _ := l.Entries(ctx)
	if len(es) != 1 || len(es[0].Waiters) != 0 || len(es[0].Holders) != 1 {
		t.Fatalf("entries %+v: the refused run was queued", es)
	}
	if _, err := l.Release(ctx, s, flow.RunHolder("r1", 0, "")); err != nil {
		t.Fatal(err)
	}
	if g, _ := l.AcquireRun(ctx, s, flow.RunHolder("r3", 0, ""), flow.StrategyCancelNewest); !g.Granted {
		t.Fatalf("r3 after the release: %+v", g)
	}
}

// cancel-oldest: each new run over the limit evicts a different holder,
// the oldest not evicted yet, and waits first in line for its slot;
// asking again names the same holder.
func TestAcquireRunCancelOldest(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := open(t, func() time.Time { now = now.Add(time.Second); return now })
	s := flow.Slot{Limit: "g", Key: "acme", Max: 2}
	for i := range 2 {
		if g, err := l.AcquireRun(ctx, s, flow.RunHolder(fmt.Sprint("old", i), 0, ""), flow.StrategyCancelOldest); err != nil || !g.Granted {
			t.Fatalf("old%d: %+v %v", i, g, err)
		}
	}
	g, err := l.AcquireRun(ctx, s, flow.RunHolder("new0", 0, ""), flow.StrategyCancelOldest)
	if err != nil || g.Granted || g.Evict == nil || g.Evict.Run != "old0" {
		t.Fatalf("new0: %+v %v, want old0 evicted", g, err)
	}
	g, _ = l.AcquireRun(ctx, s, flow.RunHolder("new1", 0, ""), flow.StrategyCancelOldest)
	if g.Granted || g.Evict == nil || g.Evict.Run != "old1" {
		t.Fatalf("new1: %+v, want old1 evicted", g)
	}
	g, _ = l.AcquireRun(ctx, s, flow.RunHolder("new2", 0, ""), flow.StrategyCancelOldest)
	if g.Granted || g.Evict != nil {
		t.Fatalf("new2: %+v, want queued with nothing left to evict", g)
	}
	if g, _ = l.AcquireRun(ctx, s, flow.RunHolder("new0", 0, ""), flow.StrategyCancelOldest); g.Evict == nil || g.Evict.Run != "old0" {
		t.Fatalf("new0 again: %+v, want old0 again", g)
	}
	// old0 ends (cancelled): new0, first in line, is woken and takes it.
	wake, err := l.Release(ctx, s, flow.RunHolder("old0", 0, ""))
	if err != nil || len(wake) != 1 || wake[0].Run != "new0" {
		t.Fatalf("release old0: wake %+v %v, want new0", wake, err)
	}
	if g, _ = l.AcquireRun(ctx, s, flow.RunHolder("new0", 0, ""), flow.StrategyCancelOldest); !g.Granted {
		t.Fatalf("new0 after old0's end: %+v", g)
	}
	es, _ := l.Entries(ctx)
	if len(es) != 1 || len(es[0].Holders) != 2 || len(es[0].Waiters) != 2 {
		t.Fatalf("entries %+v, want 2 holders (old1, new0), 2 waiters", es)
	}
}
