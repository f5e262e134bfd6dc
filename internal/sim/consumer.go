package sim

import (
	"time"
)

// A consumer is a model of a JetStream durable pull consumer with explicit
// acks: messages matching its filter are delivered in stream order, each
// delivery is pending until it is acknowledged or terminated, and a pending
// message is delivered again (its consumer sequence kept, its delivery
// count raised) once its ack wait passes or a nak's delay ends. Every
// process that pulls from one consumer gets a part of its messages.

// delivery is one delivery of a message.
type delivery struct {
	msg   *message
	dseq  uint64 // the consumer sequence, kept across redeliveries
	count int    // NumDelivered
	cons  *consumer
}

// pending is a delivered message not yet acknowledged.
type pending struct {
	msg   *message
	dseq  uint64
	count int
	due   time.Time // delivered again at this time
}

type consumer struct {
	name    string
	clock   *clock
	ackWait time.Duration
	queue   []*message // matching messages not yet delivered, in order
	pending map[uint64]*pending
	nextD   uint64
}

func newConsumer(name string, c *clock, ackWait time.Duration) *consumer {
	return &consumer{name: name, clock: c, ackWait: ackWait, pending: map[uint64]*pending{}}
}

func (c *consumer) add(m *message) { c.queue = append(c.queue, m) }

// redeliverable returns the pending message due first, if one is due.
func (c *consumer) redeliverable() *pending {
	var best *pending
	for _, p := range c.pending {
		if p.due.After(c.clock.now) {
			continue
		}
		if best == nil || p.msg.seq < best.msg.seq {
			best = p
		}
	}
	return best
}

// ready reports whether a delivery can be made now.
func (c *consumer) ready() bool { return len(c.queue) > 0 || c.redeliverable() != nil }

// next delivers a due redelivery first, else the next new message.
func (c *consumer) next() (delivery, bool) {
	if p := c.redeliverable(); p != nil {
		p.count++
		p.due = c.clock.now.Add(c.ackWait)
		return delivery{msg: p.msg, dseq: p.dseq, count: p.count, cons: c}, true
	}
	if len(c.queue) == 0 {
		return delivery{}, false
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	c.nextD++
	c.pending[m.seq] = &pending{msg: m, dseq: c.nextD, count: 1, due: c.clock.now.Add(c.ackWait)}
	return delivery{msg: m, dseq: c.nextD, count: 1, cons: c}, true
}

// ack acknowledges a message (any delivery of it).
func (c *consumer) ack(seq uint64) { delete(c.pending, seq) }

// term stops redelivery of a message.
func (c *consumer) term(seq uint64) { delete(c.pending, seq) }

// nak asks for the message again after delay.
func (c *consumer) nak(seq uint64, delay time.Duration) {
	if p := c.pending[seq]; p != nil {
		p.due = c.clock.now.Add(delay)
	}
}

// extend is an in-progress acknowledgement: the ack wait starts again,
// from until.
func (c *consumer) extend(seq uint64, until time.Time) {
	if p := c.pending[seq]; p != nil && p.due.Before(until) {
		p.due = until
	}
}

// nextDue is the earliest time a pending message comes again.
func (c *consumer) nextDue() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, p := range c.pending {
		if !ok || p.due.Before(t) {
			t, ok = p.due, true
		}
	}
	return t, ok
}

// idle reports whether nothing is left to deliver or acknowledge.
func (c *consumer) idle() bool { return len(c.queue) == 0 && len(c.pending) == 0 }
