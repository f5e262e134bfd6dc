package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// HeartbeatEventInterval is the least time between two Heartbeat events of
// one attempt (one delivery of its work item), or the node's heartbeat
// interval (graph field heartbeat) when that is shorter: once a node has
// sent a Heartbeat event, the coordinator fails its attempt as timed out
// when projection.HeartbeatMisses intervals pass without another. Heartbeat calls in between
// still extend the work item's ack deadline; their details are not
// recorded, so that a node that reports progress in a tight loop does not
// flood its run's log.
const HeartbeatEventInterval = 10 * time.Second

// ErrNoWorkItem is returned by Heartbeat when its context is not a running
// node's.
var ErrNoWorkItem = errors.New("worker: the context is not a running node's")

// progressKey is the context key of a running node's progress.
type progressKey struct{}

// progress is what Heartbeat needs of a running node.
type progress struct {
	w  *Worker
	it *item

	mu    sync.Mutex
	last  time.Time // of the last Heartbeat event; zero: none yet
	count int
	now   func() time.Time

	// awaited is set once the node recorded a step that awaits
	// (RecordAwait): its ErrAwait then ends the attempt with no outcome.
	awaited atomic.Bool
}

func withProgress(ctx context.Context, w *Worker, it *item) context.Context {
	now := w.now
	if now == nil {
		now = time.Now
	}
	return context.WithValue(ctx, progressKey{}, &progress{w: w, it: it, now: now})
}

// Heartbeat reports a running node's progress: call it from a node's
// Execute (or any step of it) with the context it was given. It marks the
// work item in progress, which extends its ack deadline as the worker's own
// heartbeat does, and appends a Heartbeat event to the run's log with the
// details (any JSON value; nil for none), so that the progress is seen in
// the run's timeline: at most one event per HeartbeatEventInterval per
// attempt, the first call's at once. It returns ErrNoWorkItem outside a
// node, and the error of marking the item or of the append (for example
// details too large for an event).
func Heartbeat(ctx context.Context, details any) error {
	p, ok := ctx.Value(progressKey{}).(*progress)
	if !ok {
		return ErrNoWorkItem
	}
	if err := p.it.msg.InProgress(); err != nil {
		return fmt.Errorf("worker: marking the work item in progress: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	interval := HeartbeatEventInterval
	if hb := time.Duration(p.it.ready.HeartbeatMs) * time.Millisecond; hb > 0 && hb < interval {
		interval = hb
	}
	if !p.last.IsZero() && now.Sub(p.last) < interval {
		return nil
	}
	var raw json.RawMessage
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return fmt.Errorf("worker: heartbeat details do not encode as JSON: %w", err)
		}
		raw = b
	}
	r := p.it.ready
	p.count++
	id := eventlog.DecisionID(p.it.run, events.Heartbeat, r.Key(), strconv.Itoa(r.Attempt), strconv.Itoa(p.it.delivery), strconv.Itoa(p.count))
	ev, err := events.New(p.it.run, id, time.Time{}, &events.HeartbeatData{NodeRef: r.NodeRef, Attempt: r.Attempt, Details: raw})
	if err != nil {
		return err
	}
	ev.Queue = r.Queue
	actx := context.WithoutCancel(ctx)
	telemetry.Inject(actx, ev)
	if _, err := p.w.store.Append(actx, p.it.run, events.AnySeq, ev); err != nil {
		p.count--
		return fmt.Errorf("worker: recording a heartbeat: %w", err)
	}
	p.last = now
	return nil
}
