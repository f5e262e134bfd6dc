package worker

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
)

// endWatch is what the worker heard of runs' ends: the coordinators'
// ended notices (eventlog.EndedNotice, core NATS), heard since the worker
// subscribed. It spares the read of the ended-run check (runEnded): a run
// noticed ended is ended, with no read; and an item stored after the
// watch began (with endWatchMargin for the clocks of the server and this
// host), of a run not noticed ended, is taken for live with no read
// either, as long as no notice was lost meanwhile: none dropped by the
// subscription (a slow consumer), no reconnection of the worker's
// connection (notices published while away are lost), none forgotten
// (the watch keeps the last endNotices runs; an item stored before the
// latest one forgotten was noticed is read). Either restarts the watch
// from now. Under a burst of runs, items wait in their queue longer than
// staleAfter for want of workers, not because their runs ended, and the
// read (a stream-info request per item) held the worker back (issue 30).
//
// A notice is a hint. One that never came (a coordinator older than the
// notices, or one that could not publish) leaves work of a run that
// ended while its item waited to run, as a fresh item's does (the fold
// passes its outcome over).
type endWatch struct {
	sub *nats.Subscription
	nc  *nats.Conn

	mu         sync.Mutex
	since      time.Time // every notice heard since; zero: not watching
	dropped    int
	reconnects uint64
	ended      map[string]time.Time // runs noticed ended, when
	order      []string             // ended's runs, oldest first
	forgotten  time.Time            // when the last run forgotten was noticed
}

// endNotices is how many noticed runs the watch keeps (about 80 bytes
// each): more than a burst's runs end while its items wait.
const endNotices = 16384

// endWatchMargin allows for the server's clock (an item's stored time)
// and this host's (when the watch began) to differ.
const endWatchMargin = time.Second

// watchEnds subscribes to every run's ended notice on nc; nil when it
// cannot (the worker then reads, as before the notices), also when its
// user may not subscribe there (roles generated before the notices).
func watchEnds(nc *nats.Conn) *endWatch {
	w := &endWatch{nc: nc, ended: map[string]time.Time{}}
	sub, err := nc.Subscribe(eventlog.AllEndedNotices, w.heard)
	if err != nil {
		return nil
	}
	// The subscription is in place on the server once a flush returns;
	// a refusal comes before the flush's answer, as the connection's
	// last error.
	err = nc.FlushTimeout(5 * time.Second)
	if last := nc.LastError(); err == nil && errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), eventlog.AllEndedNotices) {
		err = last
	}
	if err != nil {
		_ = sub.Unsubscribe()
		return nil
	}
	w.sub = sub
	w.mu.Lock()
	w.restart()
	w.mu.Unlock()
	return w
}

func (w *endWatch) stop() {
	if w != nil {
		_ = w.sub.Unsubscribe()
	}
}

// heard records a notice.
func (w *endWatch) heard(m *nats.Msg) {
	run, ok := eventlog.RunOfEndedNotice(m.Subject)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.ended[run]; seen {
		return
	}
	now := time.Now()
	w.ended[run] = now
	w.order = append(w.order, run)
	if len(w.order) > endNotices {
		old := w.order[0]
		w.order = w.order[1:]
		w.forgotten = w.ended[old]
		delete(w.ended, old)
	}
}

// restart begins the watch again from now. Called with mu held.
func (w *endWatch) restart() {
	w.since = time.Now()
	w.dropped, _ = w.sub.Dropped()
	w.reconnects = w.nc.Stats().Reconnects
}

// knows reports whether run was noticed ended, and else whether the
// watch vouches that it had not ended when last heard of: every notice
// since its item was stored (at stored) was heard.
func (w *endWatch) knows(run string, stored time.Time) (ended, vouched bool) {
	if w == nil {
		return false, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.ended[run]; ok {
		return true, false
	}
	dropped, _ := w.sub.Dropped()
	if dropped != w.dropped || w.nc.Stats().Reconnects != w.reconnects || !w.nc.IsConnected() {
		w.restart()
		return false, false
	}
	after := stored.Add(-endWatchMargin)
	return false, after.After(w.since) && after.After(w.forgotten)
}
