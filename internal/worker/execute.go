package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// ackTimeout bounds the double ack of a work item.
const ackTimeout = 5 * time.Second

// item is one work item being run.
type item struct {
	run      string
	ready    *events.NodeReadyData
	delivery int
	stored   time.Time // when the server stored the item (zero: not known)
	msg      jetstream.Msg
	base     *slog.Logger

	// Set while the node runs (lifecycle.go): the decoded input or why it
	// could not be had, the invoked filters' notes, and how it ended.
	in                *Input
	inErr             error
	invoked           []events.FilterNote
	skipped, fallback bool

	tel nodeTelemetry // telemetry.go
}

// log is the item's logger, built only when something is logged: the hot
// path logs nothing.
func (it *item) log() *slog.Logger {
	r := it.ready
	return it.base.With(logattr.RunID, it.run, logattr.NodeID, r.Node, logattr.Ref, r.Key(), logattr.NodeType, r.Type, logattr.Attempt, r.Attempt, logattr.Delivery, it.delivery)
}

// step logs, at debug level, one step of the item's life: took, ran,
// reported, acked.
func (it *item) step(ctx context.Context, step string, args ...any) {
	if !it.base.Enabled(ctx, slog.LevelDebug) {
		return
	}
	it.log().DebugContext(ctx, step, append([]any{logattr.Step, step}, args...)...)
}

// process runs one work item: decode, check, resolve, then in one of the
// worker's slots (takeSlot) record invoking, execute, record the outcome;
// then ack. base is the context nodes run on; ctx ends when the worker
// drains (an item not started then is handed back).
func (w *Worker) process(ctx, base context.Context, q *queue, m jetstream.Msg, slots chan struct{}) {
	w.stats.received.Add(1)
	if w.restored(m) {
		return
	}
	ev, ready, ok := w.decode(q, m)
	if !ok {
		return
	}
	it, queued := w.newItem(base, m, ev, ready)
	node := w.handler(ready.Type)
	if node == nil {
		w.unserved(q, it)
		return
	}
	if w.runEnded(base, it, queued) {
		w.finish(context.WithoutCancel(base), it, w.cancelledEvent(it, runEndedCancel))
		return
	}
	if !w.resolve(base, it) {
		return
	}
	release, ok := w.takeSlot(ctx, q, slots, m)
	if !ok {
		w.nak(m)
		return
	}
	defer release()
	base, span := w.startNode(base, q, it, ev, m.Subject())
	defer span.End()
	w.execute(base, q, it, node)
}

// restored reports whether m is a work item put back from an archive
// (readmodel.Restore): a record of work done long ago, not work. It is
// acknowledged. Only the coordinator's and the admin's roles may write
// work items.
func (w *Worker) restored(m jetstream.Msg) bool {
	if m.Headers().Get(eventlog.HdrRestored) == "" {
		return false
	}
	if err := m.Ack(); err != nil {
		w.log.Warn("acknowledging a restored work item", logattr.Subject, m.Subject(), logattr.Error, err)
	}
	return true
}

