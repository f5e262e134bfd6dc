package reliability

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/reliability/ledger"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Flow control in the chaos test (testdata/chaos.yaml): the ledger nodes a
// and b share the concurrency limit chaos-ledger, chaosSlots per tenant,
// and the runs belong to tenants in turn, one per chaosRunsPerTenant runs
// (two at least, so that the limit binds throughout the short version and
// the long one's ends stay within its bound). Three checks, once
// every run ended:
//
//   - from the log: the spans in which an attempt of a or b ran (from the
//     event that made it running, a worker's invoking, to the one that
//     ended it, its outcome or the run's end; event times, one machine's
//     clock) never overlap more than chaosSlots deep per tenant. A span
//     lies inside the slot's holding: the work is readied after the slot
//     was taken, and the slot is given back after the outcome is folded;
//   - from the ledger: the same of the effects, from when a delivery began
//     its effect (the ledger worker's clock, -hold before its write) to
//     when the server stored the ledger key, for the writes that created
//     their key (one per attempt that had an effect);
//   - no slot is leaked: the flow bucket ends with no holder and no
//     waiter, within a sweep's grace and two sweeps of the last run's end.
const (
	chaosSlots         = 2
	chaosRunsPerTenant = 100
	chaosHold          = 30 * time.Millisecond
)

// chaosTenant is the tenant of run i of n.
func chaosTenant(i, n int) string {
	return fmt.Sprintf("tenant-%d", i%max(2, n/chaosRunsPerTenant))
}

// span is one attempt's (or effect's) time holding a slot of a tenant.
type span struct {
	tenant, what string
	from, to     time.Time
}

// deepest is the most spans of one tenant open at one moment, and the
// spans open then.
func deepest(spans []span) (int, []span) {
	type edge struct {
		at   time.Time
		open bool
		i    int
	}
	byTenant := map[string][]edge{}
	for i, s := range spans {
		byTenant[s.tenant] = append(byTenant[s.tenant], edge{s.from, true, i}, edge{s.to, false, i})
	}
	most, at := 0, []span(nil)
	for _, es := range byTenant {
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			if a.open == b.open {
				return 0
			}
			if a.open {
				return 1 // an end at the same moment goes first
			}
			return -1
		})
		open := map[int]bool{}
		for _, e := range es {
			if !e.open {
				delete(open, e.i)
				continue
			}
			open[e.i] = true
			if len(open) > most {
				most, at = len(open), nil
				for i := range open {
					at = append(at, spans[i])
				}
			}
		}
	}
	return most, at
}

// limited reports whether a node is under chaos-ledger.
func limited(node string) bool { return node == "a" || node == "b" }

// logSpans are the running spans of the limited nodes' attempts, from the
// runs' logs, and how many times an attempt waited for a slot.
func logSpans(runs []*chaosRun, logs map[string][]*events.Event) ([]span, int) {
	var out []span
	waits := 0
	for _, r := range runs {
		s := &projection.State{}
		open := map[string]*span{} // by node
		for _, e := range logs[r.id] {
			if s.Apply(e) != nil {
				continue // refused or stale: not the run's history
			}
			if e.Type == events.NodeWaiting {
				if p, err := e.Payload(); err == nil && p.(*events.NodeWaitingData).For == "slot" {
					waits++
				}
			}
			for _, node := range []string{"a", "b"} {
				ns := s.Nodes[node]
				if ns == nil {
					continue
				}
				id := fmt.Sprintf("%s/%s/%d/%d", r.id, node, ns.Iteration, ns.Attempt)
				running := ns.Status == projection.NodeRunning && !s.Status.Ended()
				if sp := open[node]; sp != nil && (sp.what != id || !running) {
					sp.to = e.Time
					out = append(out, *sp)
					delete(open, node)
				}
				if running && open[node] == nil {
					open[node] = &span{tenant: r.tenant, what: id, from: e.Time}
				}
			}
		}
		for _, sp := range open {
			sp.to = time.Now() // never ended: open to the end
			out = append(out, *sp)
		}
	}
	return out, waits
}

