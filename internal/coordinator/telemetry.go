package coordinator

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/graphrt"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Tracing (see package telemetry): the coordinator handles each event
// under a Consumer span whose parent is the event's trace context, and
// appends decisions under a Producer span whose context they carry. Its
// own decisions coming back through the consumer get no span: they are
// already in the state and decide nothing new. Timers, child run-started
// events and notices to a parent carry the handling span's context, so a
// run's retries and children stay in the run's trace.

// Logs (keys in package logattr): at debug level, one line per event
// handled ("handling") and per decision appended ("decided": its type,
// node and attempt, and the event and stream sequence it was decided on);
// at info level, what is unusual: an event delivered again, a decision
// refused for a concurrent one. Lines logged with the handling context
// carry the run's trace_id.

// causeKey keys the event being handled in a context, for the decision
// lines.
type causeKey struct{}

// startProcess starts the span of handling e and counts a run's start.
func (c *Coordinator) startProcess(ctx context.Context, subject string, e *events.Event, delivered uint64) (context.Context, trace.Span) {
	if c.log.Enabled(ctx, slog.LevelDebug) {
		ctx = context.WithValue(ctx, causeKey{}, e) // for the decision lines
	}
	if delivered > 1 {
		telemetry.Redelivered(ctx, telemetry.ComponentCoordinator)
		c.log.InfoContext(telemetry.Extract(ctx, e), "handling an event again", logattr.RunID, e.RunID, logattr.EventType, e.Type, logattr.Seq, e.Seq, logattr.Delivery, delivered)
	} else if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.DebugContext(telemetry.Extract(ctx, e), "handling", logattr.RunID, e.RunID, logattr.EventType, e.Type, logattr.Seq, e.Seq, logattr.NodeID, e.NodeID, logattr.Attempt, e.Attempt)
	}
	if e.Type == events.RunStarted && delivered <= 1 && telemetry.MetricsEnabled() {
		if p, err := e.Payload(); err == nil {
			telemetry.RunStarted(ctx, p.(*events.RunStartedData).GraphName)
		}
	}
	// A decision's echo is not traced again; a child run's start, the one
	// decision that begins a run (no cache had it), is handled like the
	// start of any run, under its parent's decision.
	if e.IsDecision() && e.Type != events.RunStarted {
		return telemetry.Extract(ctx, e), trace.SpanFromContext(context.Background())
	}
	return telemetry.StartProcess(ctx, e, subject, c.opts.durable)
}

// appendDecisions appends a run's decisions, after the outcomes outs of
// local nodes they were made from if any, under their Producer span,
// linked to the causes of any join among them.
func (c *Coordinator) appendDecisions(ctx context.Context, g *graph.Graph, ent *runEntry, outs, evs []*events.Event) (uint64, error) {
	if len(evs) == 0 {
		return ent.lastDecision, nil
	}
	ctx, span := telemetry.StartDecisions(ctx, ent.run, evs, joinCauses(g, ent, evs))
	var last uint64
	var err error
	if len(outs) > 0 {
		// After the outcomes of local nodes they were made from, in one
		// step (stepLocal).
		last, err = c.store.AppendStep(ctx, ent.run, ent.lastDecision, outs, evs)
	} else {
		last, err = c.store.AppendDecisions(ctx, ent.run, ent.lastDecision, evs...)
	}
	telemetry.Fail(span, err)
	span.End()
	if err == nil && telemetry.MetricsEnabled() {
		recordDecisions(ctx, ent.state, evs)
	}
	if err == nil {
		c.noticeEnd(ent.run, evs...)
		c.logDecisions(ctx, ent.run, evs)
		c.recordLifetime(ctx, ent, evs)
	}
	return last, err
}

// logDecisions writes the debug line of each decision appended.
func (c *Coordinator) logDecisions(ctx context.Context, run string, evs []*events.Event) {
	if !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	var causeType events.Type
	var causeSeq uint64
	if cause, ok := ctx.Value(causeKey{}).(*events.Event); ok {
		causeType, causeSeq = cause.Type, cause.Seq
	}
	for _, e := range evs {
		c.log.DebugContext(ctx, "decided", logattr.RunID, run, logattr.Decision, telemetry.EventName(e.Type),
			logattr.NodeID, e.NodeID, logattr.Attempt, e.Attempt, logattr.Cause, causeType, logattr.CauseSeq, causeSeq,
			logattr.Coordinator, c.id)
	}
}

// recordLifetime records the run's lifetime span when evs end the run.
func (c *Coordinator) recordLifetime(ctx context.Context, ent *runEntry, evs []*events.Event) {
	if !telemetry.Enabled() || ent.state.StartedAt == nil {
		return
	}
	for _, e := range evs {
		var status string
		switch e.Type {
		case events.RunCompleted:
			status = "completed"
		case events.RunFailed:
			status = "failed"
		case events.RunCancelled:
			status = "cancelled"
		default:
			continue
		}
		root := ent.traces[runStartKey]
		if !root.IsValid() {
			// Folded from a snapshot: the run's start was not read; the
			// handling span is in the run's trace too.
			root = trace.SpanContextFromContext(ctx)
		}
		telemetry.RecordLifetime(ctx, root, ent.run, ent.state.GraphName, status, *ent.state.StartedAt, e.Time)
	}
}

