package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
)

// Steps are how a long node keeps its progress in the run's log, so that
// when it runs again (its work item redelivered after its worker died, or
// a retry after a failure) it goes on from the last step instead of from
// the start: the agent executor records each model answer and each tool
// result as a step.
//
// A step is a NodeStep event on the node activation's own step subject
// (eventlog.StepSubject: under its queue's worker subjects, which the
// worker's role may write and read already), so the last step is one
// direct get of the last message on that subject. Steps belong to the
// activation, not the attempt: a retry reads the steps of the attempts
// before it. Each append has its own message id (the attempt, the
// delivery and the step), so that a step made again after a crash is
// recorded again, not taken for the earlier one.

// RecordStep appends step number n of the running node to its run's log,
// with kind (what the step was) and data (any JSON value: what the node
// needs to go on from there). It returns ErrNoWorkItem outside a node,
// and the error of the append; the node must not go on before it returns
// nil.
func RecordStep(ctx context.Context, n int, kind string, data any) error {
	return recordStep(ctx, n, kind, data, nil)
}

// ErrAwait is what a node returns after RecordAwait: its attempt ends
// with no outcome, awaiting what the step says; the coordinator decides
// the wait, and the node's next attempt goes on from its last step with
// what came (Input.Resume). A node that returns it without having
// recorded such a step fails (not retryable).
var ErrAwait = errors.New("worker: the node's attempt ends awaiting")

// RecordAwait appends step number n of the running node, as RecordStep
// does, marked as awaiting await (a tool call's approval): once it
// returns nil, the node returns ErrAwait. The fold ends the attempt with
// the step and makes the activation wait; a delivery of the attempt that
// records it again changes nothing.
func RecordAwait(ctx context.Context, n int, kind string, data any, await *events.StepAwait) error {
	if await == nil {
		return errors.New("worker: RecordAwait: nothing awaited")
	}
	return recordStep(ctx, n, kind, data, await)
}

func recordStep(ctx context.Context, n int, kind string, data any, await *events.StepAwait) error {
	p, ok := ctx.Value(progressKey{}).(*progress)
	if !ok {
		return ErrNoWorkItem
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("worker: step data do not encode as JSON: %w", err)
	}
	r := p.it.ready
	id := eventlog.DecisionID(p.it.run, events.NodeStep, r.Key(), strconv.Itoa(r.Attempt), strconv.Itoa(p.it.delivery), strconv.Itoa(n))
	ev, err := events.New(p.it.run, id, time.Time{}, &events.NodeStepData{NodeRef: r.NodeRef, Attempt: r.Attempt, Step: n, Kind: kind, Data: raw, Await: await})
	if err != nil {
		return err
	}
	ev.Queue = r.Queue
	actx := context.WithoutCancel(ctx)
	telemetry.Inject(actx, ev)
	if _, err := p.w.store.Append(actx, p.it.run, events.AnySeq, ev); err != nil {
		return fmt.Errorf("worker: recording step %d: %w", n, err)
	}
	if await != nil {
		p.awaited.Store(true)
	}
	// A step is progress: it extends the work item's ack deadline too.
	_ = p.it.msg.InProgress()
	return nil
}

// LastStep returns the data of the running node activation's last
// recorded step, or nil when it has none. It returns ErrNoWorkItem outside
// a node. A message on the step subject that is not a step of this
// activation (which the subject's layout and the decoder refuse) is an
// error, not a step.
func LastStep(ctx context.Context) (json.RawMessage, error) {
	p, ok := ctx.Value(progressKey{}).(*progress)
	if !ok {
		return nil, ErrNoWorkItem
	}
	r := p.it.ready
	subject := eventlog.StepSubject(p.it.run, r.Queue, r.Key())
	m, err := eventlog.LastOn(ctx, p.w.store, subject)
	if err != nil || m == nil {
		return nil, err
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		return nil, fmt.Errorf("worker: the last step on %s: %w", subject, err)
	}
	pl, err := ev.Payload()
	if err != nil {
		return nil, err
	}
	d, ok := pl.(*events.NodeStepData)
	if !ok || d.Key() != r.Key() {
		return nil, fmt.Errorf("worker: the last message on %s is not a step of node %s", subject, r.Key())
	}
	return d.Data, nil
}

// Headers of a streamed-token message (eventlog's): which step of the node
// the text belongs to, and the node's ref key.
const (
	HeaderStep = eventlog.HeaderTokenStep
	HeaderNode = eventlog.HeaderTokenNode
)

// PublishTokens publishes text a running node streams (a model's tokens,
// as they arrive), as part of its step n, with core NATS on the node
// activation's token subject (eventlog.TokenSubject): not stored, best
// effort, for clients that follow the run. It returns ErrNoWorkItem
// outside a node.
func PublishTokens(ctx context.Context, n int, text string) error {
	p, ok := ctx.Value(progressKey{}).(*progress)
	if !ok {
		return ErrNoWorkItem
	}
	r := p.it.ready
	m := nats.NewMsg(eventlog.TokenSubject(p.it.run, r.Queue, r.Key()))
	m.Header.Set(HeaderStep, strconv.Itoa(n))
	m.Header.Set(HeaderNode, r.Key())
	m.Data = []byte(text)
	return p.w.js.Conn().PublishMsg(m)
}
