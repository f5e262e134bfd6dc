package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// chainGraph is START → n000 → … → END of noop nodes.
func chainGraph(name, typ string, nodes int, config any) (*graph.Graph, error) {
	b := graph.New(name)
	prev := graph.Start
	for i := range nodes {
		id := nodeID(i)
		var opts []graph.NodeOption
		if config != nil {
			opts = append(opts, graph.Config(config))
		}
		b.Node(id, typ, opts...)
		b.Edge(prev, id)
		prev = id
	}
	b.Edge(prev, graph.End)
	return b.Build()
}

func nodeID(i int) string { return fmt.Sprintf("n%03d", i) }

// startedEvent is a run-started event of g.
func startedEvent(run string, g *graph.Graph, input json.RawMessage) (*events.Event, error) {
	return events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), Input: input, StartedBy: "weftbench",
	})
}

// startRuns appends n run-started events of g as fast as the server takes
// them (asynchronous publishes, a thousand in flight), and returns the run
// ids.
func startRuns(ctx context.Context, js jetstream.JetStream, g *graph.Graph, n int) ([]string, error) {
	runs := make([]string, 0, n)
	msgs := make([]*nats.Msg, 0, n)
	for i := range n {
		run := events.NewRunID()
		e, err := startedEvent(run, g, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		if err != nil {
			return nil, err
		}
		m, err := eventlog.Encode(e)
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		msgs = append(msgs, m)
	}
	if err := publishAll(ctx, js, msgs); err != nil {
		return nil, fmt.Errorf("starting runs: %w", err)
	}
	return runs, nil
}

// component is an in-process coordinator or worker on a connection of its
// own.
type component struct {
	cancel context.CancelFunc
	done   chan struct{}
	nc     *nats.Conn
	coord  *coordinator.Coordinator
	worker *worker.Worker
}

func (c *component) stop() {
	if c == nil {
		return
	}
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(45 * time.Second):
	}
	c.nc.Close()
}

// startCoordinator runs a coordinator on stream until stopped.
func (e *env) startCoordinator(ctx context.Context, stream string, opts ...coordinator.Option) (*component, error) {
	nc, js, err := e.connect("coordinator")
	if err != nil {
		return nil, err
	}
	st, err := e.openStore(ctx, js, stream)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := coordinator.New(st, append([]coordinator.Option{coordinator.WithLogger(e.quiet)}, opts...)...)
	ctx, cancel := context.WithCancel(ctx)
	comp := &component{cancel: cancel, done: make(chan struct{}), nc: nc, coord: c}
	go func() {
		defer close(comp.done)
		if err := c.Run(ctx); err != nil {
			e.logf("coordinator: %v", err)
		}
	}()
	return comp, nil
}

// startWorker runs a worker with the built-in executors until stopped.
func (e *env) startWorker(ctx context.Context, stream string, concurrency int, opts ...builtin.Option) (*component, error) {
	nc, js, err := e.connect("worker")
	if err != nil {
		return nil, err
	}
	st, err := e.openStore(ctx, js, stream)
	if err != nil {
		nc.Close()
		return nil, err
	}
	w, err := worker.New(st, worker.WithName("bench"), worker.WithConcurrency(concurrency), worker.WithLogger(e.quiet), worker.WithDrainTimeout(5*time.Second))
	if err != nil {
		nc.Close()
		return nil, err
	}
	builtin.Register(w, opts...)
	ctx, cancel := context.WithCancel(ctx)
	comp := &component{cancel: cancel, done: make(chan struct{}), nc: nc, worker: w}
	go func() {
		defer close(comp.done)
		if err := w.Run(ctx); err != nil {
			e.logf("worker: %v", err)
		}
	}()
	return comp, nil
}

// stamp is one stored message: its subject, a header of interest and the
// time the server stored it.
type stamp struct {
	subject string
	node    string
	step    string
	at      time.Time
	seq     uint64
	size    int // body and headers
}

