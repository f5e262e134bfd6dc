// Package ledger is what the chaos test and its ledger worker
// (internal/reliability/ledgerworker) share: the rule by which a ledger
// node's attempt fails, and the records it writes.
package ledger

import (
	"hash/fnv"
	"time"
)

// Outcome is what the rule makes an attempt do.
type Outcome int

// The outcomes of Rule.
const (
	Succeed    Outcome = iota
	FailBefore         // fail retryably before the effect
	FailAfter          // write the ledger, then fail retryably
)

// MaxFailingAttempt is the last attempt Rule may fail: later ones succeed.
const MaxFailingAttempt = 2

// Rule says what an attempt with this idempotency key does: of attempts 1
// and 2, two in ten fail before their effect and two in ten after it. It is
// a function of the key, so every delivery of one attempt behaves alike.
func Rule(key string, attempt int) Outcome {
	if attempt > MaxFailingAttempt {
		return Succeed
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	switch h.Sum32() % 10 {
	case 0, 1:
		return FailBefore
	case 2, 3:
		return FailAfter
	}
	return Succeed
}

// Entry is the value written under an attempt's key in the ledger bucket.
type Entry struct {
	Run       string `json:"run"`
	Node      string `json:"node"`
	Iteration int    `json:"iteration"`
	Item      *int   `json:"item,omitempty"`
	Attempt   int    `json:"attempt"`
	Delivery  int    `json:"delivery"`
	Worker    string `json:"worker"`
	// Process tells this process's writes from another's with the same
	// worker name (a restarted worker).
	Process string `json:"process"`
}

// Same reports whether two entries were written by the same delivery in the
// same process.
func (e Entry) Same(o Entry) bool {
	same := e.Run == o.Run && e.Node == o.Node && e.Iteration == o.Iteration && e.Attempt == o.Attempt &&
		e.Delivery == o.Delivery && e.Worker == o.Worker && e.Process == o.Process
	if (e.Item == nil) != (o.Item == nil) {
		return false
	}
	return same && (e.Item == nil || *e.Item == *o.Item)
}

// Write records one attempt to write the ledger: the entry this delivery
// would write, and the result: "created", or "exists" when the key was
// already there from another delivery or process (Prior).
type Write struct {
	Key    string `json:"key"`
	Entry  Entry  `json:"entry"`
	Result string `json:"result"`
	Prior  *Entry `json:"prior,omitempty"`
	// Began is when the delivery began the effect (the worker's clock,
	// before its hold), and Created, for a write that created the key,
	// when the server stored it (the ledger entry's time): the effect's
	// span, for the test's check of concurrency limits. The Go ledger
	// worker sets them; zero when unknown.
	Began   time.Time `json:"began,omitzero"`
	Created time.Time `json:"created,omitzero"`
}

// The defaults of the ledger worker and the test.
const (
	Bucket       = "chaos_ledger"
	WritesStream = "CHAOS_WRITES"
	WritesSubj   = "chaos.writes"
	NodeType     = "ledger"
	Queue        = "ledger"
)