// decode decodes a work item (workitem.go); ok is false when it is not
// this worker's to run: of a newer protocol version or sealed with a key
// it does not hold (handed back, for other workers), or malformed
// (terminated).
func (w *Worker) decode(q *queue, m jetstream.Msg) (ev *events.Event, ready *events.NodeReadyData, ok bool) {
	ev, ready, err := decodeWorkItem(m.Subject(), m.Headers(), m.Data())
	if t, newer := newerWorkItem(m.Headers(), err); newer {
		// A work item of a protocol version this worker does not speak:
		// left to a worker that does, as work of a type it does not serve.
		if _, seen := w.unknown.LoadOrStore(t, true); !seen {
			w.log.Warn("work item of a newer protocol version; leaving it to other workers", logattr.EventType, t, logattr.Queue, q.name)
		}
		if err := m.NakWithDelay(w.unknownDelay); err != nil {
			w.log.Warn("handing back a work item of a newer version", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return nil, nil, false
	}
	if errors.Is(err, events.ErrKeyMissing) {
		// Sealed with a key this worker does not hold: not malformed,
		// left to a worker that holds it, as work of a type it does not
		// serve (the error names the key id, never a key).
		w.log.Error("work item sealed with a key this worker does not hold; leaving it to other workers", logattr.Subject, m.Subject(), logattr.Queue, q.name, logattr.Error, err)
		if err := m.NakWithDelay(w.unknownDelay); err != nil {
			w.log.Warn("handing back a sealed work item", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return nil, nil, false
	}
	if err != nil {
		w.stats.malformed.Add(1)
		w.log.Error("malformed work item; terminated", logattr.Subject, m.Subject(), logattr.Error, err)
		if err := m.Term(); err != nil {
			w.log.Warn("terminating malformed work item", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return nil, nil, false
	}
	return ev, ready, true
}

// newItem is the item of a decoded work item, and how long it waited in
// its queue (0 when its delivery is not known).
func (w *Worker) newItem(base context.Context, m jetstream.Msg, ev *events.Event, ready *events.NodeReadyData) (it *item, queued time.Duration) {
	delivery := 1
	var stored time.Time
	if md, err := m.Metadata(); err == nil {
		delivery = int(md.NumDelivered)
		stored = md.Timestamp
		queued = time.Since(stored)
	}
	it = &item{run: ev.RunID, ready: ready, delivery: delivery, stored: stored, msg: m, base: w.log.With(telemetry.LogAttrs(telemetry.SpanContextOf(ev))...)}
	if delivery > 1 {
		w.stats.redelivered.Add(1)
		telemetry.Redelivered(base, telemetry.ComponentWorker)
		it.log().Info("work item delivered again")
	}
	return it, queued
}

// unserved hands back an item of a node type this worker has no handler
// for, to the workers that do.
func (w *Worker) unserved(q *queue, it *item) {
	t := it.ready.Type
	if _, seen := w.unknown.LoadOrStore(t, true); !seen {
		w.log.Warn("no handler for node type; leaving its work to other workers", logattr.NodeType, t, logattr.Queue, q.name)
	}
	if err := it.msg.NakWithDelay(w.unknownDelay); err != nil {
		it.log().Warn("handing back work of an unserved type", logattr.Error, err)
	}
}

// resolve fills in the item's work item what it refers to (the node's
// config and schemas, the run's invocation state: runinfo.go); ok is
// false when they could not be read (the item is handed back). A node
// the run's graph does not have is the attempt's failure, recorded when
// it runs.
func (w *Worker) resolve(ctx context.Context, it *item) (ok bool) {
	full, err := w.runs.resolve(ctx, it.run, it.ready)
	var nodeErr *Error
	switch {
	case errors.As(err, &nodeErr):
		it.inErr = err // the attempt fails with it, in the log
	case err != nil:
		it.log().Warn("reading what the work item refers to; handing it back", logattr.Error, err)
		if err := it.msg.NakWithDelay(time.Second); err != nil {
			it.log().Warn("handing work back", logattr.Error, err)
		}
		return false
	default:
		it.ready = full
	}
	return true
}

// runEndedCancel is the cancellation a worker records for work of a run
// that ended before the work started.
var runEndedCancel = &runCancelled{by: "worker", reason: "run ended before the work started"}

// runEnded reports whether the item's run has ended, so that its work is
// not started. It reads the log only for an item delivered again or one
// that waited in its queue longer than staleAfter (see runinfo.go), and
// of those only when the coordinators' ended notices cannot tell
// (endwatch.go); a run already seen or noticed ended needs no read.
func (w *Worker) runEnded(ctx context.Context, it *item, queued time.Duration) bool {
	if w.runs.knownEnded(it.run) {
		return true
	}
	ended, vouched := w.ends.knows(it.run, it.stored)
	if ended {
		return true
	}
	if it.delivery == 1 && (queued < w.staleAfter || vouched && !it.stored.IsZero()) {
		return false
	}
	ended, err := w.runs.hasEnded(ctx, it.run)
	if err != nil {
		it.log().Warn("checking whether the run ended; running the work", logattr.Error, err)
	}
	return ended
}

// execute runs a work item whose node this worker serves.
func (w *Worker) execute(base context.Context, q *queue, it *item, node Node) {
	// Appends and the ack outlive the node's context: an outcome is written
	// even when the node ended because its context did.
	detached := context.WithoutCancel(base)

	nodeCtx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	untrack, cancelled := w.cancel.track(it.run, cancel)
	defer untrack()
	if cancelled != nil {
		// The run was cancelled before this work started: do not start it.
		w.finish(detached, it, w.cancelledEvent(it, cancelled))
		return
	}
	filterCancel, ok := w.recordInvoking(nodeCtx, detached, it)
	if !ok {
		return
	}
	if filterCancel != nil {
		w.finish(detached, it, w.cancelledEvent(it, filterCancel))
		return
	}
	res, elapsed, cause, nodeErr := w.runTimed(base, nodeCtx, cancel, q, it, node)
	if errors.Is(nodeErr, ErrAwait) {
		// The attempt ended with its step that awaits: no outcome.
		w.ack(detached, it)
		return
	}
	nodeErr, record := w.interrupted(detached, it, cause, nodeErr)
	if record && nodeErr == nil {
		nodeErr, record = w.recordInvoked(detached, it, res, elapsed)
	}
	if record {
		w.recordFailed(detached, it, nodeErr, elapsed)
	}
}

// recordInvoking runs the invoking filters and appends NodeInvoking with
// their notes; ok is false when it could not be appended (the item is
// handed back). cancelled is the run's cancellation by a filter, if any.
func (w *Worker) recordInvoking(nodeCtx, detached context.Context, it *item) (cancelled *runCancelled, ok bool) {
	ready := it.ready
	filters, filterCancel := w.prepareInput(nodeCtx, it)
	invoking, err := events.New(it.run, eventlog.DecisionID(it.run, events.NodeInvoking, ready.Key(), strconv.Itoa(ready.Attempt), strconv.Itoa(it.delivery)), time.Time{}, &events.NodeInvokingData{
		NodeRef:  ready.NodeRef,
		Attempt:  ready.Attempt,
		Delivery: it.delivery,
		Worker:   w.opts.name,
		Filters:  filters,
	})
	if err == nil {
		invoking.Queue = ready.Queue
		telemetry.Inject(detached, invoking)
		_, err = w.store.Append(detached, it.run, events.AnySeq, invoking)
	}
	if err != nil {
		it.log().Error("recording node invoking; handing work back", logattr.Error, err)
		w.nak(it.msg)
		return nil, false
	}
	return filterCancel, true
}

// runTimed runs the node under its heartbeat and its timeout: its result,
// how long it took, why its context ended (nil if it did not) and its
// error.
func (w *Worker) runTimed(base, nodeCtx context.Context, cancel context.CancelCauseFunc, q *queue, it *item, node Node) (res *Result, elapsed time.Duration, cause, err error) {
	ready := it.ready
	every := q.heartbeat
	if hb := time.Duration(ready.HeartbeatMs) * time.Millisecond; hb > 0 && hb < every {
		every = hb
	}
	hb := startHeartbeat(every, it.msg.InProgress, cancel)
	runCtx := nodeCtx
	if ready.TimeoutMs > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(nodeCtx, time.Duration(ready.TimeoutMs)*time.Millisecond)
		defer stop()
	}
	start := time.Now()
	pctx := withProgress(runCtx, w, it)
	res, err = w.call(pctx, node, it)
	if errors.Is(err, ErrAwait) {
		err = w.awaits(pctx, it)
	}
	elapsed = time.Since(start)
	it.tel.elapsed = elapsed
	hb.stop()
	it.step(base, "ran", "elapsed", elapsed, logattr.Error, err)
	return res, elapsed, context.Cause(runCtx), err
}

// interrupted judges a node error by why the node's context ended
// (cause): a node given up (the worker's drain, a lost heartbeat) is
// handed back and one whose run was cancelled is recorded cancelled
// (record is false: nothing more is to be recorded); a node that ran out
// of its time is a timeout failure. Any other error stands.
func (w *Worker) interrupted(detached context.Context, it *item, cause, nodeErr error) (_ error, record bool) {
	if nodeErr == nil {
		return nil, true
	}
	var rc *runCancelled
	switch {
	case errors.Is(cause, errDrainTimeout) || errors.Is(cause, errHeartbeatLost):
		// The node was given up, not failed: its item is, or will be,
		// delivered again. Record nothing.
		it.log().Warn("node given up; handing work back", logattr.Error, cause)
		w.nak(it.msg)
		return nil, false
	case errors.As(cause, &rc):
		w.finish(detached, it, w.cancelledEvent(it, rc))
		return nil, false
	case errors.Is(cause, context.DeadlineExceeded) && !isTimeout(nodeErr):
		return &Error{
			Type:      events.FailureTimeout,
			Message:   fmt.Sprintf("node timed out after %s", time.Duration(it.ready.TimeoutMs)*time.Millisecond),
			Retryable: true,
			Cause:     nodeErr,
		}, true
	}
	return nodeErr, true
}

// recordInvoked appends NodeInvoked with the node's result and acks the
// item; record is false when that is done, or when the append failed and
// the item is handed back. A result that does not fit in an event, or
// cannot be encoded, is the node's failure (nodeErr), to be recorded.
func (w *Worker) recordInvoked(detached context.Context, it *item, res *Result, elapsed time.Duration) (nodeErr error, record bool) {
	invoked, err := w.invokedEvent(it, res, elapsed)
	if err != nil {
		return err, true
	}
	err = w.append(detached, it, invoked)
	if err == nil {
		w.stats.succeeded.Add(1)
		w.ack(detached, it)
		return nil, false
	}
	if !errors.Is(err, events.ErrPayloadTooLarge) {
		it.log().Error("recording node invoked; handing work back", logattr.Error, err)
		w.nak(it.msg)
		return nil, false
	}
	return NonRetryable(events.FailurePayloadTooLarge, fmt.Sprintf("node %q: its result does not fit in an event: %v", it.ready.Node, err)), true
}

// recordFailed appends NodeFailed with the node's failure and acks the
// item; when the append fails, the item is handed back.
func (w *Worker) recordFailed(detached context.Context, it *item, nodeErr error, elapsed time.Duration) {
	f := failureOf(nodeErr)
	failed, err := w.failedEvent(it, f, elapsed)
	if err == nil {
		err = w.append(detached, it, failed)
	}
	if errors.Is(err, events.ErrPayloadTooLarge) {
		// The failure itself (its details, its cause chain) is too large:
		// record that, without them, rather than hand back an item that
		// can never be answered.
		f = events.Failure{Type: events.FailurePayloadTooLarge, Message: fmt.Sprintf("node %q: its failure does not fit in an event (%s: %s): %v", it.ready.Node, f.Type, clip(f.Message, 512), err)}
		if failed, err = w.failedEvent(it, f, elapsed); err == nil {
			err = w.append(detached, it, failed)
		}
	}
	if err != nil {
		it.log().Error("recording node failed; handing work back", logattr.Error, err, logattr.Failure, f.Error())
		w.nak(it.msg)
		return
	}
	w.stats.failed.Add(1)
	it.log().Info("node failed", logattr.Failure, f.Error(), logattr.Retryable, f.Retryable)
	w.ack(detached, it)
}

// awaits is ErrAwait for a node that returned it having recorded its
// await step (worker.RecordAwait): the step is the attempt's end, and
// the work item is acked with no outcome; else the failure it made
// instead.
func (w *Worker) awaits(ctx context.Context, it *item) error {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok && p.awaited.Load() {
		it.log().Info("node awaits; its attempt ends with its step")
		return ErrAwait
	}
	return NonRetryable(events.FailureValidation, fmt.Sprintf("node %q returned ErrAwait without recording a step that awaits (worker.RecordAwait)", it.ready.Node))
}

// call runs the node, turning a panic into a non-retryable failure.
func (w *Worker) call(ctx context.Context, node Node, it *item) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, &Error{
				Type:    events.FailurePanic,
				Message: fmt.Sprint(r),
				Details: map[string]string{"stack": string(debug.Stack())},
			}
		}
	}()
	if it.in == nil && it.inErr == nil {
		it.in, it.inErr = input(it)
	}
	if it.inErr != nil {
		return nil, it.inErr
	}
	return w.runNode(ctx, node, it.in, it)
}

// input decodes the work item for the node.
func input(it *item) (*Input, error) {
	r := it.ready
	in := &Input{
		RunID:          it.run,
		NodeID:         r.Node,
		Type:           r.Type,
		Iteration:      r.Iteration,
		Attempt:        r.Attempt,
		Delivery:       it.delivery,
		Item:           r.Item,
		Config:         r.Config,
		State:          map[string]any{},
		Invocation:     map[string]any{},
		IdempotencyKey: r.IdempotencyKey,
		MaxAttempts:    r.MaxAttempts,
		Effect:         r.Effect,
		Resume:         r.Resume,
	}
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = eventlog.IdempotencyKey(it.run, r.NodeRef, r.Attempt)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		into any
	}{{"input", r.Input, &in.State}, {"local", r.Local, &in.Local}, {"invocation", r.Invocation, &in.Invocation}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.into); err != nil {
			return nil, NonRetryable(events.FailureValidation, fmt.Sprintf("work item %s: %v", f.name, err))
		}
	}
	if in.State == nil { // JSON null
		in.State = map[string]any{}
	}
	if in.Invocation == nil {
		in.Invocation = map[string]any{}
	}
	return in, nil
}