// conflicted notes a decision of e's run that the log refused because
// another landed first.
func (c *Coordinator) conflicted(ctx context.Context, e *events.Event, try int) {
	telemetry.Conflict(ctx)
	c.log.InfoContext(ctx, "a concurrent decision landed first; deciding again", logattr.RunID, e.RunID, logattr.EventType, e.Type, logattr.Seq, e.Seq, logattr.Try, try+1)
}

// runStartKey keys the run-started event's trace context in runEntry.traces.
const runStartKey = graph.Start

// noteTrace remembers the trace context of an outcome of a node (or of
// the run's start), for the links of joins. Only with tracing on.
func (ent *runEntry) noteTrace(e *events.Event) {
	if e.TraceParent == "" || !telemetry.Enabled() {
		return
	}
	key := e.NodeID
	switch e.Type {
	case events.RunStarted:
		key = runStartKey
	case events.NodeInvoked, events.NodeFailed, events.NodeCanceled, events.ChildRunFinished, events.SignalReceived:
	default:
		return
	}
	if key == "" {
		return
	}
	sc := telemetry.SpanContextOf(e)
	if !sc.IsValid() {
		return
	}
	if ent.traces == nil {
		ent.traces = map[string]trace.SpanContext{}
	}
	ent.traces[key] = sc
}

// joinCauses returns, for the node-ready decisions of joins (nodes with
// several forward incoming edges), the trace contexts of the outcomes of
// their predecessors; the run's start when none is known.
func joinCauses(g *graph.Graph, ent *runEntry, evs []*events.Event) []trace.SpanContext {
	if !telemetry.Enabled() || len(ent.traces) == 0 {
		return nil
	}
	var out []trace.SpanContext
	seen := map[trace.SpanID]bool{}
	add := func(sc trace.SpanContext) {
		if sc.IsValid() && !seen[sc.SpanID()] {
			seen[sc.SpanID()] = true
			out = append(out, sc)
		}
	}
	for _, e := range evs {
		if e.Type != events.NodeReady {
			continue
		}
		in := graphrt.Of(g).ForwardIncoming(e.NodeID)
		if len(in) < 2 {
			continue
		}
		n := len(out)
		for _, i := range in {
			add(ent.traces[g.Edge(i).From])
		}
		if len(out) == n {
			add(ent.traces[runStartKey])
		}
	}
	return out
}

// recordDecisions counts the retries and run ends among appended decisions.
func recordDecisions(ctx context.Context, s *projection.State, evs []*events.Event) {
	retries := 0
	for _, e := range evs {
		telemetry.Decided(ctx, telemetry.EventName(e.Type))
		switch e.Type {
		case events.RetryScheduled:
			retries++
		case events.RunCompleted:
			telemetry.RunEnded(ctx, s.GraphName, "completed")
		case events.RunFailed:
			telemetry.RunEnded(ctx, s.GraphName, "failed")
		case events.RunCancelled:
			telemetry.RunEnded(ctx, s.GraphName, "cancelled")
		}
	}
	telemetry.RetriesScheduled(ctx, s.GraphName, retries)
}

// observeLag reports a partition consumer's backlog as the lag gauge,
// under the consumer's name (each partition's starts and progress apart).
func (c *Coordinator) observeLag(cons jetstream.Consumer) func() {
	if !telemetry.MetricsEnabled() {
		return func() {}
	}
	return telemetry.ObserveLag(cons.CachedInfo().Name, func(ctx context.Context) (int64, bool) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, false
		}
		return int64(info.NumPending) + int64(info.NumAckPending), true
	})
}

// Readiness is what a readiness probe asks of a coordinator.
type Readiness struct {
	// Announced is when the coordinator last announced itself in the
	// leases bucket; zero before its setup is done. A coordinator whose
	// last announcement is older than its lease duration is cut off from
	// the bucket and takes part in nothing.
	Announced time.Time
	// Held lists the partitions it holds; none is a standby, ready to take
	// over those of a coordinator that stops.
	Held []int
	// LeaseTTL is the lease duration.
	LeaseTTL time.Duration
}

// Ready reports whether the coordinator takes part in deciding: it
// announced itself within its lease duration (it then holds its share of
// the partitions, or stands by).
func (r Readiness) Ready(now time.Time) bool {
	return !r.Announced.IsZero() && now.Sub(r.Announced) <= r.LeaseTTL
}

// Readiness reports the coordinator's part in deciding, for probes.
func (c *Coordinator) Readiness() Readiness {
	r := Readiness{LeaseTTL: c.opts.leaseTTL}
	if ns := c.announced.Load(); ns != 0 {
		r.Announced = time.Unix(0, ns)
	}
	c.parts.mu.Lock()
	for p := range c.parts.held {
		r.Held = append(r.Held, p)
	}
	c.parts.mu.Unlock()
	slices.Sort(r.Held)
	return r
}
