package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	rt "github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// Protocol is the version of the wire protocol this worker speaks
// (docs/worker-protocol.md), written in its announcement.
const Protocol = rt.Protocol

// Announcement is a live worker's entry in workqueue.WorkersBucket.
type Announcement = rt.Announcement

// WithAnnounceInterval sets how often the worker refreshes its announcement
// (default 10s); a negative interval turns announcements off. An interval
// longer than workqueue.AnnounceTTL lets the entry lapse between refreshes.
func WithAnnounceInterval(d time.Duration) Option {
	return rt.WithAnnounceInterval(d)
}

// LiveWorkers lists the workers whose announcements are current, sorted by
// name. It returns no workers, and no error, when no worker ever announced.
func LiveWorkers(ctx context.Context, js jetstream.JetStream) ([]Announcement, error) {
	return rt.LiveWorkers(ctx, js)
}

// Validator checks a node's input before it runs. Validate must not change
// the input, and should say what is wrong in terms the graph's author can act
// on ("state.email: want an address, got \"\""). Any error it returns fails
// the attempt with a non-retryable "ValidationError": retrying the same input
// gives the same answer.
type Validator = rt.Validator

// Skipper decides, at run time, whether a node does its work at all. When
// ShouldExecute returns false the node is not run: the worker records a
// NodeInvoked with no output, no updates and no actions, and a filter note
// {Filter: "shouldExecute", Action: "skipped"}, so the flow goes on along
// the node's default edges.
//
// This differs from a graph node's "when" condition, which the coordinator
// evaluates before any work is published and which makes the node skipped
// (its outgoing edges are not taken). ShouldExecute is for decisions only
// code can make (a cache lookup, a feature flag); an error from it fails the
// attempt.
type Skipper = rt.Skipper

// Executor is the exec phase of a node split into prep → exec → post. When
// a node implements Executor the worker runs the phases instead of Execute:
//
//   - Prep (optional, Preparer) reads the input and returns what exec needs;
//     without it exec receives the input's State.
//   - Exec receives only prep's result: it is the part that does the work
//     (calls a model, an API) and should be free of reads of the run's
//     state, so that every attempt does the same thing.
//   - Post (optional, Poster) receives the input, prep's and exec's results
//     and returns the Result: output, state updates and actions. Without it
//     exec's result is the output.
//
// Retries are the coordinator's, and durable: each attempt is a new work
// item, and each runs all three phases; exec is what is "retried" in the
// sense that a retryable failure of exec makes another attempt.
type Executor = rt.Executor

// Preparer is the optional prep phase of an Executor.
type Preparer = rt.Preparer

// Poster is the optional post phase of an Executor.
type Poster = rt.Poster

// BeforeHook runs before the node executes (after validation and
// should-execute). An error fails the attempt and the node does not run.
type BeforeHook = rt.BeforeHook

// AfterHook runs after the node succeeded, with its result (which it may
// change). An error fails the attempt.
type AfterHook = rt.AfterHook

// FailedHook runs after every failed attempt of the node, with the error
// the attempt fails with; it cannot change the outcome. It is not called
// when the worker gives the node up (drain, lost heartbeat) or its run is
// cancelled: those are not failures of the node.
type FailedHook = rt.FailedHook

// Fallbacker gives a node's result after its last attempt failed, so that
// the flow continues. The attempt is the last when its failure is not
// retryable, or when Input.Attempt reached Input.MaxAttempts. If Fallback
// returns a result the worker records it as the node's success, a
// NodeInvoked with Fallback set; if it returns an error the attempt's
// failure stands. Fallback runs on a context detached from the attempt's (a
// timed-out attempt has a spent context) and bounded by the node's timeout,
// or by DefaultFallbackTimeout.
//
// A graph node may also name a static fallback output; the coordinator uses
// that one only when the worker recorded a failure.
type Fallbacker = rt.Fallbacker

// Phases adapts prep, exec and post functions to a Node; Prep and Post may
// be nil (see Executor).
type Phases = rt.Phases

// RunPhases runs an Executor's phases for in: Prep if x implements
// Preparer (else the input's State is exec's argument), Exec, and Post if x
// implements Poster (else exec's result is the output). The worker calls it
// for every node that implements Executor; a type that implements Executor
// can satisfy Node with an Execute that calls it.
func RunPhases(ctx context.Context, x Executor, in *Input) (*Result, error) {
	return rt.RunPhases(ctx, x, in)
}

// ErrAlreadyRunning is returned by Run when the worker runs already (or
// ran: a Worker runs once).
var ErrAlreadyRunning = rt.ErrAlreadyRunning

// ErrDrainTimeout is returned by Run when nodes were still running when
// the drain timeout passed; their work items were handed back.
var ErrDrainTimeout = rt.ErrDrainTimeout

// Error is a node failure with a type, a message, whether the coordinator may
// retry it, and optional details (any JSON value) and cause. It is stored in
// the run's log as an events.Failure.
type Error = rt.Error

// NonRetryable returns a failure of type typ that is not retried.
func NonRetryable(typ string, msg string) error {
	return rt.NonRetryable(typ, msg)
}

