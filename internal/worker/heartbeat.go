package worker

import (
	"context"
	"sync"
	"time"
)

// maxHeartbeatFailures is how many in-progress acknowledgements in a row may
// fail before the node is given up (its item will be redelivered).
const maxHeartbeatFailures = 3

// heartbeat marks a running node's work item in progress on a timer, so
// that JetStream does not redeliver it, and cancels the node when that keeps
// failing. It uses a timer, not a goroutine, per node.
type heartbeat struct {
	mu      sync.Mutex
	timer   *time.Timer
	every   time.Duration
	beat    func() error
	cancel  context.CancelCauseFunc
	fails   int
	stopped bool
}

func startHeartbeat(every time.Duration, beat func() error, cancel context.CancelCauseFunc) *heartbeat {
	h := &heartbeat{every: every, beat: beat, cancel: cancel}
	h.mu.Lock()
	h.timer = time.AfterFunc(every, h.tick)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) tick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	if err := h.beat(); err != nil {
		h.fails++
		if h.fails >= maxHeartbeatFailures {
			h.cancel(errHeartbeatLost)
			return
		}
	} else {
		h.fails = 0
	}
	h.timer.Reset(h.every)
}

func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
}
