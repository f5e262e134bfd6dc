package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Metric names: every metric Weft records, in one place.
const (
	// MetricNodeDuration is how long a node attempt ran on a worker, in
	// seconds (histogram; weft.node.type, weft.node.outcome).
	MetricNodeDuration = "weft.node.duration"
	// MetricQueueWait is the time from node-ready (the coordinator's
	// decision) to node-invoking (a worker took it), in seconds (histogram;
	// weft.queue, weft.node.type).
	MetricQueueWait = "weft.node.queue_wait"
	// MetricNodeFailures counts failed node attempts (counter;
	// weft.node.type, weft.failure.type).
	MetricNodeFailures = "weft.node.failures"
	// MetricRetries counts retries scheduled (counter; weft.graph.name).
	MetricRetries = "weft.node.retries"
	// MetricRunsStarted counts runs started, child runs included (counter;
	// weft.graph.name).
	MetricRunsStarted = "weft.runs.started"
	// MetricRunsCompleted counts runs that completed (counter).
	MetricRunsCompleted = "weft.runs.completed"
	// MetricRunsFailed counts runs that failed (counter).
	MetricRunsFailed = "weft.runs.failed"
	// MetricRunsCancelled counts runs that were cancelled (counter).
	MetricRunsCancelled = "weft.runs.cancelled"
	// MetricRunsInFlight is runs started and not yet ended (up-down
	// counter, summed over coordinators: each adds the runs it saw start
	// and takes away those it ended).
	MetricRunsInFlight = "weft.runs.in_flight"
	// MetricCoordinatorLag is how many events of the log the coordinators
	// have not yet handled: the durable consumer's pending plus
	// unacknowledged messages (observable gauge; messaging.consumer.group.name).
	MetricCoordinatorLag = "weft.coordinator.lag"
	// MetricRunsEnded counts runs that ended, by how (counter;
	// weft.graph.name, weft.run.status: completed, failed, cancelled).
	MetricRunsEnded = "weft.runs.ended"
	// MetricDecisions counts the decisions coordinators appended (counter;
	// weft.event.type: node.ready, retry.scheduled, run.completed, …).
	MetricDecisions = "weft.decisions"
	// MetricConflicts counts decisions the log refused because another
	// decision of the run landed first: the coordinator read the run again
	// and decided anew (counter).
	MetricConflicts = "weft.coordinator.conflicts"
	// MetricRedeliveries counts messages delivered again: to coordinators,
	// events not acknowledged in time or handed back; to workers, work
	// items (counter; weft.component: coordinator, worker).
	MetricRedeliveries = "weft.redeliveries"
	// MetricQueueDepth is the work items of a queue not yet delivered to a
	// worker (observable gauge; weft.queue).
	MetricQueueDepth = "weft.queue.depth"
	// MetricQueueOldest is the age of the oldest work item of a queue not
	// yet delivered to a worker, in seconds; 0 when none waits (observable
	// gauge; weft.queue).
	MetricQueueOldest = "weft.queue.oldest_age"
)

// AttrComponent is the component attribute of MetricRedeliveries.
const AttrComponent = attribute.Key("weft.component")

// Metric attribute values of the node outcome.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// AttrOutcome is the node outcome attribute of MetricNodeDuration.
const AttrOutcome = attribute.Key("weft.node.outcome")

// durationBuckets suit node attempts and queue waits: 1ms to 10 minutes.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// instruments are the synchronous instruments of one MeterProvider.
type instruments struct {
	mp           metric.MeterProvider
	meter        metric.Meter
	nodeDuration metric.Float64Histogram
	queueWait    metric.Float64Histogram
	nodeFailures metric.Int64Counter
	retries      metric.Int64Counter
	runsStarted  metric.Int64Counter
	runsDone     map[string]metric.Int64Counter // by run status
	inFlight     metric.Int64UpDownCounter
	runsEnded    metric.Int64Counter
	decisions    metric.Int64Counter
	conflicts    metric.Int64Counter
	redeliveries metric.Int64Counter
}

var instrumentCache atomic.Pointer[instruments]

