package worker

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Work items refer to what the run's start holds. A node-ready event
// carries the node's type, policy and input (the state view), not the
// node's config and JSON schemas (in the graph) or the run's invocation
// state: those are in the run's run-started event, which a worker reads
// once per run with a direct get of the last message on
// eventlog.StartedSubject(run), or for a child run (started by the
// coordinator) eventlog.ChildStartedSubject(run) (eventlog.LastOn: the
// subject is in the request subject, so the worker's role is granted this
// read for runs' starts only; on a replicated stream a miss is asked
// again for about a second,
// since a replica that is behind may answer) and keeps in a small LRU: the
// starts of the last runStartCache runs, and the node specs of the last
// graphCache graphs by digest, so that runs of one graph share them. A work
// item that carries config, schemas or invocation state itself (written by
// an older coordinator) is used as it is, with no read.
//
// The starts cache must hold the runs in flight: work items come in queue
// order, which cycles through them, so an LRU smaller than that misses on
// every item (1024 did for 2,000 runs at once in weftbench's throughput
// figure: a read and a decode of the run's start per node). A cached start
// is its invocation state and a pointer to its graph's shared node specs.
const (
	runStartCache = 16384
	graphCache    = 256
	endedCache    = 4096
)

// staleAfter is how long a work item may have waited in its queue (from
// when it was stored to when it is delivered) before the worker checks
// that its run has not ended: the check costs a request to the stream
// leader (the run's decision subjects' message counts, eventlog.HasEnd: the
// worker's role may count runs' ends, not read them), so fresh first
// deliveries, the hot path, skip it. Redeliveries are always checked.
const staleAfter = 2 * time.Second

