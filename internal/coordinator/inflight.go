package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Events between the consumer and the handler. The partition consumers'
// iterators pull ahead of what is being handled, and an event the
// consumer delivered is on the clock of its ack wait from then on, in the
// iterator's buffer or here. So no event waits unwatched:
//
//   - each run with events held has its own queue, handled in delivery
//     order by one goroutine at a time; at most WithShards runs are
//     handled at once, the next free shard going by the runs' priority
//     and fairness key (turns.go). A run whose handling is slow (an append that
//     hangs, a long read) holds up its own later events and nothing else:
//     the others go on through the free slots;
//   - every event held, queued or being handled, gets an in-progress
//     acknowledgement every third of the ack wait (the shortest of the
//     partition consumers'), so the server does not deliver it again
//     while it waits its turn;
//   - the events held are bounded by the server: each partition
//     consumer delivers at most its max_ack_pending unacknowledged
//     events (partitionAckPending when the coordinator created it), and
//     what the coordinator may hold is the sum of those of the
//     partitions it consumes (bound). So a burst waits in the stream,
//     not here, and no event is handed back for want of room; past the
//     bound (a consumer with no limit, or an event delivered again after
//     its ack wait while held), a new event is handed back for a short
//     delay rather than held, which is what an overloaded coordinator
//     does instead of buffering without limit;
//   - an event whose partition this coordinator no longer holds when its
//     turn comes, or that is still waiting when the coordinator stops, is
//     handed back at once, for the partition's next holder (who would
//     otherwise get it only after the ack wait).
type inflight struct {
	c   *Coordinator
	ctx context.Context
	// shards bounds the runs handled at once, and gives the next free
	// one by the runs' priority and fairness key (turns.go).
	shards *turns
	size   int
	// fixed, when set (WithMaxHeld, tests), bounds the events held in
	// place of the partitions' own bounds.
	fixed int

	ackWait atomic.Int64 // the shortest of the consumers', in nanoseconds

	mu   sync.Mutex
	runs map[string]*runQueue // runs with events held
	held int
	// bounds holds the max_ack_pending of each partition consumed (see
	// bound).
	bounds map[laneKey]int
	wg     sync.WaitGroup
}

// runQueue is one run's held events, the first of which may be being
// handled.
type runQueue struct {
	pending []delivery
	current *delivery // being handled
}

// delivery is a message on its way to its run's handler.
type delivery struct {
	msg         jetstream.Msg
	partition   int
	redelivered bool
}

// partitionAckPending is the max_ack_pending of the partition consumers
// a coordinator creates: partitionAckPendingTotal over the partitions, at
// least minPartitionAckPending each. The server delivers no more than
// that to the partition's holder before acknowledgements come back, so a
// burst of any size waits in the stream, and a coordinator holding every
// partition holds at most the total (or partitions ×
// minPartitionAckPending). A partition's iterator pulls up to that many
// at a time (partitionPull).
const (
	partitionAckPendingTotal = 4096
	minPartitionAckPending   = 256
)

func partitionAckPending(partitions int) int {
	return max(partitionAckPendingTotal/max(partitions, 1), minPartitionAckPending)
}

// unboundedPartition is what a partition whose consumer sets no
// max_ack_pending (-1, made by hand) counts for in the bound: the
// coordinator then holds at most that many of its events, and hands the
// rest back.
const unboundedPartition = 20000

// shardFullDelay is when an event handed back (the coordinator holds as
// many as it may, or lost the event's partition) comes again.
const shardFullDelay = 50 * time.Millisecond

func newInflight(ctx context.Context, c *Coordinator, concurrency int) *inflight {
	return &inflight{
		c: c, ctx: ctx,
		shards: newTurns(concurrency),
		size:   concurrency,
		fixed:  c.opts.maxHeld,
		runs:   map[string]*runQueue{},
		bounds: map[laneKey]int{},
	}
}