// ledgerSpans are the effects' spans of the limited nodes, from the
// ledger worker's records of the writes that created their key.
func ledgerSpans(runs []*chaosRun, writes []ledger.Write) []span {
	tenant := map[string]string{}
	for _, r := range runs {
		tenant[r.id] = r.tenant
	}
	byKey := map[string]*span{}
	var keys []string
	for _, w := range writes {
		if w.Result != "created" || !limited(w.Entry.Node) || w.Began.IsZero() || w.Created.IsZero() {
			continue
		}
		// One effect per key: a record published twice (its publish
		// retried), or a Create retried by the same process, is one.
		if sp := byKey[w.Key]; sp != nil {
			sp.from = minTime(sp.from, w.Began)
			continue
		}
		byKey[w.Key] = &span{tenant: tenant[w.Entry.Run], what: w.Key, from: w.Began, to: w.Created}
		keys = append(keys, w.Key)
	}
	out := make([]span, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// leftInBucket waits for the flow bucket to hold no holder and no waiter
// and returns what it still holds once the wait is over.
func leftInBucket(t *testing.T, js jetstream.JetStream, within time.Duration) []flow.Entry {
	t.Helper()
	var left []flow.Entry
	deadline := time.Now().Add(within)
	for {
		err := retry(30*time.Second, func(ctx context.Context) error {
			l, err := flow.Lookup(ctx, js)
			if err != nil {
				return err
			}
			left, err = l.Entries(ctx)
			return err
		})
		if err != nil {
			t.Errorf("reading the flow bucket: %v", err)
			return nil
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		// Polls: a sweep reclaims a leaked slot, and notifies nobody.
		time.Sleep(time.Second)
	}
}

// checkFlow runs the three checks and returns a summary for the log.
func (r *chaosReport) checkFlow(t *testing.T, runs []*chaosRun, logs map[string][]*events.Event, writes []ledger.Write, js jetstream.JetStream) string {
	spans, waits := logSpans(runs, logs)
	most, at := deepest(spans)
	if most > chaosSlots {
		r.t.Errorf("the log shows %d attempts of one tenant under chaos-ledger (max %d) running at once: %s", most, chaosSlots, spanList(at))
	}
	effects := ledgerSpans(runs, writes)
	mostEffects, atEffects := deepest(effects)
	if mostEffects > chaosSlots {
		r.t.Errorf("the ledger shows %d effects of one tenant under chaos-ledger (max %d) at once: %s", mostEffects, chaosSlots, spanList(atEffects))
	}
	left := leftInBucket(t, js, flow.Grace+3*flow.SweepInterval)
	for _, e := range left {
		r.t.Errorf("slots leaked: limit %q key %q still has %d holders and %d waiters after every run ended", e.Limit, e.Key, len(e.Holders), len(e.Waiters))
	}
	return fmt.Sprintf("flow: %d attempt spans, deepest %d of %d; %d effect spans, deepest %d; %d waits for a slot; %d keys left in the bucket",
		len(spans), most, chaosSlots, len(effects), mostEffects, waits, len(left))
}

func spanList(ss []span) string {
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.what, b.what) })
	out := ""
	for _, s := range ss {
		out += fmt.Sprintf("\n  %s %s %s → %s", s.tenant, s.what, s.from.Format("15:04:05.000"), s.to.Format("15:04:05.000"))
	}
	return out
}

// The check of the spans counts overlaps per tenant, an end and a start
// at one moment not overlapping.
func TestDeepestSpans(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	spans := []span{
		{tenant: "x", what: "1", from: at(0), to: at(10)},
		{tenant: "x", what: "2", from: at(5), to: at(20)},
		{tenant: "x", what: "3", from: at(10), to: at(30)}, // starts as 1 ends
		{tenant: "y", what: "4", from: at(6), to: at(8)},
	}
	if n, _ := deepest(spans); n != 2 {
		t.Fatalf("deepest = %d, want 2", n)
	}
	spans = append(spans, span{tenant: "x", what: "5", from: at(15), to: at(16)})
	if n, open := deepest(spans); n != 3 || len(open) != 3 {
		t.Fatalf("deepest = %d (%v), want 3", n, open)
	}
}
