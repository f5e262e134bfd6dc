package worker

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/pkg/events"
)

// Causes of a node context's end, besides its timeout.
var (
	errDrainTimeout  = errors.New("worker drain timeout")
	errHeartbeatLost = errors.New("work item heartbeat failed repeatedly")
)

// runCancelled is the cause of a node context's end when its run is
// cancelled; it carries who asked and why.
type runCancelled struct{ by, reason string }

func (e *runCancelled) Error() string { return "run cancelled by " + e.by }

// recentCancels bounds how many cancelled runs a worker remembers, so that
// work of a run already cancelled is not started.
const recentCancels = 4096

// cancelRegistry tracks the nodes in flight per run, and recently cancelled
// runs, and cancels the nodes of a run when a cancel request is seen.
type cancelRegistry struct {
	mu       sync.Mutex
	inflight map[string]map[*context.CancelCauseFunc]struct{}
	recent   map[string]*runCancelled
	order    []string // recent's keys, oldest first
}

func newCancelRegistry() *cancelRegistry {
	return &cancelRegistry{
		inflight: map[string]map[*context.CancelCauseFunc]struct{}{},
		recent:   map[string]*runCancelled{},
	}
}

// track registers a node context's cancel function under its run. It
// returns the cancellation at once if the run was cancelled already, and a
// function that unregisters it.
func (r *cancelRegistry) track(run string, cancel context.CancelCauseFunc) (untrack func(), cancelled *runCancelled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.recent[run]; ok {
		return func() {}, c
	}
	set := r.inflight[run]
	if set == nil {
		set = map[*context.CancelCauseFunc]struct{}{}
		r.inflight[run] = set
	}
	key := &cancel
	set[key] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(set, key)
		if len(r.inflight[run]) == 0 {
			delete(r.inflight, run)
		}
	}, nil
}

// onRequest handles a run-cancel request seen on core NATS. Anything that is
// not a valid request is ignored: the subscription sees raw publishes too.
func (r *cancelRegistry) onRequest(m *nats.Msg) {
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil || ev.Type != events.RunCancelRequested {
		return
	}
	p, _ := ev.Payload()
	req := p.(*events.RunCancelRequestedData)
	r.cancelRun(ev.RunID, &runCancelled{by: req.By, reason: req.Reason})
}

func (r *cancelRegistry) cancelRun(run string, c *runCancelled) {
	r.mu.Lock()
	if _, ok := r.recent[run]; !ok {
		r.recent[run] = c
		r.order = append(r.order, run)
		if len(r.order) > recentCancels {
			delete(r.recent, r.order[0])
			r.order = r.order[1:]
		}
	}
	var cancels []context.CancelCauseFunc
	for f := range r.inflight[run] {
		cancels = append(cancels, *f)
	}
	r.mu.Unlock()
	for _, f := range cancels {
		f(c)
	}
}
