package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// A simulated worker does what pkg/worker does with a work item, one step
// at a time so that other processes interleave: append node-invoking, run
// the node (its effect, recorded with the item's idempotency key), append
// the outcome, acknowledge. Items are delivered at least once: a worker
// that dies, stalls past the ack wait or loses its ack lets the item go to
// another worker, and two workers may run one attempt.

// simWorker is one worker process.
type simWorker struct {
	name  string
	store *procStore
	items []*workItem
}

// The phases of a work item.
const (
	phaseInvoking = iota
	phaseRunning
	phaseOutcome
	phaseAck
)

type workItem struct {
	q       *consumer
	d       delivery
	ready   *events.NodeReadyData
	run     string
	phase   int
	at      time.Time // when the next phase may run
	outcome *events.Event
	tries   int
}

// effect is one execution of a node's side effect.
type effect struct {
	key      string // the work item's idempotency key
	run      string
	ref      string // activation key
	attempt  int
	delivery int
	worker   string
	ok       bool
	outcome  string // the id of the outcome event the worker wrote for it
	at       time.Time
}

func (s *Sim) newWorker() *simWorker {
	s.gen++
	w := &simWorker{name: fmt.Sprintf("w%d", s.gen)}
	w.store = &procStore{sim: s, name: w.name, kind: kindWorker}
	s.note("worker %s starts", w.name)
	return w
}

// pull takes the next work item of a queue.
func (s *Sim) pull(w *simWorker) {
	var ready []*consumer
	for _, q := range s.queueList {
		if c := s.queues[q]; c.ready() {
			ready = append(ready, c)
		}
	}
	if len(ready) == 0 {
		return
	}
	q := ready[s.rng.IntN(len(ready))]
	d, _ := q.next()
	e, err := events.Decode(d.msg.subject, d.msg.header, d.msg.data)
	if err != nil {
		q.term(d.msg.seq)
		return
	}
	p, _ := e.Payload()
	r := p.(*events.NodeReadyData)
	w.items = append(w.items, &workItem{q: q, d: d, ready: r, run: e.RunID, at: s.clock.now})
	s.note("%s pulls %s attempt %d of %s (delivery %d)", w.name, r.Key(), r.Attempt, e.RunID, d.count)
}

// work runs the next phase of an item.
func (s *Sim) work(w *simWorker, it *workItem) {
	switch it.phase {
	case phaseInvoking:
		s.invoking(w, it)
	case phaseRunning:
		s.execute(w, it)
	case phaseOutcome:
		s.appendOutcome(w, it)
	case phaseAck:
		s.ack(w, it)
	}
}

// invoking appends the item's node-invoking, then stalls or heartbeats.
func (s *Sim) invoking(w *simWorker, it *workItem) {
	ctx := context.Background()
	r := it.ready
	e, err := events.New(it.run, outcomeID(it, events.NodeInvoking), s.clock.now, &events.NodeInvokingData{
		NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.d.count, Worker: w.name,
	})
	if err != nil {
		panic(err)
	}
	e.Queue = r.Queue
	if _, err := w.store.Append(ctx, it.run, events.AnySeq, e); err != nil {
		it.q.nak(it.d.msg.seq, time.Second)
		w.drop(it)
		return
	}
	it.phase = phaseRunning
	if s.chance(StallWorker, 0.15) {
		// No heartbeat: the item comes again to someone else.
		it.at = s.clock.now.Add(workAckWait + time.Duration(1000+s.rng.IntN(20000))*time.Millisecond)
		s.note("%s stalls on %s attempt %d of %s", w.name, r.Key(), r.Attempt, it.run)
	} else {
		it.at = s.clock.now.Add(time.Duration(50+s.rng.IntN(2000)) * time.Millisecond)
		it.q.extend(it.d.msg.seq, it.at.Add(workAckWait)) // heartbeats
	}
}

// execute draws the node's outcome by its behaviour and records the
// effect.
func (s *Sim) execute(w *simWorker, it *workItem) {
	r := it.ready
	b := behaviourOf(r.Config)
	eff := effect{key: r.IdempotencyKey, run: it.run, ref: r.Key(), attempt: r.Attempt, delivery: it.d.count, worker: w.name, at: s.clock.now}
	var p events.Payload
	switch x := s.rng.Float64(); {
	case x < b.Fatal:
		p = &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.d.count, Worker: w.name,
			Error: events.Failure{Type: "Fatal", Message: "simulated fatal failure"}}
	case x < b.Fatal+b.Fail:
		p = &events.NodeFailedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.d.count, Worker: w.name,
			Error: events.Failure{Type: "Flaky", Message: "simulated failure", Retryable: true}}
	default:
		eff.ok = true
		out, _ := json.Marshal(map[string]any{"node": r.Node, "attempt": r.Attempt})
		p = &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.d.count, Worker: w.name, Output: out,
			Updates: map[string]json.RawMessage{"log": json.RawMessage(strconv.Quote(r.Key())), "total": json.RawMessage("1")}}
	}
	e, err := events.New(it.run, outcomeID(it, p.EventType()), s.clock.now, p)
	if err != nil {
		panic(err)
	}
	e.Queue = r.Queue
	eff.outcome = e.ID
	s.effects = append(s.effects, eff)
	it.outcome = e
	it.phase = phaseOutcome
}

// appendOutcome appends the outcome, retried, then naked.
func (s *Sim) appendOutcome(w *simWorker, it *workItem) {
	ctx := context.Background()
	r := it.ready
	if _, err := w.store.Append(ctx, it.run, events.AnySeq, it.outcome); err != nil {
		it.tries++
		if it.tries >= 3 {
			it.q.nak(it.d.msg.seq, time.Second)
			w.drop(it)
			return
		}
		it.at = s.clock.now.Add(200 * time.Millisecond)
		return
	}
	s.note("%s: %s of %s attempt %d of %s", w.name, short(it.outcome.Type), r.Key(), r.Attempt, it.run)
	it.phase = phaseAck
}

// ack acks the item, unless the ack is lost.
func (s *Sim) ack(w *simWorker, it *workItem) {
	r := it.ready
	if s.chance(Redeliver, 0.1) {
		s.note("%s: ack of %s attempt %d of %s lost", w.name, r.Key(), r.Attempt, it.run)
	} else {
		it.q.ack(it.d.msg.seq)
	}
	w.drop(it)
}

func (w *simWorker) drop(it *workItem) {
	for i, x := range w.items {
		if x == it {
			w.items = append(w.items[:i:i], w.items[i+1:]...)
			return
		}
	}
}

// crashWorker kills a worker with what it holds; a new one takes its place.
func (s *Sim) crashWorker() {
	i := s.rng.IntN(len(s.workers))
	s.note("crash %s holding %d item(s)", s.workers[i].name, len(s.workers[i].items))
	s.workers[i] = s.newWorker()
}

// outcomeID is pkg/worker's id of an outcome of one delivery of a work
// item.
func outcomeID(it *workItem, t events.Type) string {
	r := it.ready
	return eventlog.DecisionID(it.run, t, r.Key(), strconv.Itoa(r.Attempt), strconv.Itoa(it.d.count))
}