// setBound records the max_ack_pending of a partition's consumer (k)
// while it is consumed here (n > 0), or forgets it (n == 0).
func (f *inflight) setBound(k laneKey, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		delete(f.bounds, k)
		return
	}
	if n < 0 {
		n = unboundedPartition
	}
	f.bounds[k] = n
}

// bound is how many events the coordinator may hold: what the server may
// have delivered to it unacknowledged, plus one per slot, as a handler
// acknowledges its event before it stops counting it (drain), and the
// server may deliver the next one in between. Called with mu held.
func (f *inflight) bound() int {
	if f.fixed > 0 {
		return f.fixed
	}
	n := f.size
	for _, b := range f.bounds {
		n += b
	}
	return n
}

// push holds an event for its run's handler; false says the coordinator
// holds too many already, and the caller hands the event back.
func (f *inflight) push(run string, d delivery) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held >= f.bound() {
		return false
	}
	f.held++
	q := f.runs[run]
	if q != nil {
		q.pending = append(q.pending, d)
		return true
	}
	q = &runQueue{pending: []delivery{d}}
	f.runs[run] = q
	cl := f.c.classOf(run, d.msg)
	f.wg.Go(func() { f.drain(run, q, cl) })
	return true
}

// drain handles a run's held events in order, in one of the shards
// (given in the turn of its class, cl), until none is left.
func (f *inflight) drain(run string, q *runQueue, cl runClass) {
	if !f.shards.acquire(f.ctx, cl) {
		f.abandon(run)
		return
	}
	defer f.shards.release(cl)
	for {
		f.mu.Lock()
		if len(q.pending) == 0 {
			delete(f.runs, run)
			f.mu.Unlock()
			return
		}
		d := q.pending[0]
		q.pending = q.pending[1:]
		q.current = &d
		f.mu.Unlock()

		switch {
		case f.ctx.Err() != nil:
			// Shutting down: handed back at once, for the next holder.
			_ = d.msg.Nak()
		case !f.c.parts.current(d.partition, f.c.opts.leaseTTL):
			f.c.n.handedBack.Add(1)
			_ = d.msg.NakWithDelay(shardFullDelay)
		default:
			f.c.handle(f.ctx, d.msg, d.redelivered)
		}

		f.mu.Lock()
		q.current = nil
		f.held--
		f.mu.Unlock()
	}
}

// abandon hands a run's held events back when the coordinator stops, for
// the next holder of their partition.
func (f *inflight) abandon(run string) {
	f.mu.Lock()
	q := f.runs[run]
	if q != nil {
		f.held -= len(q.pending)
		delete(f.runs, run)
	}
	f.mu.Unlock()
	if q != nil {
		for _, d := range q.pending {
			_ = d.msg.Nak()
		}
	}
}

// keepAlive sends an in-progress acknowledgement for every held event
// every third of the shortest ack wait of the partition consumers (see
// noteAckWait), until ctx ends.
func (f *inflight) keepAlive(ackWait time.Duration) {
	f.noteAckWait(ackWait)
	tick := time.NewTicker(keepAliveTick)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(last) < time.Duration(f.ackWait.Load())/3 {
			continue
		}
		last = time.Now()
		for _, m := range f.heldMsgs() {
			_ = m.InProgress()
		}
	}
}

// keepAliveTick is how often keepAlive looks whether it is time.
const keepAliveTick = 100 * time.Millisecond

// noteAckWait lowers the ack wait keepAlive works to: a partition consumer
// made before may have a shorter one than this coordinator would give it.
func (f *inflight) noteAckWait(d time.Duration) {
	d = max(d, 3*keepAliveTick)
	for {
		cur := f.ackWait.Load()
		if cur != 0 && cur <= int64(d) || f.ackWait.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// heldMsgs lists the messages held now.
func (f *inflight) heldMsgs() []jetstream.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]jetstream.Msg, 0, f.held)
	for _, q := range f.runs {
		if q.current != nil {
			out = append(out, q.current.msg)
		}
		for _, d := range q.pending {
			out = append(out, d.msg)
		}
	}
	return out
}

// wait waits for every run's handler to return.
func (f *inflight) wait() { f.wg.Wait() }
