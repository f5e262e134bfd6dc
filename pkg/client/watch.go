package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/weft-dev/weft/internal/eventlog"
)

// Waiting for a run's events without a consumer. Wait and Follow read
// only with gets (direct gets, and the stream leader's where a replica
// may be behind); they learn that there is something new to read from a
// core NATS subscription on the run's subjects, which a client's role may
// hold for runs' subjects (deploy/SECURITY.md). A consumer would need the
// right to create consumers, and a consumer's name, filter and deliver
// subject cannot all be scoped by permissions.
//
// A core subscription hears a message as it is published, before the
// stream has stored it (and also when the stream refuses it: a duplicate,
// a conflicting decision), and says nothing of its stream sequence. So it
// is only a wake-up: what was heard is read from the stream, by sequence
// from the last one read. An event heard of and not found by the read is
// looked for again, backing off, for storeGrace (an event still not
// stored by then was refused by the stream; its writer appends again,
// which is heard). While the connection was down nothing was heard, so
// a reconnect is a wake-up too. Core NATS delivers at most once: in a
// cluster, a publish on another server in the moment before it learns of
// the subscription is not forwarded, and a server drops messages for a
// connection that falls behind. So while nothing is heard, the run is
// read again now and then, from a second after the subscription to every
// 30 seconds (idleFirst, idleMax): a lost wake-up delays an event, never
// loses it.

// storeGrace is how long an event heard of is looked for in the stream.
const storeGrace = 5 * time.Second

// Backing off between reads of an event heard of and not found yet.
const (
	firstRetry = 2 * time.Millisecond
	maxRetry   = 500 * time.Millisecond
)

// Re-reading while nothing is heard (see above).
const (
	idleFirst = time.Second
	idleMax   = 30 * time.Second
)

// maxHeard bounds the ids of events heard of and not read yet that a watch
// remembers; past it, an event is still a wake-up but not looked for again.
const maxHeard = 4096

// watch is a core subscription on some subjects of a run, used as a
// wake-up (see above).
type watch struct {
	nc     *nats.Conn
	subs   []*nats.Subscription
	status chan nats.Status
	wake   chan struct{} // one slot: wake-ups coalesce

	mu    sync.Mutex
	heard map[string]time.Time // ids of events heard of, not yet read

	backoff time.Duration
	idle    time.Duration // the next re-read while nothing is heard
}

// watch subscribes to subjects. The subscriptions are in place on the
// server when it returns, so anything published from then on is heard.
func (c *Client) watch(ctx context.Context, subjects ...string) (*watch, error) {
	if err := c.inNamespace(ctx); err != nil {
		return nil, err
	}
	nc := eventlog.JetStream(c.store).Conn()
	w := &watch{
		nc:      nc,
		wake:    make(chan struct{}, 1),
		heard:   map[string]time.Time{},
		backoff: firstRetry,
		idle:    idleFirst,
	}
	w.status = nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	for _, s := range subjects {
		sub, err := nc.Subscribe(s, w.hear)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("subscribing to %s: %w", s, err)
		}
		w.subs = append(w.subs, sub)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		w.stop()
		return nil, fmt.Errorf("subscribing to %s: %w", strings.Join(subjects, ", "), err)
	}
	// The server answers a subscription it refuses with an error before
	// the flush's pong: a role without the right would otherwise wait
	// forever, hearing nothing.
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		for _, s := range subjects {
			if strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				w.stop()
				return nil, fmt.Errorf("subscribing to %s: %w", s, err)
			}
		}
	}
	return w, nil
}

// hear is the subscriptions' handler: it notes the event's id and wakes
// the reader.
func (w *watch) hear(m *nats.Msg) {
	if id := m.Header.Get("ce-id"); id != "" {
		w.mu.Lock()
		if len(w.heard) < maxHeard {
			if _, ok := w.heard[id]; !ok {
				w.heard[id] = time.Now()
			}
		}
		w.mu.Unlock()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// settle forgets the events heard of that were read (read reports it of
// an id) or were heard of longer than storeGrace ago, and says how long to
// wait before reading again for those left: 0 when none are.
func (w *watch) settle(read func(id string) bool) time.Duration {
	now := time.Now()
	w.mu.Lock()
	for id, at := range w.heard {
		if read(id) || now.Sub(at) > storeGrace {
			delete(w.heard, id)
		}
	}
	left := len(w.heard)
	w.mu.Unlock()
	if left == 0 {
		w.backoff = firstRetry
		return 0
	}
	d := w.backoff
	w.backoff = min(2*w.backoff, maxRetry)
	return d
}

// retryLater says to read again after a read failed, backing off.
func (w *watch) retryLater() time.Duration {
	d := w.backoff
	w.backoff = min(2*w.backoff, maxRetry)
	return d
}

// wait returns when there may be something new to read: a message was
// heard, the connection came back, retry (when not 0) has passed, or,
// without retry, the time to re-read while nothing is heard. It fails when
// ctx ends or the connection is closed.
func (w *watch) wait(ctx context.Context, retry time.Duration) error {
	d := retry
	if d == 0 {
		d = w.idle
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
	case <-t.C:
		if retry == 0 {
			w.idle = min(2*w.idle, idleMax)
		}
	case s := <-w.status:
		if s == nats.CLOSED {
			return nats.ErrConnectionClosed
		}
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// stop ends the subscriptions.
func (w *watch) stop() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.nc.RemoveStatusListener(w.status)
}
