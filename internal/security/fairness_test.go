package security

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/projection"
)

// The flood of TestNamespaceFairness: 3 s in the normal suite;
// WEFT_FAIRNESS_FLOOD sets another ('make fairness' runs 30 s).
const defaultFlood = 3 * time.Second

const canaryGraph = `
name: canary
nodes:
  - {id: a, type: echo}
  - {id: b, type: echo}
  - {id: c, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: END}
`

// TestNamespaceFairness: one client of namespace a starts runs as fast as
// it can; a canary run of namespace b, started meanwhile, ends within
// twice its time on the idle system (the median of the canaries run
// during the flood, against the median of those run before it; the
// slowest is logged, and must end within seconds). One coordinator and
// one worker process serve both namespaces, each over its own
// connection; a's starts pass its admission limit (the default, 100 per
// second), and the rest are refused at the gate, before they cost a
// decision. A second flood sends raw admission requests, 512 in flight,
// ignoring every refusal: measured and logged, held only to "nothing
// stalls" (NATS has no per-account message rate: each request costs the
// server its routing and the coordinator a refusal).
func TestNamespaceFairness(t *testing.T) {
	flood := defaultFlood
	if v := os.Getenv("WEFT_FAIRNESS_FLOOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("WEFT_FAIRNESS_FLOOD=%q: want a duration", v)
		}
		flood = d
	}
	s := startTenants(t, natsconn.DefaultQuota())
	dir := t.TempDir()
	s.daemons(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), flood+3*time.Minute)
	defer cancel()
	a := s.client(t, user(nsA, natsconn.RoleClient, ""))
	b := s.client(t, user(nsB, natsconn.RoleClient, ""))
	canary := parse(t, canaryGraph)
	run := func() time.Duration {
		t.Helper()
		start := time.Now()
		id, err := b.Start(ctx, canary)
		if err != nil {
			t.Fatalf("b's canary: %v", err)
		}
		st, err := b.Wait(ctx, id)
		if err != nil || st.Status != projection.RunCompleted {
			t.Fatalf("b's canary %s: %v %v", id, st, err)
		}
		return time.Since(start)
	}
	// Warm both namespaces up (queues made, graphs compiled), then time
	// b's canary on the idle system.
	for range 3 {
		run()
		if _, err := a.Start(ctx, parse(t, oneNode)); err != nil {
			t.Fatal(err)
		}
	}
	// Lets the warm-up runs drain before measuring idle latency: a quiet period, not an event.
	time.Sleep(time.Second)
	var idle []time.Duration
	for range 9 {
		idle = append(idle, run())
		// Spaces the idle canaries apart: the probe's rate, not a wait for an event.
		time.Sleep(50 * time.Millisecond)
	}

	// The floods, each from a process of its own (flooder_test.go): a's
	// client with pkg/client, as fast as it can; then raw requests that
	// ignore every refusal. b's canaries run one after another, from half
	// a second in, until the flood ends.
	for _, mode := range []string{floodClient, floodRaw} {
		wait := s.startFlooder(t, mode, user(nsA, natsconn.RoleClient, ""), flood)
		floodEnd := time.Now().Add(flood)
		// Lets the flood build up before the first canary: a duration, not an event.
		time.Sleep(500 * time.Millisecond)
		var loaded []time.Duration
		for time.Now().Before(floodEnd) {
			loaded = append(loaded, run())
			// Spaces the loaded canaries apart: the probe's rate, not a wait for an event.
			time.Sleep(100 * time.Millisecond)
		}
		admitted, refused := wait()
		idleMedian, loadedMedian := median(idle), median(loaded)
		t.Logf("%s flood of %s by a's client: %d starts admitted (%.0f/s), %d refused (%.0f/s)", mode, flood,
			admitted, float64(admitted)/flood.Seconds(), refused, float64(refused)/flood.Seconds())
		if len(loaded) == 0 {
			t.Fatal("no canary ran during the flood")
		}
		t.Logf("b's canary (3 nodes on a worker): idle median %s (of %d), under the %s flood median %s, slowest %s (of %d): %.2fx",
			idleMedian.Round(time.Millisecond), len(idle), mode, loadedMedian.Round(time.Millisecond), slices.Max(loaded).Round(time.Millisecond), len(loaded),
			float64(loadedMedian)/float64(idleMedian))
		if float64(admitted) > 1.5*float64(natsconn.DefaultStartsPerSecond)*flood.Seconds()+float64(natsconn.DefaultStartsPerSecond) {
			t.Errorf("%d starts admitted in %s at %d per second", admitted, flood, natsconn.DefaultStartsPerSecond)
		}
		// The bound is the 2x. In the normal suite (a 3 s flood
		// while other test packages share the 2 cores) a canary of ~13 ms
		// is also let through within 25 ms of idle: the shared machine's
		// noise, not the flood, makes the rest; 'make fairness' holds
		// the 30 s figure to 2x alone.
		slack := time.Duration(0)
		if os.Getenv("WEFT_FAIRNESS_FLOOD") == "" {
			slack = 25 * time.Millisecond
		}
		if mode == floodClient && loadedMedian > 2*idleMedian && loadedMedian > idleMedian+slack {
			t.Errorf("b's canary took %s under a's flood, over twice its %s on the idle system", loadedMedian, idleMedian)
		}
		// Nothing may stall: the slowest canary ends in a few seconds
		// (the finding this answers: a canary started during a flood had
		// not ended a minute later).
		if slowest := slices.Max(loaded); slowest > 5*time.Second {
			t.Errorf("a canary of b took %s under a's %s flood", slowest, mode)
		}
		// Lets the previous flood's backlog drain before the next mode: a quiet period, not an event.
		time.Sleep(time.Second)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