// nodeSpec is what a worker needs of a node's definition.
type nodeSpec struct {
	Config       json.RawMessage `json:"config,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// runStart is what a worker needs of a run's start.
type runStart struct {
	invocation json.RawMessage
	nodes      map[string]nodeSpec
}

// FailureRunNotFound is the failure of a work item whose run's start is
// not in the stream, so that its node's config cannot be known.
const FailureRunNotFound = "RunNotFound"

// errStartNotFound means a run's run-started event is not in the stream.
var errStartNotFound = errors.New("the run's run-started event is not in the stream")

// FailureRunStartMismatch is the failure of a work item that names the
// stream sequence of its run's start (events.NodeReadyData.StartSeq) when
// the start the worker can read (the last message on the run's start
// subjects) is another message: a second run-started written on the run's
// client subject after the first, which the fold refuses and whose config
// must not be run for the run's work (deploy/SECURITY.md, gap 12). The
// worker's role reads a subject's last message only, so the run's own
// start cannot be had: the attempt fails, not retryable.
const FailureRunStartMismatch = "RunStartMismatch"

// errStartMismatch means the start the worker read is not the one the
// work item names.
var errStartMismatch = errors.New("the run's start the worker can read is not the one its work item names")

// runReader reads and caches runs' starts and ends.
type runReader struct {
	store events.Store // read lazily: the worker may not need it

	endReads atomic.Int64 // hasEnded's reads of the log

	mu      sync.Mutex
	starts  *lru[*runStart]
	graphs  *lru[map[string]nodeSpec]
	ended   *lru[bool]
	loading map[string]*loadCall
}

type loadCall struct {
	done  chan struct{}
	start *runStart
	err   error
}

func newRunReader(store events.Store) *runReader {
	return &runReader{
		store:   store,
		starts:  newLRU[*runStart](runStartCache),
		graphs:  newLRU[map[string]nodeSpec](graphCache),
		ended:   newLRU[bool](endedCache),
		loading: map[string]*loadCall{},
	}
}

// start returns a run's start, reading it once for all the items of the
// run that ask at the same time. want is the stream sequence the items
// name for it (0: any, the last).
func (r *runReader) start(ctx context.Context, run string, want uint64) (*runStart, error) {
	key := run
	if want != 0 {
		key = run + "@" + strconv.FormatUint(want, 10)
	}
	r.mu.Lock()
	if s, ok := r.starts.get(key); ok {
		r.mu.Unlock()
		return s, nil
	}
	if c, ok := r.loading[key]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.start, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &loadCall{done: make(chan struct{})}
	r.loading[key] = c
	r.mu.Unlock()

	c.start, c.err = r.readStart(ctx, run, want)
	r.mu.Lock()
	delete(r.loading, key)
	if c.err == nil {
		r.starts.add(key, c.start)
	}
	r.mu.Unlock()
	close(c.done)
	return c.start, c.err
}

// lastStart reads the run's start: the last message on its client's start
// subject (most runs), then, when there is none there or it is not a
// start the engine accepts (a client's start claiming a parent, which
// anyone may write on a child run's client subject), on the
// coordinator's (a child run's). found is false when neither subject has
// a message; err then says why the one found was refused, if one was.
// With want set (the stream sequence the work item names), a message at
// another sequence is passed over as not the run's start; when no subject
// has it, err wraps errStartMismatch.
func (r *runReader) lastStart(ctx context.Context, run string, want uint64) (ev *events.Event, found bool, err error) {
	var refused, mismatch error
	for _, subject := range eventlog.StartedSubjects(run) {
		m, err := eventlog.LastOn(ctx, r.store, subject)
		if err != nil {
			return nil, false, fmt.Errorf("reading the start of run %s: %w", run, err)
		}
		if m == nil {
			continue
		}
		if want != 0 && m.Sequence != want {
			if mismatch == nil {
				mismatch = fmt.Errorf("run %s: %w: the item names the start at sequence %d, the last message on %s is at %d (a second run-started?)", run, errStartMismatch, want, subject, m.Sequence)
			}
			continue
		}
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if err == nil && ev.Type != events.RunStarted {
			err = fmt.Errorf("%w: a %s event", events.ErrMisplaced, ev.Type)
		}
		if err == nil {
			return ev, true, nil
		}
		if refused == nil {
			refused = err
		}
	}
	if refused != nil {
		return nil, true, fmt.Errorf("run %s: its start: %w", run, refused)
	}
	if mismatch != nil {
		return nil, false, mismatch
	}
	return nil, false, nil
}

func (r *runReader) readStart(ctx context.Context, run string, want uint64) (*runStart, error) {
	ev, found, err := r.lastStart(ctx, run, want)
	// On a replicated stream, the replica that answered may be behind
	// (the worker's role may not ask the leader, whose get reads any
	// message): ask again a few times before the start counts as missing
	// (or as another message than the item names).
	for try := 1; (err == nil && !found || errors.Is(err, errStartMismatch)) && try < startTries && eventlog.Replicas(r.store) > 1; try++ {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(time.Duration(try) * startRetry):
			ev, found, err = r.lastStart(ctx, run, want)
		}
	}
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("run %s: %w", run, errStartNotFound)
	}
	p, _ := ev.Payload()
	started := p.(*events.RunStartedData)
	s := &runStart{invocation: started.Invocation}
	r.mu.Lock()
	nodes, ok := r.graphs.get(started.GraphDigest)
	r.mu.Unlock()
	if !ok || started.GraphDigest == "" {
		var def struct {
			Nodes []struct {
				ID string `json:"id"`
				nodeSpec
			} `json:"nodes"`
		}
		if err := json.Unmarshal(started.Graph, &def); err != nil {
			return nil, fmt.Errorf("run %s: its graph: %w: %v", run, events.ErrMalformedEvent, err)
		}
		nodes = make(map[string]nodeSpec, len(def.Nodes))
		for _, n := range def.Nodes {
			nodes[n.ID] = n.nodeSpec
		}
		if started.GraphDigest != "" {
			r.mu.Lock()
			r.graphs.add(started.GraphDigest, nodes)
			r.mu.Unlock()
		}
	}
	s.nodes = nodes
	return s, nil
}

// hasEnded reports whether a run's log holds an ending decision (completed,
// failed or cancelled). A run once seen ended is remembered. A read that
// fails counts as not ended: the check only spares work, the coordinator
// ignores outcomes of ended runs anyway.
func (r *runReader) hasEnded(ctx context.Context, run string) (bool, error) {
	r.mu.Lock()
	_, ended := r.ended.get(run)
	r.mu.Unlock()
	if ended {
		return true, nil
	}
	r.endReads.Add(1)
	ended, err := eventlog.HasEnd(ctx, r.store, run)
	if err != nil {
		return false, err
	}
	if ended {
		r.mu.Lock()
		r.ended.add(run, true)
		r.mu.Unlock()
	}
	return ended, nil
}

// knownEnded reports whether the run was seen ended, without a read.
func (r *runReader) knownEnded(run string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ended.get(run)
	return ok
}

// startTries and startRetry bound how long a missing run start is asked
// for again on a replicated stream: about a second in all.
const (
	startTries = 8
	startRetry = 40 * time.Millisecond
)

// selfContained reports whether a work item carries what older
// coordinators copied into it (config, schemas, invocation state): it is
// then used as it is.
func selfContained(r *events.NodeReadyData) bool {
	return len(r.Config) > 0 || len(r.InputSchema) > 0 || len(r.OutputSchema) > 0 || len(r.Invocation) > 0
}

// resolve fills in a work item what it refers to: the node's config and
// schemas, and the run's invocation state, from the run's start. A node
// the run's graph does not have is a non-retryable failure.
func (r *runReader) resolve(ctx context.Context, run string, ready *events.NodeReadyData) (*events.NodeReadyData, error) {
	if selfContained(ready) {
		return ready, nil
	}
	s, err := r.start(ctx, run, ready.StartSeq)
	if errors.Is(err, errStartMismatch) {
		// A second run-started on the run's start subject hides the
		// run's own from the worker: its config is never run for the
		// run's work.
		return nil, NonRetryable(FailureRunStartMismatch, fmt.Sprintf("node %q: %v", ready.Node, err))
	}
	if errors.Is(err, errStartNotFound) {
		// Read from the stream leader: the run's log is gone (purged) or
		// was never written; the work cannot be done as the graph says.
		return nil, NonRetryable(FailureRunNotFound, fmt.Sprintf("node %q: %v", ready.Node, err))
	}
	var digestErr *events.GraphDigestError
	if errors.As(err, &digestErr) {
		// The run's start names another graph's digest than its own: its
		// config is not believed, and reading it again will not change it.
		return nil, NonRetryable(events.FailureInvalidGraph, fmt.Sprintf("node %q: %v", ready.Node, err))
	}
	if err != nil {
		return nil, err
	}
	spec, ok := s.nodes[ready.Node]
	if !ok {
		return nil, NonRetryable(events.FailureInvalidGraph, fmt.Sprintf("the graph of run %s has no node %q", run, ready.Node))
	}
	full := *ready
	full.Config, full.InputSchema, full.OutputSchema = spec.Config, spec.InputSchema, spec.OutputSchema
	full.Invocation = s.invocation
	return &full, nil
}

// lru is a least-recently-used map of bounded size. Not safe for
// concurrent use: runReader holds its lock around it.
type lru[V any] struct {
	max   int
	order *list.List // of *lruEntry[V], most recent first
	items map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) add(key string, val V) {
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry[V]).val = val
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, val: val})
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry[V]).key)
	}
}