// Retryable returns a failure of type typ that the coordinator may retry
// (within the node's retry policy).
func Retryable(typ string, msg string) error {
	return rt.Retryable(typ, msg)
}

// RateLimited returns the failure a node reports when the outside world
// said no for now (an HTTP 429 with Retry-After, a quota): retryable,
// type "RateLimited", with {"retryAfterMs": n} in its details. A node with
// a rate limit then holds the limit's whole key back for retryAfter.
func RateLimited(msg string, retryAfter time.Duration) error {
	return rt.RateLimited(msg, retryAfter)
}

const FilterPassed = rt.FilterPassed

const FilterModified = rt.FilterModified

const FilterCancelled = rt.FilterCancelled

const FilterReplaced = rt.FilterReplaced

// FilterSkipped is the action of the note a Skipper's false writes.
const FilterSkipped = rt.FilterSkipped

// FilterDecision is what an invoking filter decided.
type FilterDecision = rt.FilterDecision

// Pass lets the execution go on unchanged.
func Pass() FilterDecision {
	return rt.Pass()
}

// Modify says the filter changed the input.
func Modify(note string) FilterDecision {
	return rt.Modify(note)
}

// Cancel cancels the execution.
func Cancel(reason string) FilterDecision {
	return rt.Cancel(reason)
}

// InvokingFilter runs before a node executes. It may inspect and change the
// input (and say so with Modify), or cancel the execution. An error fails
// the attempt as a node's error would.
type InvokingFilter = rt.InvokingFilter

// InvokingFilterFunc adapts a function to an InvokingFilter.
type InvokingFilterFunc = rt.InvokingFilterFunc

// InvokedFilter runs after a node succeeded (its own result or its
// fallback's). It may inspect the result and replace it: returning a result
// other than res (a different pointer) is recorded as "replaced"; returning
// res or nil as "passed". An error fails the attempt.
type InvokedFilter = rt.InvokedFilter

// InvokedFilterFunc adapts a function to an InvokedFilter.
type InvokedFilterFunc = rt.InvokedFilterFunc

// WithInvokingFilter adds an invoking filter, run after those added before.
func WithInvokingFilter(name string, f InvokingFilter) Option {
	return rt.WithInvokingFilter(name, f)
}

// WithInvokedFilter adds an invoked filter, run after those added before.
func WithInvokedFilter(name string, f InvokedFilter) Option {
	return rt.WithInvokedFilter(name, f)
}

// FilterCancelledBy is the NodeCancelledData.By of an execution a filter
// cancelled.
func FilterCancelledBy(name string) string {
	return rt.FilterCancelledBy(name)
}

// DefaultFallbackTimeout bounds a Fallbacker's Fallback when the node has
// no timeout.
const DefaultFallbackTimeout = rt.DefaultFallbackTimeout

// Input is what a node execution gets: which node of which run, its
// configuration, and the data it works on. Values decoded from the work item
// are plain JSON Go values (map[string]any, []any, float64, string, bool,
// nil).
type Input = rt.Input

// Result is a node's success: its output, the state updates it makes (merged
// by the state's reducers), and the actions it triggers (which label the
// edges the run follows). All values must encode as JSON.
type Result = rt.Result

// Action is an action a result triggers, optionally with branch-local data
// for the successors on that branch.
type Action = rt.Action

// Node executes one node of a graph. Execute must honour ctx: it ends when
// the node times out, when its run is cancelled, and when the worker gives up
// on it during shutdown. Return a *Error to control the failure's type and
// whether it is retried.
type Node = rt.Node

// NodeFunc adapts a function to a Node.
type NodeFunc = rt.NodeFunc

const DefaultQueue = rt.DefaultQueue

const DefaultConcurrency = rt.DefaultConcurrency

const DefaultDrainTimeout = rt.DefaultDrainTimeout

// Option configures a Worker.
type Option = rt.Option

// WithQueues sets the task queues the worker pulls from (default "default").
func WithQueues(queues ...string) Option {
	return rt.WithQueues(queues...)
}

// WithConcurrency sets how many nodes the worker runs at once, across its
// queues (default 16).
func WithConcurrency(n int) Option {
	return rt.WithConcurrency(n)
}

// WithQueueConcurrency limits how many nodes of one queue the worker runs
// at once, within its overall limit (WithConcurrency): a slow queue then
// cannot take every slot. The queue must be one of the worker's queues.
func WithQueueConcurrency(queue string, n int) Option {
	return rt.WithQueueConcurrency(queue, n)
}

// WithName names the worker in the events it writes (default
// "<hostname>-<pid>").
func WithName(name string) Option {
	return rt.WithName(name)
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return rt.WithLogger(l)
}

// WithTracerProvider sets the OpenTelemetry TracerProvider the worker's
// spans go to (default the global one, otel.GetTracerProvider(), read when
// each span starts). With none installed, no span is recorded and the
// node-ready event's trace context is passed on as it is.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return rt.WithTracerProvider(tp)
}

// WithMeterProvider sets the OpenTelemetry MeterProvider the worker's
// metrics go to (default the global one, otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return rt.WithMeterProvider(mp)
}

