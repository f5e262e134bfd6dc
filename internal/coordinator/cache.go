package coordinator

import (
	"container/list"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// runEntry is a cached run: its state, folded from the log and from the
// decisions this coordinator appended.
type runEntry struct {
	run   string
	state *projection.State
	// prefix: every event of the run up to this sequence is in state.
	prefix uint64
	// lastDecision is the sequence of the run's last decision.
	lastDecision uint64
	// ownMax is the sequence of the last decision this coordinator
	// appended and applied to state ahead of the consumer.
	ownMax uint64
	// own holds the ids of decisions this coordinator applied in memory
	// and has not yet seen come back through the consumer.
	own map[string]struct{}
	// indexed is the runs.IndexKey of the summary last put in the read
	// model (readmodel.go).
	indexed string
	// notified is set once an ended child run told its parent.
	notified bool
	// claim is set when the run's start is a client's that claims a
	// parent (children.go): the run does not exist for the engine.
	claim *events.ParentClaimError
	// sealedStart is set when the run's start is sealed under a key this
	// coordinator lacks (read leniently, by fail): the run exists, and
	// can be failed, though its state is out of reach.
	sealedStart bool
	// armed holds the timers this coordinator armed for the run, by id,
	// at the time they were armed for.
	armed map[string]time.Time
	// dropped is set once the run ended and its schedules were purged.
	dropped bool
	// unscheduled is set while no timer of the run can exist: the entry
	// was made from the run's start (not read from the log) and armed
	// none since. Timers are scheduled only here (syncTimers), after the
	// entry saw their cause, so an ended run whose entry is unscheduled
	// has no schedule to purge.
	unscheduled bool
	// released holds the concurrency slots given back for the run, by
	// holder id (flow.go): it spares the bucket a read, nothing more.
	released map[string]struct{}
	// granted holds the attempts a wake said were handed their slot, by
	// holder id, not yet decided (flow.go, noteGrant).
	granted map[string]struct{}
	// traces holds, with tracing on, the trace context of each node's
	// last outcome (and of the run's start), for the links of joins.
	traces map[string]trace.SpanContext
	// local holds the work items of the run's ready local nodes, by
	// attempt (local.go); localScanned is set once the log was searched
	// for one the entry did not hold.
	local        map[string]*localItem
	localScanned bool
}

// runCache is an LRU of run entries. Each run is handled by one goroutine
// at a time (inflight.go), so entries need no lock; the cache's index does.
type runCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent
	items map[string]*list.Element
}

func newRunCache(max int) *runCache {
	return &runCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *runCache) get(run string) *runEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[run]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*runEntry)
}

func (c *runCache) put(e *runEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.run]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.items[e.run] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*runEntry).run)
	}
}

func (c *runCache) del(run string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[run]; ok {
		c.order.Remove(el)
		delete(c.items, run)
	}
}

// dropIf removes the runs for which drop says so.
func (c *runCache) dropIf(drop func(run string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for run, el := range c.items {
		if drop(run) {
			c.order.Remove(el)
			delete(c.items, run)
		}
	}
}

// noteStart notes what a run's start, read from the log, says beyond the
// fold: a client's start that claims a parent (claim), one sealed under a
// key this coordinator lacks (sealedStart).
func (ent *runEntry) noteStart(ev *events.Event) {
	if claim := (*events.ParentClaimError)(nil); ent.state.Status == projection.RunPending && errors.As(ev.Refused, &claim) {
		ent.claim = claim
	}
	if ev.Type == events.RunStarted && errors.Is(ev.Refused, events.ErrKeyMissing) {
		ent.sealedStart = true
	}
}

// peek returns a run's entry without counting it as used.
func (c *runCache) peek(run string) *runEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[run]; ok {
		return el.Value.(*runEntry)
	}
	return nil
}