func (w *Worker) invokedEvent(it *item, res *Result, elapsed time.Duration) (*events.Event, error) {
	r := it.ready
	d := &events.NodeInvokedData{NodeRef: r.NodeRef, Attempt: r.Attempt, DurationMs: elapsed.Milliseconds(), Worker: w.opts.name,
		Filters: it.invoked, Fallback: it.fallback}
	if res != nil {
		invalid := func(what string, err error) error {
			return NonRetryable(events.FailureValidation, fmt.Sprintf("encoding the node's %s: %v", what, err))
		}
		if res.Output != nil {
			b, err := json.Marshal(res.Output)
			if err != nil {
				return nil, invalid("output", err)
			}
			d.Output = b
		}
		if len(res.Updates) > 0 {
			d.Updates = make(map[string]json.RawMessage, len(res.Updates))
			for k, v := range res.Updates {
				b, err := json.Marshal(v)
				if err != nil {
					return nil, invalid(fmt.Sprintf("update %q", k), err)
				}
				d.Updates[k] = b
			}
		}
		for i, a := range res.Actions {
			if a.Name == "" {
				return nil, NonRetryable(events.FailureValidation, fmt.Sprintf("action %d has no name", i))
			}
			ea := events.Action{Name: a.Name}
			if a.Data != nil {
				b, err := json.Marshal(a.Data)
				if err != nil {
					return nil, invalid(fmt.Sprintf("action %q data", a.Name), err)
				}
				ea.Data = b
			}
			d.Actions = append(d.Actions, ea)
		}
	}
	d.Delivery = it.delivery
	return events.New(it.run, outcomeID(it, events.NodeInvoked), time.Time{}, d)
}