// watch follows stream messages on subjects with an ordered consumer from
// the start, calling fn for each, until fn returns false, ctx ends or
// timeout passes.
func watch(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, timeout time.Duration, fn func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
	if err != nil {
		return fmt.Errorf("watching %v: %w", subjects, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return err
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	for {
		m, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("watching %v: %w", subjects, ctx.Err())
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return err
			}
			continue
		}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		if !fn(m, meta) {
			return nil
		}
	}
}

// collect reads want messages on subjects and returns their stamps.
func collect(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, want int, timeout time.Duration) ([]stamp, error) {
	out := make([]stamp, 0, want)
	if want == 0 {
		return out, nil
	}
	err := watch(ctx, js, stream, subjects, timeout, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		h := m.Headers()
		size := len(m.Data())
		for k, vs := range h {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		out = append(out, stamp{subject: m.Subject(), node: h.Get("ce-nodeid"), step: h.Get(hdrStep), at: meta.Timestamp, seq: meta.Sequence.Stream, size: size})
		return len(out) < want
	})
	if err != nil {
		return out, fmt.Errorf("%d of %d messages: %w", len(out), want, err)
	}
	return out, nil
}

// runEnds is the filter of runs' ends: completed, failed or cancelled.
var runEnds = []string{eventlog.KindFilter(events.RunCompleted), eventlog.KindFilter(events.RunFailed), eventlog.KindFilter(events.RunCancelled)}

// waitRuns waits until n runs ended and returns the end stamps; a run that
// did not complete is an error.
func waitRuns(ctx context.Context, js jetstream.JetStream, stream string, n int, timeout time.Duration) ([]stamp, error) {
	ends, err := collect(ctx, js, stream, runEnds, n, timeout)
	if err != nil {
		return ends, fmt.Errorf("waiting for runs to end: %w", err)
	}
	for _, s := range ends {
		if !strings.HasSuffix(s.subject, ".completed") {
			return ends, fmt.Errorf("a run did not complete: %s", s.subject)
		}
	}
	return ends, nil
}

// sustained is the rate of events between the 10th and the 90th percentile
// of their stored times: throughput without the ramp up and down.
func sustained(stamps []stamp) float64 {
	if len(stamps) < 10 {
		return 0
	}
	ts := make([]time.Time, len(stamps))
	for i, s := range stamps {
		ts[i] = s.at
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	lo, hi := len(ts)/10, len(ts)*9/10
	d := ts[hi].Sub(ts[lo]).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(hi-lo) / d
}

// last returns the latest stored time.
func last(stamps []stamp) time.Time {
	var t time.Time
	for _, s := range stamps {
		if s.at.After(t) {
			t = s.at
		}
	}
	return t
}

// logMix counts a stream's messages by kind (the subject's last token).
func logMix(ctx context.Context, js jetstream.JetStream, stream string, filter string, total int) (map[string]int, error) {
	mix := map[string]int{}
	n := 0
	err := watch(ctx, js, stream, []string{filter}, time.Minute, func(m jetstream.Msg, _ *jetstream.MsgMetadata) bool {
		s := m.Subject()
		kind := s[strings.LastIndexByte(s, '.')+1:]
		if strings.Contains(s, ".d.ready.") {
			kind = "ready"
		}
		mix[kind]++
		n++
		return n < total
	})
	return mix, err
}

// engineOn opens a fresh stream named after prefix and starts a coordinator
// and a worker on it; done stops both and drops the stream.
func (e *env) engineOn(ctx context.Context, prefix string, workerConc int) (stream string, st events.Store, done func(), err error) {
	stream = e.name(prefix)
	var undo []func()
	done = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() { e.dropStream(stream) })
	if st, err = e.openStore(ctx, e.js, stream); err != nil {
		done()
		return "", nil, nil, err
	}
	coord, err := e.startCoordinator(ctx, stream)
	if err != nil {
		done()
		return "", nil, nil, err
	}
	undo = append(undo, coord.stop)
	work, err := e.startWorker(ctx, stream, workerConc)
	if err != nil {
		done()
		return "", nil, nil, err
	}
	undo = append(undo, work.stop)
	return stream, st, done, nil
}