// metrics returns the instruments of the MeterProvider of ctx (its
// Providers', else the installed global one), or nil when none is
// installed.
func metrics(ctx context.Context) *instruments {
	mp, cache := otel.GetMeterProvider(), &instrumentCache
	if p := providersOf(ctx); p != nil && p.mp != nil {
		mp, cache = p.mp, &p.instruments
	}
	if mp == defaultMeterProvider {
		return nil
	}
	if in := cache.Load(); in != nil && in.mp == mp {
		return in
	}
	m := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	in := &instruments{mp: mp, meter: m, runsDone: map[string]metric.Int64Counter{}}
	// Errors here are of instrument names and are checked by the tests;
	// an instrument that failed is a no-op one.
	in.nodeDuration, _ = m.Float64Histogram(MetricNodeDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of node attempts on workers."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.queueWait, _ = m.Float64Histogram(MetricQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time from node-ready to node-invoking."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.nodeFailures, _ = m.Int64Counter(MetricNodeFailures, metric.WithUnit("{failure}"), metric.WithDescription("Failed node attempts."))
	in.retries, _ = m.Int64Counter(MetricRetries, metric.WithUnit("{retry}"), metric.WithDescription("Node retries scheduled."))
	in.runsStarted, _ = m.Int64Counter(MetricRunsStarted, metric.WithUnit("{run}"), metric.WithDescription("Runs started."))
	in.runsDone["completed"], _ = m.Int64Counter(MetricRunsCompleted, metric.WithUnit("{run}"), metric.WithDescription("Runs completed."))
	in.runsDone["failed"], _ = m.Int64Counter(MetricRunsFailed, metric.WithUnit("{run}"), metric.WithDescription("Runs failed."))
	in.runsDone["cancelled"], _ = m.Int64Counter(MetricRunsCancelled, metric.WithUnit("{run}"), metric.WithDescription("Runs cancelled."))
	in.inFlight, _ = m.Int64UpDownCounter(MetricRunsInFlight, metric.WithUnit("{run}"), metric.WithDescription("Runs started and not yet ended."))
	in.runsEnded, _ = m.Int64Counter(MetricRunsEnded, metric.WithUnit("{run}"), metric.WithDescription("Runs ended, by status."))
	in.decisions, _ = m.Int64Counter(MetricDecisions, metric.WithUnit("{decision}"), metric.WithDescription("Decisions appended by coordinators."))
	in.conflicts, _ = m.Int64Counter(MetricConflicts, metric.WithUnit("{conflict}"), metric.WithDescription("Decisions refused for a concurrent one."))
	in.redeliveries, _ = m.Int64Counter(MetricRedeliveries, metric.WithUnit("{message}"), metric.WithDescription("Messages delivered again."))
	cache.Store(in)
	return in
}

// NodeFinished records a node attempt's duration and, when it failed, the
// failure. outcome is one of the Outcome constants; failureType is empty
// unless it failed.
func NodeFinished(ctx context.Context, nodeType, outcome, failureType string, d time.Duration) {
	in := metrics(ctx)
	if in == nil {
		return
	}
	in.nodeDuration.Record(ctx, d.Seconds(), metric.WithAttributes(AttrNodeType.String(nodeType), AttrOutcome.String(outcome)))
	if outcome == OutcomeFailed {
		in.nodeFailures.Add(ctx, 1, metric.WithAttributes(AttrNodeType.String(nodeType), AttrFailureType.String(failureType)))
	}
}

// QueueWait records the time a node-ready event waited for a worker.
func QueueWait(ctx context.Context, queue, nodeType string, d time.Duration) {
	in := metrics(ctx)
	if in == nil {
		return
	}
	in.queueWait.Record(ctx, max(d, 0).Seconds(), metric.WithAttributes(AttrQueue.String(queue), AttrNodeType.String(nodeType)))
}

// RetriesScheduled counts n retries scheduled in a run of a graph.
func RetriesScheduled(ctx context.Context, graphName string, n int) {
	in := metrics(ctx)
	if in == nil || n == 0 {
		return
	}
	in.retries.Add(ctx, int64(n), metric.WithAttributes(AttrGraphName.String(graphName)))
}

// RunStarted counts a run that started.
func RunStarted(ctx context.Context, graphName string) {
	in := metrics(ctx)
	if in == nil {
		return
	}
	attrs := metric.WithAttributes(AttrGraphName.String(graphName))
	in.runsStarted.Add(ctx, 1, attrs)
	in.inFlight.Add(ctx, 1, attrs)
}

// RunEnded counts a run that ended with status "completed", "failed" or
// "cancelled".
func RunEnded(ctx context.Context, graphName, status string) {
	in := metrics(ctx)
	if in == nil {
		return
	}
	attrs := metric.WithAttributes(AttrGraphName.String(graphName))
	if c, ok := in.runsDone[status]; ok {
		c.Add(ctx, 1, attrs)
	}
	in.runsEnded.Add(ctx, 1, metric.WithAttributes(AttrGraphName.String(graphName), AttrRunStatus.String(status)))
	in.inFlight.Add(ctx, -1, attrs)
}

// ObserveLag registers the coordinator lag gauge of a durable consumer:
// lag is called at each collection and reports the events not yet handled,
// or false when it cannot tell. The returned function unregisters it.
func ObserveLag(consumer string, lag func(context.Context) (int64, bool)) (unregister func()) {
	in := metrics(context.Background())
	if in == nil {
		return func() {}
	}
	g, err := in.meter.Int64ObservableGauge(MetricCoordinatorLag, metric.WithUnit("{event}"),
		metric.WithDescription("Events of the log the coordinators have not handled yet."))
	if err != nil {
		return func() {}
	}
	attrs := metric.WithAttributes(semconv.MessagingConsumerGroupName(consumer))
	reg, err := in.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if n, ok := lag(ctx); ok {
			o.ObserveInt64(g, n, attrs)
		}
		return nil
	}, g)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}