func (w *Worker) failedEvent(it *item, f events.Failure, elapsed time.Duration) (*events.Event, error) {
	r := it.ready
	return events.New(it.run, outcomeID(it, events.NodeFailed), time.Time{}, &events.NodeFailedData{
		NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.delivery, Error: f, DurationMs: elapsed.Milliseconds(), Worker: w.opts.name,
	})
}

func (w *Worker) cancelledEvent(it *item, c *runCancelled) *events.Event {
	r := it.ready
	ev, err := events.New(it.run, outcomeID(it, events.NodeCanceled), time.Time{}, &events.NodeCancelledData{
		NodeRef: r.NodeRef, Attempt: r.Attempt, Delivery: it.delivery, By: c.by, Reason: c.reason,
	})
	if err != nil { // a struct of strings and ints always encodes
		panic(err)
	}
	return ev
}

// finish appends a cancellation and acks.
func (w *Worker) finish(ctx context.Context, it *item, ev *events.Event) {
	if err := w.append(ctx, it, ev); err != nil {
		it.log().Error("recording node cancelled; handing work back", logattr.Error, err)
		w.nak(it.msg)
		return
	}
	w.stats.cancelled.Add(1)
	it.log().Info("node cancelled")
	w.ack(ctx, it)
}

func (w *Worker) append(ctx context.Context, it *item, ev *events.Event) error {
	ev.Queue = it.ready.Queue
	it.traceOutcome(ctx, ev)
	seq, err := w.store.Append(ctx, it.run, events.AnySeq, ev)
	if err == nil {
		it.step(ctx, "reported", logattr.EventType, ev.Type, logattr.Seq, seq)
	}
	return err
}

