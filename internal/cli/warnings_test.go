package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
)

const (
	warnNever   = "warning: no coordinator has ever run"
	warnNoneNow = "warning: no coordinator alive"
	warnStalled = "has not advanced for"
)

// TestWarnsWhenNothingDecides: with no coordinator, 'weft status' and
// 'weft list' say nothing decides and that the run has not advanced; once
// a coordinator ran and stopped, they say none is alive; with one running
// and the run waiting for a person, they say nothing.
func TestWarnsWhenNothingDecides(t *testing.T) {
	srv, store := testkit.Store(t)
	url := srv.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A person's approval only: no worker needed.
	g, err := graph.Parse([]byte(`
name: ask
nodes:
  - {id: approve, type: human}
edges:
  - {from: START, to: approve}
  - {from: approve, to: END}
`), "ask.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(store)
	run, err := cl.Start(ctx, g)
	if err != nil {
		t.Fatal(err)
	}

	// With no coordinator ever, there is no read model to list from:
	// weft list says so, and why.
	if r := weft(t, "list", "-nats", url); r.code != 1 || !strings.Contains(r.stderr, warnNever) || !strings.Contains(r.stderr, "no read model of runs") {
		t.Errorf("weft list without a coordinator ever: exit %d, stderr %q; want 1, the warning and the missing read model", r.code, r.stderr)
	}
	for _, args := range [][]string{{"status", run}} {
		r := weft(t, append(args, "-nats", url, "-stall", "1ms")...)
		if r.code != 0 || !strings.Contains(r.stderr, warnNever) || !strings.Contains(r.stderr, warnStalled) {
			t.Errorf("weft %s without a coordinator: exit %d, stderr %q; want both warnings", args[0], r.code, r.stderr)
		}
		// The default -stall is minutes: a run started just now has not
		// stalled.
		if r := weft(t, append(args, "-nats", url)...); strings.Contains(r.stderr, warnStalled) {
			t.Errorf("weft %s with the default -stall: %q", args[0], r.stderr)
		}
	}

	// A coordinator runs: the run advances to its human node, and nothing
	// is said, even with a tiny -stall (waiting for a person is expected).
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = coordinator.New(store, coordinator.WithLeaseTTL(time.Second)).Run(cctx) })
	defer func() { stop(); wg.Wait() }()
	waitFor(t, func() bool {
		st, err := cl.Get(ctx, run)
		return err == nil && st.Nodes["approve"] != nil && st.Nodes["approve"].WaitingFor == "signal"
	})
	for _, args := range [][]string{{"status", run}, {"list"}} {
		if r := weft(t, append(args, "-nats", url, "-stall", "1ms")...); r.code != 0 || strings.Contains(r.stderr, "warning") {
			t.Errorf("weft %s with a coordinator and a run waiting for a signal: exit %d, stderr %q; want no warning", args[0], r.code, r.stderr)
		}
	}

	// The coordinator stops: once its announcement is older than its lease
	// duration, the warning says none is alive.
	stop()
	wg.Wait()
	waitFor(t, func() bool {
		return strings.Contains(weft(t, "status", run, "-nats", url).stderr, warnNoneNow)
	})
	if r := weft(t, "list", "-nats", url); !strings.Contains(r.stderr, warnNoneNow) {
		t.Errorf("weft list with no coordinator alive: stderr %q", r.stderr)
	}
}

// waitFor polls cond until it holds, for at most 20 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		<-tick.C
	}
}