// Decided counts one decision of type typ appended.
func Decided(ctx context.Context, typ string) {
	if in := metrics(ctx); in != nil {
		in.decisions.Add(ctx, 1, metric.WithAttributes(AttrEventType.String(typ)))
	}
}

// Conflict counts a decision the log refused for a concurrent one.
func Conflict(ctx context.Context) {
	if in := metrics(ctx); in != nil {
		in.conflicts.Add(ctx, 1)
	}
}

// Redelivered counts a message delivered again to a component
// ("coordinator", "worker").
func Redelivered(ctx context.Context, component string) {
	if in := metrics(ctx); in != nil {
		in.redeliveries.Add(ctx, 1, metric.WithAttributes(AttrComponent.String(component)))
	}
}

// QueueStat is what ObserveQueues reports of one queue.
type QueueStat struct {
	Queue  string
	Depth  int64         // work items not yet delivered
	Oldest time.Duration // age of the oldest of them; 0 when none
}

// ObserveQueues registers the queue depth and oldest-work gauges: stats is
// called at each collection and reports the queues it can tell about.
// The returned function unregisters them.
func ObserveQueues(stats func(context.Context) []QueueStat) (unregister func()) {
	in := metrics(context.Background())
	if in == nil {
		return func() {}
	}
	depth, err1 := in.meter.Int64ObservableGauge(MetricQueueDepth, metric.WithUnit("{item}"),
		metric.WithDescription("Work items of a queue not yet delivered to a worker."))
	oldest, err2 := in.meter.Float64ObservableGauge(MetricQueueOldest, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest work item of a queue not yet delivered to a worker."))
	if err1 != nil || err2 != nil {
		return func() {}
	}
	reg, err := in.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, q := range stats(ctx) {
			attrs := metric.WithAttributes(AttrQueue.String(q.Queue))
			o.ObserveInt64(depth, q.Depth, attrs)
			o.ObserveFloat64(oldest, q.Oldest.Seconds(), attrs)
		}
		return nil
	}, depth, oldest)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}

// Component names of MetricRedeliveries.
const (
	ComponentCoordinator = "coordinator"
	ComponentWorker      = "worker"
)

// Announce gives a daemon's counters of rare events their zero, so that a
// scrape shows them before the first one happens (a series that appears
// only on its first increment hides its rate): the redeliveries of
// component, and for coordinators the conflicts.
func Announce(ctx context.Context, component string) {
	in := metrics(ctx)
	if in == nil {
		return
	}
	in.redeliveries.Add(ctx, 0, metric.WithAttributes(AttrComponent.String(component)))
	if component == ComponentCoordinator {
		in.conflicts.Add(ctx, 0)
	}
}