// ack acknowledges a work item whose outcome is in the log. If the ack is
// lost the item is delivered again, runs again under the same idempotency
// key, and its outcome is de-duplicated by its event id.
//
// The double ack is a round trip to the server, and the item's node is
// done: so it goes on beside the next item, and the item's slot is given
// back at once (process returns). Without that, a slot was held for three
// round trips per node (invoking, the outcome, the ack) where two are the
// work's, and the worker's queue was the bottleneck of a burst of runs
// (issue 30: the ack was 28 ms of a 95 ms slot under load). At most
// w.acks (the worker's concurrency) acks are in flight so; past that, the
// ack is made in the slot, which waits for it. The drain waits for them
// (w.inflight) as for the nodes.
func (w *Worker) ack(ctx context.Context, it *item) {
	select {
	case w.acks <- struct{}{}:
	default:
		w.doubleAck(ctx, it)
		return
	}
	w.inflight.Go(func() {
		defer func() { <-w.acks }()
		w.doubleAck(ctx, it)
	})
}

// doubleAck acknowledges it, waiting at most ackTimeout for the server's
// answer.
func (w *Worker) doubleAck(ctx context.Context, it *item) {
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	if err := it.msg.DoubleAck(ctx); err != nil {
		it.log().Warn("acknowledging work item", logattr.Error, err)
		return
	}
	it.step(ctx, "acked")
}

// outcomeID is the id of an outcome of one delivery of a work item: a
// retried append of it is de-duplicated, and two deliveries of one attempt
// write two outcomes, of which the fold takes the live delivery's.
func outcomeID(it *item, t events.Type) string {
	r := it.ready
	return eventlog.DecisionID(it.run, t, r.Key(), strconv.Itoa(r.Attempt), strconv.Itoa(it.delivery))
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
