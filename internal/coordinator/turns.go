package coordinator

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
)

// Turns: which run's events the coordinator handles next. At most
// WithShards runs are handled at once (inflight.go); when more have
// events held, the next free shard goes by the runs' priority and
// fairness key (eventlog.RunStartedData), as the waiters of a
// concurrency slot are ranked (internal/flow, Entry.next): higher
// priorities first; within a priority, runs in progress before runs
// starting; then the fairness keys with runs waiting take turns, one run
// each; within a key, first come first served. So a key whose 10 runs
// started after 10,000 of another's is decided in turn with it, not
// after it: its starts, and the wakes of its slots, do not wait behind
// the other key's whole burst. And the outcomes of the work in progress
// do not wait behind a burst of starts either: an outcome gives its
// concurrency slot back, and until it is handled no waiter, of any key,
// is woken (measured: with 1,000 starts of one key ahead of them, the
// slots' holders' outcomes came after every start, and no slot changed
// hands for the 3 s the starts took).
//
// Runs starting hold at most a quarter of the shards at once
// (startShare); the rest are kept for the runs in progress. The partition
// consumers deliver the starts apart from the rest (lanes.go), so the
// outcomes are not behind a burst of starts in the stream; this keeps
// them from being behind it in the process.
//
// This order lives in memory only, and that is safe: it decides which
// held event is handled first, never what is decided. Each run's own
// events are still handled in delivery order, one at a time, and every
// decision is appended under the run's optimistic concurrency, so a
// coordinator that crashes loses only the order of events it had not
// acknowledged, which come again to the partition's next holder. What
// the ranking reaches is what the coordinator holds: the events the
// partition consumers delivered (their max_ack_pending, 4,096 over the
// partitions by default, for the starts and for the rest each); a key's
// starts behind a larger burst of starts in the stream wait until they
// are delivered.
//
// A run's class is read from its cached state, or, for the run's start,
// from the event's data (unless it is sealed); a run neither cached nor
// starting (evicted from the cache, a coordinator just started) goes
// with the default priority and the empty key.
type turns struct {
	mu   sync.Mutex
	free int
	// starting counts the shards held by runs starting, which hold at
	// most startCap: the others are kept for the runs in progress, so a
	// burst of starts does not take every shard, and the process's CPU
	// with them, from the outcomes and wakes of the runs going (see
	// startShare).
	starting, startCap int
	// lines holds the runs waiting, by rank (runClass.rank): the
	// highest first.
	lines [2 * (eventlog.MaxPriority + 1)]turnLine
}

// turnLine is one priority's waiting runs: the keys in turn order, and
// each key's waiters in the order they came.
type turnLine struct {
	keys    []string
	waiters map[string][]chan struct{}
}

// runClass is what ranks a run's turn: its priority, whether its event
// is its start, and its fairness key.
type runClass struct {
	priority int
	starting bool
	key      string
}

// rank orders the lines: by priority, then in progress before starting.
func (cl runClass) rank() int {
	r := 2 * clampPriority(cl.priority)
	if !cl.starting {
		r++
	}
	return r
}

// startShare: runs starting may hold one shard in startShare at once.
// What it buys is a floor under the runs in progress, not speed:
// measured (go run ./cmd/weftbench -only flow, the fairness row: a
// burst of 10,000 starts of one tenant beside 10 runs of another), the
// small tenant's runs took 5.4 times their time alone with every shard
// open to starts, 5.3 at a quarter (32 of 128) and 4.4 at a sixteenth;
// but at a sixteenth a burst of one-node runs started 20% slower (the
// flow rows' 1,000-run bursts: some 2,000 runs/s against 2,500), and at
// a quarter it did not (and 2,000 × 10 burst's wall clock did not move
// at either). So a quarter.
const startShare = 4

func newTurns(n int) *turns { return &turns{free: n, startCap: max(n/startShare, 1)} }

// acquire takes a shard for a run of class cl, waiting its turn; false
// says ctx ended first (no shard is held then).
func (t *turns) acquire(ctx context.Context, cl runClass) bool {
	t.mu.Lock()
	if t.free > 0 && (!cl.starting || t.starting < t.startCap) {
		t.free--
		if cl.starting {
			t.starting++
		}
		t.mu.Unlock()
		return true
	}
	ch := make(chan struct{}, 1)
	l := &t.lines[cl.rank()]
	if l.waiters == nil {
		l.waiters = map[string][]chan struct{}{}
	}
	if len(l.waiters[cl.key]) == 0 {
		l.keys = append(l.keys, cl.key)
	}
	l.waiters[cl.key] = append(l.waiters[cl.key], ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-ch: // handed over meanwhile: passed on
		t.giveBack(cl)
	default:
		l.remove(cl.key, ch)
	}
	return false
}

// release gives back the shard a run of class cl held: to the next run in
// turn, if any waits.
func (t *turns) release(cl runClass) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.giveBack(cl)
}

// giveBack is release, with mu held.
func (t *turns) giveBack(cl runClass) {
	if cl.starting {
		t.starting--
	}
	t.handOver()
}

// handOver gives a shard to the next waiter, or frees it: runs starting
// wait while they hold startCap shards. Called with mu held.
func (t *turns) handOver() {
	for p := len(t.lines) - 1; p >= 0; p-- {
		starting := p%2 == 0 // rank: in progress is the odd line of a priority
		if starting && t.starting >= t.startCap {
			continue
		}
		if ch := t.lines[p].next(); ch != nil {
			if starting {
				t.starting++
			}
			ch <- struct{}{}
			return
		}
	}
	t.free++
}

// next takes the head waiter of the key whose turn it is, and puts the
// key at the back of the turns if it has more.
func (l *turnLine) next() chan struct{} {
	if len(l.keys) == 0 {
		return nil
	}
	k := l.keys[0]
	l.keys = l.keys[1:]
	ws := l.waiters[k]
	ch := ws[0]
	if len(ws) == 1 {
		delete(l.waiters, k)
	} else {
		l.waiters[k] = ws[1:]
		l.keys = append(l.keys, k)
	}
	return ch
}

// remove takes a waiter that gave up out of its key's line.
func (l *turnLine) remove(key string, ch chan struct{}) {
	ws := l.waiters[key]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		l.waiters[key] = ws
		return
	}
	delete(l.waiters, key)
	for i, k := range l.keys {
		if k == key {
			l.keys = append(l.keys[:i:i], l.keys[i+1:]...)
			break
		}
	}
}

func clampPriority(p int) int {
	if p == 0 {
		return eventlog.DefaultPriority
	}
	return min(max(p, eventlog.MinPriority), eventlog.MaxPriority)
}

// classOf is the class of the run a delivery belongs to: from its cached
// state, else from the delivery when it is the run's start.
func (c *Coordinator) classOf(run string, msg jetstream.Msg) runClass {
	h := msg.Headers()
	starting := h.Get(eventlog.HdrType) == string(eventlog.RunStarted)
	if ent := c.cache.peek(run); ent != nil && ent.state != nil {
		return runClass{priority: ent.state.Priority, starting: starting, key: ent.state.FairnessKey}
	}
	if !starting || h.Get(eventlog.HdrContentType) != eventlog.ContentJSON {
		return runClass{starting: starting}
	}
	var d struct {
		Priority    int    `json:"priority"`
		FairnessKey string `json:"fairnessKey"`
	}
	_ = json.Unmarshal(msg.Data(), &d) // a start that does not decode goes with the default class
	return runClass{priority: d.Priority, starting: true, key: d.FairnessKey}
}
