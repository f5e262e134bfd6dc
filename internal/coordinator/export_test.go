package coordinator

import "time"

// WithAckWait sets the ack wait of the partition consumers the coordinator
// creates (default 10s), for tests that outlast it.
func WithAckWait(d time.Duration) Option { return func(o *options) { o.ackWait = d } }

// DefaultLocalTypes are the types a coordinator runs itself unless told
// otherwise (defaultLocal), sorted.
func DefaultLocalTypes() []string {
	return (&Coordinator{opts: options{local: defaultLocal()}}).localTypes()
}

// WithLocalInlineBudget sets how long one handled event may run local
// nodes inline (localInlineBudget): a budget of 1ns is spent before any
// node starts, as when the handler is descheduled for longer than the
// budget; a long one keeps every local node inline.
func WithLocalInlineBudget(d time.Duration) Option { return func(o *options) { o.localBudget = d } }

// WithMaxHeld bounds the events the coordinator holds (see inflight.go):
// past it, the dispatcher takes the coordinator's own echoes itself
// (ownEchoWhenFull) or hands events back.
func WithMaxHeld(n int) Option { return func(o *options) { o.maxHeld = n } }

// Cached reports whether the coordinator holds run in its cache.
func (c *Coordinator) Cached(run string) bool { return c.cache.peek(run) != nil }
