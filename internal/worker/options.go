package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Defaults.
const (
	DefaultQueue        = "default"
	DefaultConcurrency  = 16
	DefaultDrainTimeout = 30 * time.Second
	// unknownTypeDelay is how long a work item of a node type this worker
	// does not serve waits before it is delivered again.
	unknownTypeDelay = 5 * time.Second
)

// Option configures a Worker.
type Option func(*options)

type options struct {
	queues       []string
	concurrency  int
	name         string
	logger       *slog.Logger
	ackWait      time.Duration // 0: keep the queue's
	heartbeat    time.Duration // 0: a third of the queue's AckWait
	drainTimeout time.Duration

	invoking []namedInvoking // filters.go
	invoked  []namedInvoked  // filters.go
	perQueue map[string]int  // WithQueueConcurrency
	// noEndWatch keeps Run from hearing runs' ended notices
	// (endwatch.go): tests of the ended-run check's read.
	noEndWatch bool
	announce   time.Duration // announce.go; 0: workqueue.DefaultAnnounceInterval, <0: off
	schemas    *schemaCache  // schema.go; nil: the shared cache, no loading

	tracerProvider trace.TracerProvider // nil: the OpenTelemetry global
	meterProvider  metric.MeterProvider // nil: the OpenTelemetry global
}

// WithQueues sets the task queues the worker pulls from (default "default").
func WithQueues(queues ...string) Option {
	return func(o *options) { o.queues = append([]string(nil), queues...) }
}

// WithConcurrency sets how many nodes the worker runs at once, across its
// queues (default 16).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// WithQueueConcurrency limits how many nodes of one queue the worker runs
// at once, within its overall limit (WithConcurrency): a slow queue then
// cannot take every slot. The queue must be one of the worker's queues.
func WithQueueConcurrency(queue string, n int) Option {
	return func(o *options) {
		if o.perQueue == nil {
			o.perQueue = map[string]int{}
		}
		o.perQueue[queue] = n
	}
}

// WithName names the worker in the events it writes (default
// "<hostname>-<pid>").
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTracerProvider sets the OpenTelemetry TracerProvider the worker's
// spans go to (default the global one, otel.GetTracerProvider(), read when
// each span starts). With none installed, no span is recorded and the
// node-ready event's trace context is passed on as it is.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithMeterProvider sets the OpenTelemetry MeterProvider the worker's
// metrics go to (default the global one, otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithAckWait sets the AckWait of the queue consumers this worker creates:
// how long a work item whose worker stopped heartbeating waits before it is
// delivered again (default 30s). An existing queue keeps the AckWait it has
// (a difference is logged); 'weft admin apply -ack-wait' changes it.
func WithAckWait(d time.Duration) Option { return func(o *options) { o.ackWait = d } }

// WithHeartbeat sets how often a running node's work item is marked in
// progress (default a third of the queue's AckWait).
func WithHeartbeat(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithDrainTimeout bounds how long Run waits for nodes in flight when its
// context ends (default 30s).
func WithDrainTimeout(d time.Duration) Option { return func(o *options) { o.drainTimeout = d } }

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Size: a flat list of independent option checks; all errors are collected.
func (o *options) validate() error {
	var errs []error
	if len(o.queues) == 0 {
		errs = append(errs, errors.New("no queues"))
	}
	seen := map[string]bool{}
	for _, q := range o.queues {
		switch {
		case !eventlog.ValidToken(q):
			errs = append(errs, fmt.Errorf("queue %q: %w (letters, digits, '-' and '_')", q, events.ErrInvalidID))
		case seen[q]:
			errs = append(errs, fmt.Errorf("queue %q listed twice", q))
		}
		seen[q] = true
	}
	if o.concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency: want at least 1, got %d", o.concurrency))
	}
	if o.name == "" {
		errs = append(errs, errors.New("name: must not be empty"))
	}
	if o.ackWait != 0 && o.ackWait < time.Second {
		errs = append(errs, fmt.Errorf("ack wait: want at least 1s, got %s", o.ackWait))
	}
	if o.heartbeat < 0 {
		errs = append(errs, fmt.Errorf("heartbeat: want a positive duration, got %s", o.heartbeat))
	}
	if o.ackWait != 0 && o.heartbeat >= o.ackWait {
		errs = append(errs, fmt.Errorf("heartbeat %s must be shorter than ack wait %s", o.heartbeat, o.ackWait))
	}
	for q, n := range o.perQueue {
		if !slices.Contains(o.queues, q) {
			errs = append(errs, fmt.Errorf("queue concurrency: %q is not one of the worker's queues", q))
		}
		if n < 1 {
			errs = append(errs, fmt.Errorf("queue %q concurrency: want at least 1, got %d", q, n))
		}
	}
	for i, f := range o.invoking {
		if f.name == "" || f.f == nil {
			errs = append(errs, fmt.Errorf("invoking filter %d: needs a name and a filter", i+1))
		}
	}
	for i, f := range o.invoked {
		if f.name == "" || f.f == nil {
			errs = append(errs, fmt.Errorf("invoked filter %d: needs a name and a filter", i+1))
		}
	}
	if o.drainTimeout < 0 {
		errs = append(errs, fmt.Errorf("drain timeout: want a positive duration, got %s", o.drainTimeout))
	}
	return errors.Join(errs...)
}
