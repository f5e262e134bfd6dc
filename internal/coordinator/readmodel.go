package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/readmodel"
)

// The read model of runs (package runs) is kept by the coordinator that
// owns each run: after an event is decided, a run whose status (or what it
// waits on, runs.IndexKey: running and waiting runs) differs from the one
// this entry last indexed has its folded summary put in the bucket
// runs.Bucket. A run folded afresh (a restart, a takeover, a
// redelivery) is indexed again, which repairs a put that was lost. A put
// that fails does not hold up a running run (its next status change, or
// 'weft admin reindex', repairs it); for an ended run, whose last chance
// it is, the event is handled again.

// WithRetention sets how long a run that ended is kept when neither the
// run nor its graph says (default runs.DefaultRetention); the read model
// records it, and the retention sweeper honours it.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// readModel is the lazily opened read-model bucket.
type readModel struct {
	mu sync.Mutex
	m  *readmodel.Model
}

func (c *Coordinator) readModel(ctx context.Context) (*readmodel.Model, error) {
	r := &c.runsModel
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m != nil {
		return r.m, nil
	}
	m, err := readmodel.Ensure(ctx, c.js, c.store.StreamName(), c.log)
	if err != nil {
		return nil, err
	}
	r.m = m
	return m, nil
}

// index puts the run's summary when its status changed since this entry
// last did. first says the entry was made from the run's run-started, so
// the run has no older entry to remove.
func (c *Coordinator) index(ctx context.Context, ent *runEntry, first bool) error {
	s := ent.state
	key := readmodel.IndexKey(s)
	if c.js == nil || key == ent.indexed || s.RunID == "" {
		return nil
	}
	m, err := c.readModel(ctx)
	if err == nil {
		err = m.Put(ctx, readmodel.Summarize(s, c.opts.retention), !first)
	}
	if err != nil {
		if s.Status.Ended() {
			return fmt.Errorf("indexing ended run %s: %w", s.RunID, err)
		}
		c.log.WarnContext(ctx, "indexing a run in the read model", logattr.RunID, s.RunID, logattr.Error, err)
		return nil
	}
	ent.indexed = key
	return nil
}

// restoredRun reports whether the run of a subject was restored from an
// archive: its read-model entry, written by readmodel.Restore before the run's
// messages, says so.
func (c *Coordinator) restoredRun(ctx context.Context, subject string) (bool, error) {
	run, ok := eventlog.RunOf(subject)
	if !ok || c.js == nil {
		return false, nil
	}
	m, err := c.readModel(ctx)
	if err != nil {
		return false, err
	}
	sum, err := m.Get(ctx, run)
	if errors.Is(err, readmodel.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !sum.Restored.IsZero(), nil
}

// prepareReadModel opens (or creates) the read model at start, so that
// listing works before the first run is indexed. A failure is logged
// only: indexing opens it again when it needs it.
func (c *Coordinator) prepareReadModel(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.readModel(tctx); err != nil && ctx.Err() == nil {
		c.log.Warn("opening the read model of runs; it is opened again when a run is indexed", logattr.Error, err)
	}
}
