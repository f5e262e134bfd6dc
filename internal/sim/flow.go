package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// memKV is the simulator's model of the flow bucket (internal/flow): keys
// with revisions from one counter, compare-and-set as the server does it.
// Every coordinator process shares it, as they share the real bucket.
type memKV struct {
	mu   sync.Mutex
	rev  uint64
	vals map[string]memKVal
}

type memKVal struct {
	v   []byte
	rev uint64
}

func newMemKV() *memKV { return &memKV{vals: map[string]memKVal{}} }

func (m *memKV) Get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	if !ok {
		return nil, 0, nil
	}
	return slices.Clone(v.v), v.rev, nil
}

func (m *memKV) Put(_ context.Context, key string, value []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals[key].rev != rev {
		return 0, flow.ErrConflict
	}
	if value == nil {
		delete(m.vals, key)
		return 0, nil
	}
	m.rev++
	m.vals[key] = memKVal{v: slices.Clone(value), rev: m.rev}
	return m.rev, nil
}

func (m *memKV) Keys(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.vals {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *memKV) After(_ context.Context, prefix string, rev uint64, n int) ([]flow.Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []flow.Item
	for k, v := range m.vals {
		if strings.HasPrefix(k, prefix) && v.rev > rev {
			out = append(out, flow.Item{Key: k, Value: slices.Clone(v.v), Rev: v.rev})
		}
	}
	slices.SortFunc(out, func(a, b flow.Item) int { return cmp.Compare(a.Rev, b.Rev) })
	return out[:min(n, len(out))], nil
}

// newLimiter is a limiter of the shared bucket, parking the waiters of a
// line past twice its key's max (none kept past it, where production
// keeps flow.DefaultParkSlack more), so that the simulator's few waiters
// park and are moved back in.
func (s *Sim) newLimiter() *flow.Limiter {
	l := flow.New(s.flowKV, s.clock.Now)
	l.SetParkSlack(0)
	return l
}

func (m *memKV) empty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.vals) == 0
}

// sweepDue is when the next sweep of the flow bucket is due, if the
// bucket holds anything: production coordinators sweep every
// flow.SweepInterval.
func (s *Sim) sweepDue() (time.Time, bool) {
	if s.flowKV.empty() {
		return time.Time{}, false
	}
	return s.lastSweep.Add(flow.SweepInterval), true
}

// sweep has a live coordinator sweep the flow bucket for every run (the
// simulator has no partitions).
func (s *Sim) sweep() {
	s.lastSweep = s.clock.now
	for _, ci := range s.coords {
		if ci.dead {
			continue
		}
		n, err := s.sweepIn(ci)
		s.note("%s sweeps the flow bucket: %d reclaimed, err %v", ci.name, n, err)
		return
	}
}

func (s *Sim) sweepIn(ci *coordInstance) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			s.replaceCoord(ci)
		}
	}()
	return ci.c.SweepFlow(context.Background(), func(string) bool { return true })
}

// checkFlow checks the concurrency limits: no key of the bucket has more
// holders than its max, and, from the log, no more attempts of a key ran
// at once (readied with the slot, outcome not yet in, run not ended) than
// its max.
func (v *validator) checkFlow() {
	es, err := v.s.flowLimiter.Entries(context.Background())
	if err != nil {
		v.fail("", "flow state readable", "%v", err)
		return
	}
	for _, e := range es {
		v.count("never more than max holders per key")
		if len(e.Holders) > e.Max {
			v.fail(e.Holders[0].Run, "never more than max holders per key", "limit %q key %q: %d holders, max %d", e.Limit, e.Key, len(e.Holders), e.Max)
			return
		}
	}
	v.checkRunLimits()
	for slot, n := range v.liveSlots() {
		v.count("never more than max attempts run per key (log)")
		if n > slot.Max {
			v.fail("", "never more than max attempts run per key (log)", "limit %q key %q: %d attempts readied and not ended, max %d", slot.Limit, slot.Key, n, slot.Max)
			return
		}
	}
}

// liveSlots counts, from the log, the attempts (and map items) of runs
// that have not ended holding each slot: readied with it, outcome not in.
func (v *validator) liveSlots() map[events.SlotRef]int {
	live := map[events.SlotRef]int{}
	for _, id := range v.order {
		rc := v.runs[id]
		if rc.state == nil || rc.state.Status.Ended() {
			continue
		}
		for _, ns := range rc.state.Nodes {
			if ns.Slot != nil && ns.WaitingFor == "" && (ns.Status == "ready" || ns.Status == "running") {
				live[*ns.Slot]++
			}
			for _, it := range ns.Items { // map items hold slots of their own
				if it.Slot != nil && (it.Status == "ready" || it.Status == "running") {
					live[*it.Slot]++
				}
			}
		}
	}
	return live
}

// finalFlow checks that once every run ended no slot is held and no
// attempt waits: none was leaked.
func (v *validator) finalFlow() *Violation {
	v.count("final: no slot held by an ended attempt")
	es, err := v.s.flowLimiter.Entries(context.Background())
	if err != nil || len(es) > 0 {
		return v.violation("", "no slot held by an ended attempt", fmt.Sprintf("the bucket holds %+v (%v)", es, err))
	}
	return nil
}

// checkRunLimits checks the graphs' run limits from the log: no more runs
// of a limit in progress at once (entered, START routed, and not ended)
// than its max. Only limits without a key are counted (the simulator's
// graphs have no other); the bucket's check covers every key.
func (v *validator) checkRunLimits() {
	in := map[string]int{}
	limits := map[string]int{}
	for _, id := range v.order {
		rc := v.runs[id]
		if rc.state == nil || rc.state.Status.Ended() || !rc.state.EntryRouted {
			continue
		}
		var def struct {
			Name        string                `json:"name"`
			Concurrency *graph.RunConcurrency `json:"concurrency"`
		}
		if json.Unmarshal(rc.state.Graph, &def) != nil || def.Concurrency == nil || def.Concurrency.Key != "" {
			continue
		}
		name := graph.RunLimitName(&graph.Definition{Name: def.Name, Concurrency: def.Concurrency})
		in[name]++
		limits[name] = def.Concurrency.Max
	}
	for name, n := range in {
		v.count("never more than max runs in progress per key (log)")
		if n > limits[name] {
			v.fail("", "never more than max runs in progress per key (log)", "run limit %q: %d runs entered and not ended, max %d", name, n, limits[name])
			return
		}
	}
}
