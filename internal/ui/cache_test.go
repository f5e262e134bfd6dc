package ui

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/weft"
)

// TestUILogCache: a cached log, built whole or extended piece by piece,
// gives at every position the state the fold of the events up to it
// gives, and the cache follows a run's new events.
func TestUILogCache(t *testing.T) {
	srv := testkit.Server(t)
	nc, _ := testkit.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := weft.Start(ctx, weft.WithNATS(nc), weft.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	g, err := graph.Parse([]byte(`
name: many
nodes:
  - id: items
    type: echo
    map: {over: state.docs, concurrency: 20}
edges:
  - {from: START, to: items}
  - {from: items, to: END}
`), "many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]string, 120)
	for i := range docs {
		docs[i] = fmt.Sprint("doc", i)
	}
	cl := eng.Client()
	id, err := cl.Start(ctx, g, client.WithInput(map[string]any{"docs": docs}))
	if err != nil {
		t.Fatal(err)
	}
	c := newLogCache(eng.Store(), cl)
	// Read while it runs, then again once it ended: the second read
	// extends the first.
	early, err := c.get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	hist, err := cl.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n := len(hist)
	if n <= markEvery+1 {
		t.Fatalf("the run has %d events, want more than %d to cross a mark", n, markEvery+1)
	}
	cached, err := c.get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.events) != n || cached.final.Status != projection.RunCompleted || len(early.events) > n {
		t.Fatalf("cached log: %d events (early %d), %s; the run has %d", len(cached.events), len(early.events), cached.final.Status, n)
	}
	if again, _ := c.get(ctx, id); again != cached {
		t.Error("a run with no new event was read again")
	}
	pieces := &runLog{}
	for i := 0; i < n; i += 97 {
		pieces = pieces.extend(hist[i:min(i+97, n)])
	}
	whole := (&runLog{}).extend(hist)
	for _, pos := range []int{0, 1, markEvery - 1, markEvery, markEvery + 1, n - 1, n} {
		want := projection.Fold(hist[:pos]).Marshal()
		for name, l := range map[string]*runLog{"cached": cached, "in pieces": pieces, "whole": whole} {
			if got := l.stateAfter(pos).Marshal(); !bytes.Equal(got, want) {
				t.Errorf("%s: the state after %d differs from the fold's", name, pos)
			}
		}
	}
	for i := range hist {
		if fmt.Sprint(pieces.folded[i]) != fmt.Sprint(whole.folded[i]) || fmt.Sprint(cached.folded[i]) != fmt.Sprint(whole.folded[i]) {
			t.Errorf("event %d: folded %v / %v, whole %v", i+1, pieces.folded[i], cached.folded[i], whole.folded[i])
		}
	}
	if !bytes.Equal(cached.final.Marshal(), projection.Fold(hist).Marshal()) {
		t.Error("the cached final state differs from the fold's")
	}
}

// TestUILogCacheBounds: the cache keeps at most cachedRuns logs and about
// cachedBytes, dropping the least recently used, but always the log just
// read.
func TestUILogCacheBounds(t *testing.T) {
	c := newLogCache(nil, nil)
	put := func(run string, size int) {
		c.logs[run] = &runLog{size: size}
		c.touch(run)
	}
	for i := range cachedRuns + 3 {
		put(fmt.Sprint("r", i), 1)
	}
	if len(c.logs) != cachedRuns || c.logs["r0"] != nil || c.logs[fmt.Sprint("r", cachedRuns+2)] == nil {
		t.Errorf("after %d small logs: %d kept, order %v", cachedRuns+3, len(c.logs), c.order)
	}
	c.touch("r3") // used again: the last of the small ones to go
	put("big", cachedBytes/2)
	if c.logs["r3"] == nil || c.logs["r4"] != nil || c.logs["big"] == nil {
		t.Errorf("after a half-size log: order %v, want r4 (least recently used) dropped, r3 kept", c.order)
	}
	put("bigger", cachedBytes/2)
	if !slices.Equal(c.order, []string{"big", "bigger"}) || len(c.logs) != 2 {
		t.Errorf("after two half-size logs: order %v, want the small ones dropped", c.order)
	}
	put("huge", 2*cachedBytes)
	if len(c.logs) != 1 || c.logs["huge"] == nil {
		t.Errorf("after a log larger than the bound: order %v, want it alone", c.order)
	}
}
