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

// process runs one work item: decode, record invoking, execute, record the
// outcome, ack. base is the context nodes run on.
func (w *Worker) process(base context.Context, q *queue, m jetstream.Msg) {
	w.stats.received.Add(1)
	if m.Headers().Get(eventlog.HdrRestored) != "" {
		// A work item put back from an archive (readmodel.Restore): a record
		// of work done long ago, not work. Only the coordinator's and the
		// admin's roles may write work items.
		if err := m.Ack(); err != nil {
			w.log.Warn("acknowledging a restored work item", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return
	}
	ev, ready, err := decodeWorkItem(m.Subject(), m.Headers(), m.Data()) // workitem.go
	if t, newer := newerWorkItem(m.Headers(), err); newer {
		// A work item of a protocol version this worker does not speak:
		// left to a worker that does, as work of a type it does not serve.
		if _, seen := w.unknown.LoadOrStore(t, true); !seen {
			w.log.Warn("work item of a newer protocol version; leaving it to other workers", logattr.EventType, t, logattr.Queue, q.name)
		}
		if err := m.NakWithDelay(w.unknownDelay); err != nil {
			w.log.Warn("handing back a work item of a newer version", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return
	}
	if errors.Is(err, events.ErrKeyMissing) {
		// Sealed with a key this worker does not hold: not malformed,
		// left to a worker that holds it, as work of a type it does not
		// serve (the error names the key id, never a key).
		w.log.Error("work item sealed with a key this worker does not hold; leaving it to other workers", logattr.Subject, m.Subject(), logattr.Queue, q.name, logattr.Error, err)
		if err := m.NakWithDelay(w.unknownDelay); err != nil {
			w.log.Warn("handing back a sealed work item", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return
	}
	if err != nil {
		w.stats.malformed.Add(1)
		w.log.Error("malformed work item; terminated", logattr.Subject, m.Subject(), logattr.Error, err)
		if err := m.Term(); err != nil {
			w.log.Warn("terminating malformed work item", logattr.Subject, m.Subject(), logattr.Error, err)
		}
		return
	}
	delivery := 1
	var queued time.Duration
	if md, err := m.Metadata(); err == nil {
		delivery = int(md.NumDelivered)
		queued = time.Since(md.Timestamp)
	}
	it := &item{run: ev.RunID, ready: ready, delivery: delivery, msg: m, base: w.log.With(telemetry.LogAttrs(telemetry.SpanContextOf(ev))...)}
	if delivery > 1 {
		w.stats.redelivered.Add(1)
		telemetry.Redelivered(base, telemetry.ComponentWorker)
		it.log().Info("work item delivered again")
	}

	node := w.handler(ready.Type)
	if node == nil {
		if _, seen := w.unknown.LoadOrStore(ready.Type, true); !seen {
			w.log.Warn("no handler for node type; leaving its work to other workers", logattr.NodeType, ready.Type, logattr.Queue, q.name)
		}
		if err := m.NakWithDelay(w.unknownDelay); err != nil {
			it.log().Warn("handing back work of an unserved type", logattr.Error, err)
		}
		return
	}
	if w.runEnded(base, it, queued) {
		w.finish(context.WithoutCancel(base), it, w.cancelledEvent(it, runEndedCancel))
		return
	}
	full, err := w.runs.resolve(base, it.run, ready)
	var nodeErr *Error
	switch {
	case errors.As(err, &nodeErr):
		it.inErr = err // the attempt fails with it, in the log
	case err != nil:
		it.log().Warn("reading what the work item refers to; handing it back", logattr.Error, err)
		if err := m.NakWithDelay(time.Second); err != nil {
			it.log().Warn("handing work back", logattr.Error, err)
		}
		return
	default:
		it.ready = full
	}
	base, span := w.startNode(base, q, it, ev, m.Subject())
	defer span.End()
	w.execute(base, q, it, node)
}

// runEndedCancel is the cancellation a worker records for work of a run
// that ended before the work started.
var runEndedCancel = &runCancelled{by: "worker", reason: "run ended before the work started"}

// runEnded reports whether the item's run has ended, so that its work is
// not started. It reads the log only for an item delivered again or one
// that waited in its queue longer than staleAfter (see runinfo.go); a run
// already seen ended needs no read.
func (w *Worker) runEnded(ctx context.Context, it *item, queued time.Duration) bool {
	if w.runs.knownEnded(it.run) {
		return true
	}
	if it.delivery == 1 && queued < w.staleAfter {
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
	ready := it.ready
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
		return
	}
	if filterCancel != nil {
		w.finish(detached, it, w.cancelledEvent(it, filterCancel))
		return
	}

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
	res, nodeErr := w.call(pctx, node, it)
	elapsed := time.Since(start)
	it.tel.elapsed = elapsed
	hb.stop()
	it.step(base, "ran", "elapsed", elapsed, logattr.Error, nodeErr)

	if errors.Is(nodeErr, ErrAwait) {
		if nodeErr = w.awaits(pctx, it); nodeErr == nil {
			w.ack(detached, it)
			return
		}
	}
	cause := context.Cause(runCtx)
	var rc *runCancelled
	switch {
	case nodeErr != nil && (errors.Is(cause, errDrainTimeout) || errors.Is(cause, errHeartbeatLost)):
		// The node was given up, not failed: its item is, or will be,
		// delivered again. Record nothing.
		it.log().Warn("node given up; handing work back", logattr.Error, cause)
		w.nak(it.msg)
		return
	case nodeErr != nil && errors.As(cause, &rc):
		w.finish(detached, it, w.cancelledEvent(it, rc))
		return
	case nodeErr != nil && errors.Is(cause, context.DeadlineExceeded) && !isTimeout(nodeErr):
		nodeErr = &Error{
			Type:      events.FailureTimeout,
			Message:   fmt.Sprintf("node timed out after %s", time.Duration(ready.TimeoutMs)*time.Millisecond),
			Retryable: true,
			Cause:     nodeErr,
		}
	}
	if nodeErr == nil {
		invoked, err := w.invokedEvent(it, res, elapsed)
		if err == nil {
			err = w.append(detached, it, invoked)
			if err == nil {
				w.stats.succeeded.Add(1)
				w.ack(detached, it)
				return
			}
			if !errors.Is(err, events.ErrPayloadTooLarge) {
				it.log().Error("recording node invoked; handing work back", logattr.Error, err)
				w.nak(it.msg)
				return
			}
			nodeErr = NonRetryable(events.FailurePayloadTooLarge, fmt.Sprintf("node %q: its result does not fit in an event: %v", ready.Node, err))
		} else {
			nodeErr = err
		}
	}
	f := failureOf(nodeErr)
	failed, err := w.failedEvent(it, f, elapsed)
	if err == nil {
		err = w.append(detached, it, failed)
	}
	if errors.Is(err, events.ErrPayloadTooLarge) {
		// The failure itself (its details, its cause chain) is too large:
		// record that, without them, rather than hand back an item that
		// can never be answered.
		f = events.Failure{Type: events.FailurePayloadTooLarge, Message: fmt.Sprintf("node %q: its failure does not fit in an event (%s: %s): %v", ready.Node, f.Type, clip(f.Message, 512), err)}
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

// awaits says whether the node that returned ErrAwait ends its attempt
// awaiting (nil: it recorded its await step, the step is the attempt's
// end, and the work item is acked with no outcome), or the failure it
// made instead.
func (w *Worker) awaits(ctx context.Context, it *item) error {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok && p.awaited.Load() {
		it.log().Info("node awaits; its attempt ends with its step")
		return nil
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
func (w *Worker) ack(ctx context.Context, it *item) {
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
