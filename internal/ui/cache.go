package ui

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Sizes of the cache of runs' logs.
const (
	// cachedRuns is how many runs' logs the server keeps folded, and
	// cachedBytes about how much memory they may take (the events'
	// payloads and the kept states); the log just read is kept whatever
	// its size.
	cachedRuns  = 16
	cachedBytes = 256 << 20
	// markEvery is how often (in events) a cached log keeps the state,
	// so that the state at any position is at most this many events of
	// folding away.
	markEvery = 256
)

// runLog is a run's log as read and folded once: what the run's pages ask
// for again and again (its timeline page by page, the state at each event
// while scrubbing) is served from it. A runLog is never changed once
// built; a longer log is a new one.
type runLog struct {
	// lastSeq is the stream sequence of the last event; 0 for a run read
	// from the archive, which no longer changes.
	lastSeq uint64
	events  []*events.Event
	// folded holds what Apply said of each event: nil when it counted.
	folded []error
	// final is the state after the last event.
	final *projection.State
	// marks[k] is the state (Marshal) after position (k+1)*markEvery.
	marks [][]byte
	// size is about the memory the log takes.
	size int
}

// extend returns the log with tail appended and folded.
func (l *runLog) extend(tail []*events.Event) *runLog {
	n := &runLog{
		lastSeq: l.lastSeq,
		events:  slices.Concat(l.events, tail),
		folded:  slices.Clone(l.folded),
		final:   &projection.State{},
		marks:   slices.Clone(l.marks),
		size:    l.size,
	}
	if l.final != nil {
		n.final = l.final.Clone()
	}
	for _, e := range tail {
		n.folded = append(n.folded, n.final.Apply(e))
		n.size += len(e.Data) + eventOverhead
		if len(n.folded)%markEvery == 0 {
			m := n.final.Marshal()
			n.marks = append(n.marks, m)
			n.size += len(m)
		}
		n.lastSeq = max(n.lastSeq, e.Seq)
	}
	return n
}

// stateAfter returns the state after position pos (0: the empty state),
// folded from the nearest mark.
func (l *runLog) stateAfter(pos int) *projection.State {
	s, from := &projection.State{}, 0
	if k := pos / markEvery; k > 0 {
		if m, err := projection.Unmarshal(l.marks[k-1]); err == nil {
			s, from = m, k*markEvery
		}
	}
	for _, e := range l.events[from:pos] {
		_ = s.Apply(e)
	}
	return s
}

// logCache keeps the logs of the runs read last. Reads of one run that is
// not cached share one read of its log.
type logCache struct {
	store events.Store
	cl    *client.Client

	mu       sync.Mutex
	logs     map[string]*runLog
	order    []string // least recently used first
	inflight map[string]*loading
}

// loading is a read of a run's log under way.
type loading struct {
	done chan struct{}
	log  *runLog
	err  error
}

func newLogCache(store events.Store, cl *client.Client) *logCache {
	return &logCache{store: store, cl: cl, logs: map[string]*runLog{}, inflight: map[string]*loading{}}
}

// get returns a run's log up to date: the cached one when the run has no
// newer event, else the cached one with the events since, else the whole
// log, read once however many requests ask for it at once.
func (c *logCache) get(ctx context.Context, run string) (*runLog, error) {
	last, err := c.store.LastSeq(ctx, run)
	archived := errors.Is(err, events.ErrRunNotFound)
	if err != nil && !archived {
		return nil, err
	}
	c.mu.Lock()
	cached := c.logs[run]
	if cached != nil && (cached.lastSeq == last || archived && cached.lastSeq == 0) {
		c.touch(run)
		c.mu.Unlock()
		return cached, nil
	}
	if l := c.inflight[run]; l != nil {
		c.mu.Unlock()
		select {
		case <-l.done:
			if l.err == nil && l.log.lastSeq >= last {
				return l.log, nil
			}
			return c.get(ctx, run)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := &loading{done: make(chan struct{})}
	c.inflight[run] = l
	c.mu.Unlock()

	l.log, l.err = c.read(ctx, run, cached, archived)
	c.mu.Lock()
	delete(c.inflight, run)
	if l.err == nil {
		c.logs[run] = l.log
		c.touch(run)
	}
	c.mu.Unlock()
	close(l.done)
	return l.log, l.err
}

// read reads a run's log: the tail after cached, or all of it.
func (c *logCache) read(ctx context.Context, run string, cached *runLog, archived bool) (*runLog, error) {
	if cached != nil && !archived && cached.lastSeq > 0 {
		tail, err := c.store.Read(ctx, run, cached.lastSeq+1, 0)
		if err != nil {
			return nil, err
		}
		return cached.extend(tail), nil
	}
	hist, err := c.cl.History(ctx, run)
	if err != nil {
		return nil, err
	}
	l := (&runLog{}).extend(hist)
	if archived {
		l.lastSeq = 0
	}
	return l, nil
}

// eventOverhead is about the memory an event takes beside its payload.
const eventOverhead = 512

// touch marks run as used last and drops the least recently used logs
// beyond cachedRuns or cachedBytes; the caller holds mu.
func (c *logCache) touch(run string) {
	if i := slices.Index(c.order, run); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	c.order = append(c.order, run)
	size := 0
	for _, r := range c.order {
		size += c.logs[r].size
	}
	for len(c.order) > 1 && (len(c.order) > cachedRuns || size > cachedBytes) {
		size -= c.logs[c.order[0]].size
		delete(c.logs, c.order[0])
		c.order = c.order[1:]
	}
}