// WithAckWait sets the AckWait of the queue consumers this worker creates:
// how long a work item whose worker stopped heartbeating waits before it is
// delivered again (default 30s). An existing queue keeps the AckWait it has
// (a difference is logged); 'weft admin apply -ack-wait' changes it.
func WithAckWait(d time.Duration) Option {
	return rt.WithAckWait(d)
}

// WithHeartbeat sets how often a running node's work item is marked in
// progress (default a third of the queue's AckWait).
func WithHeartbeat(d time.Duration) Option {
	return rt.WithHeartbeat(d)
}

// WithDrainTimeout bounds how long Run waits for nodes in flight when its
// context ends (default 30s).
func WithDrainTimeout(d time.Duration) Option {
	return rt.WithDrainTimeout(d)
}

// HeartbeatEventInterval is the least time between two Heartbeat events of
// one attempt (one delivery of its work item), or the node's heartbeat
// interval (graph field heartbeat) when that is shorter: once a node has
// sent a Heartbeat event, the coordinator fails its attempt as timed out
// when projection.HeartbeatMisses intervals pass without another. Heartbeat calls in between
// still extend the work item's ack deadline; their details are not
// recorded, so that a node that reports progress in a tight loop does not
// flood its run's log.
const HeartbeatEventInterval = rt.HeartbeatEventInterval

// ErrNoWorkItem is returned by Heartbeat when its context is not a running
// node's.
var ErrNoWorkItem = rt.ErrNoWorkItem

// Heartbeat reports a running node's progress: call it from a node's
// Execute (or any step of it) with the context it was given. It marks the
// work item in progress, which extends its ack deadline as the worker's own
// heartbeat does, and appends a Heartbeat event to the run's log with the
// details (any JSON value; nil for none), so that the progress is seen in
// the run's timeline: at most one event per HeartbeatEventInterval per
// attempt, the first call's at once. It returns ErrNoWorkItem outside a
// node, and the error of marking the item or of the append (for example
// details too large for an event).
func Heartbeat(ctx context.Context, details any) error {
	return rt.Heartbeat(ctx, details)
}

// RecordStep appends step number n of the running node to its run's log
// (a node-step event on the activation's own step subject), with kind
// (what the step was) and data (any JSON value: what the node needs to go
// on from there); go on only once it returns nil. When the node runs again
// (redelivered after its worker died, or retried), LastStep gives the
// data back, so that it resumes there instead of doing the work again.
// It returns ErrNoWorkItem outside a node.
func RecordStep(ctx context.Context, n int, kind string, data any) error {
	return rt.RecordStep(ctx, n, kind, data)
}

// ErrAwait is what a node returns after RecordAwait: its attempt ends with
// no outcome, awaiting what the step says (docs/worker-protocol.md,
// Steps).
var ErrAwait = rt.ErrAwait

// RecordAwait appends step number n of the running node as RecordStep
// does, marked as awaiting await (a tool call's approval); once it
// returns nil the node returns ErrAwait, and its next attempt gets what
// came as Input.Resume.
func RecordAwait(ctx context.Context, n int, kind string, data any, await *events.StepAwait) error {
	return rt.RecordAwait(ctx, n, kind, data, await)
}

// LastStep returns the data of the running node activation's last
// recorded step (any attempt's), or nil when it has none.
func LastStep(ctx context.Context) (json.RawMessage, error) {
	return rt.LastStep(ctx)
}

// PublishTokens publishes text a running node streams, as part of its
// step n, with core NATS on the node's token subject: not stored, best
// effort, for clients that follow the run (client.FollowTokens).
func PublishTokens(ctx context.Context, n int, text string) error {
	return rt.PublishTokens(ctx, n, text)
}

// FailureRunNotFound is the failure of a work item whose run's start is
// not in the stream, so that its node's config cannot be known.
const FailureRunNotFound = rt.FailureRunNotFound

// FailureRunStartMismatch is the failure of a work item that names its
// run's start by stream sequence when the start the worker can read is
// another message: a second run-started on the run's start subject, which
// the engine refuses and whose config is never run. Not retryable.
const FailureRunStartMismatch = rt.FailureRunStartMismatch

// SchemaLoader returns the JSON document a schema's "$ref" names by its
// absolute URL, or an error when the worker does not allow it.
type SchemaLoader = rt.SchemaLoader

// WithSchemaLoader lets node schemas load the documents their "$ref"s
// name, through l. Without it nothing is loaded.
func WithSchemaLoader(l SchemaLoader) Option {
	return rt.WithSchemaLoader(l)
}

// ErrSchemaRefRefused is what a schema's reference to another document
// fails with when the worker loads none.
var ErrSchemaRefRefused = rt.ErrSchemaRefRefused

// FieldError is one field of a value that does not match its schema.
type FieldError = rt.FieldError

// Worker runs nodes from task queues. Create it with New, register handlers
// with Handle, then call Run.
type Worker = rt.Worker

// Stats are a worker's counters since it was created.
type Stats = rt.Stats

// New returns a worker that appends to store and pulls from its stream.
func New(store events.Store, opts ...Option) (*Worker, error) {
	return rt.New(store, opts...)
}
