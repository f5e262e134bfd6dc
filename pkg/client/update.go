package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// UpdateOption configures one Update call.
type UpdateOption func(*updateOptions)

type updateOptions struct{ id string }

// WithUpdateID sets the update's id, chosen by the caller: an update is
// written to a run once per id, and sending the same id again (with the
// same node and data) returns the verdict recorded the first time. The id
// is scoped to the run; letters, digits, '_' and '-', at most 128
// characters. Without it, Update generates one (UpdateResult.ID), which a
// caller that retries after a lost answer should reuse.
func WithUpdateID(id string) UpdateOption { return func(o *updateOptions) { o.id = id } }

// UpdateResult is the verdict on an update, as the run's log records it.
type UpdateResult struct {
	// ID is the update's id (given with WithUpdateID, or generated).
	ID string `json:"id"`
	// Accepted says the node took the update's data as its output; when
	// not, Reason says why it was refused.
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	// Output is the node's output after an accepted update (its data).
	Output json.RawMessage `json:"output,omitempty"`
	// State is the run's state right after the update was folded (what
	// the run's later events do is not in it): for a refused update, the
	// state it left unchanged.
	State *projection.State `json:"state"`
	// Seq is the update's stream sequence in the run's log.
	Seq uint64 `json:"seq"`
}

// Update sends data to a waiting human node and returns, synchronously,
// the verdict: accepted (the node's output, and the run's state after it)
// or refused (with why). It is Signal for a sender that must know: where a
// signal can be buffered for a node's next wait, an update is only for
// the activation that waits now, and only for a node that declares what it
// accepts (an outputSchema or config.checks, graph.CheckSignal), which the
// data must fit.
//
// An update is durable and idempotent by its id (WithUpdateID, else
// generated): it is written to the run's log under an event id derived
// from the run and the update id, and the fold's verdict on it is the
// update's answer, whoever asks and whenever: sending it again returns the
// same verdict and writes nothing. The verdict is the fold's, so it is
// read back from the log rather than waited for from a coordinator.
//
// A refused update is recorded in the log as refused (it moves nothing)
// and returned with an error wrapping ErrUpdateRefused (the result says
// why, too): the node is not waiting, declares no input, or the data does
// not fit. Refused without writing anything: an invalid run or update id
// or data that is not JSON (ErrInvalidInput), a run that does not exist
// (events.ErrRunNotFound) or has ended (ErrRunEnded), a node the graph
// does not have (graph.ErrUnknownNode), and an update id the run holds
// with other data or for another node (ErrUpdateIDReused).
func (c *Client) Update(ctx context.Context, runID, node string, data any, opts ...UpdateOption) (*UpdateResult, error) {
	var o updateOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.id == "" {
		o.id = eventlog.RandomID()
	}
	what := fmt.Sprintf("updating node %q of run %s", node, runID)
	if !eventlog.ValidToken(o.id) {
		return nil, fmt.Errorf("%s: %w: update id %q (letters, digits, '_' and '-', at most %d)", what, events.ErrInvalidID, o.id, eventlog.MaxTokenLen)
	}
	if !eventlog.ValidToken(runID) {
		return nil, fmt.Errorf("%s: run id %q: %w", what, runID, events.ErrInvalidID)
	}
	raw, err := jsonData(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	id := eventlog.UpdateEventID(runID, o.id)
	history, err := c.History(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if res, err := c.updateVerdict(history, id, o.id, node, raw); res != nil || err != nil {
		return res, wrapVerdict(what, res, err) // sent before: its verdict
	}
	st := projection.Fold(history)
	if st.Status.Ended() {
		return nil, fmt.Errorf("%s: %w (%s)", what, ErrRunEnded, st.Status)
	}
	if err := graphHasNode(st, runID, node, "updating"); err != nil {
		return nil, err
	}
	// The update answers the activation that waits now; none waiting,
	// it names none, and the fold refuses it (and says where the node is).
	iteration := waitingIteration(st, node)
	ev, err := events.New(runID, id, time.Time{}, &events.SignalReceivedData{Node: node, Iteration: iteration, Data: raw, By: c.identity, Update: o.id})
	if err != nil {
		return nil, err
	}
	ctx = telemetry.WithProviders(ctx, c.providers)
	ctx, span := telemetry.StartControl(ctx, history[0], telemetry.SpanUpdate+" "+node, runID, ev.Subject(), telemetry.AttrSignalNode.String(node))
	defer span.End()
	telemetry.Inject(ctx, ev)
	_, appendErr := c.append(ctx, runID, events.AnySeq, ev)
	if appendErr != nil && !errors.Is(appendErr, eventlog.ErrDuplicateMismatch) {
		telemetry.Fail(span, appendErr)
		return nil, fmt.Errorf("%s: %w", what, appendErr)
	}
	res, verdict, err := c.readVerdict(ctx, runID, id, o.id, node, raw, appendErr)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the verdict: %w", what, err)
	}
	c.log.DebugContext(ctx, "update sent", logattr.RunID, runID, logattr.NodeID, node)
	return res, wrapVerdict(what, res, verdict)
}

// readVerdict reads the verdict on an update Update wrote (or found written
// before, by a retry or another sender): the fold's on the event the log
// holds under id. A read served by a replica may lag the write a moment,
// so it reads again, up to verdictReads times; verdict is the refusal (or
// the update not found), err a failure to read.
func (c *Client) readVerdict(ctx context.Context, runID, id, updateID, node string, raw json.RawMessage, appendErr error) (res *UpdateResult, verdict, err error) {
	for try := 0; ; try++ {
		history, err := c.History(ctx, runID)
		if err != nil {
			return nil, nil, err
		}
		if res, verdict = c.updateVerdict(history, id, updateID, node, raw); res != nil || verdict != nil {
			return res, verdict, nil
		}
		if try == verdictReads-1 {
			return nil, fmt.Errorf("the update is not in the run's log after it was written (%v): ask again with update id %s", appendErr, updateID), nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// verdictReads is how often Update reads the run's log for an update it
// wrote before it gives up (100 ms apart).
const verdictReads = 20

// wrapVerdict is Update's error for a verdict: ErrUpdateRefused, with
// why, for a refused update.
func wrapVerdict(what string, res *UpdateResult, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !res.Accepted {
		return fmt.Errorf("%s: %w: %s", what, ErrUpdateRefused, res.Reason)
	}
	return nil
}

// updateVerdict finds the update with event id id in history and returns
// the fold's verdict on it; nil, nil when history has none. An update id
// the log holds with other data, or for another node, is
// ErrUpdateIDReused.
func (c *Client) updateVerdict(history []*events.Event, id, updateID, node string, data json.RawMessage) (*UpdateResult, error) {
	s := &projection.State{}
	for _, e := range history {
		if e.ID != id || e.Type != events.SignalReceived || e.Refused != nil {
			_ = s.Apply(e)
			continue
		}
		p, err := e.Payload()
		if err != nil {
			_ = s.Apply(e)
			continue
		}
		d := p.(*events.SignalReceivedData)
		if d.Node != node || !bytes.Equal(bytes.TrimSpace(d.Data), bytes.TrimSpace(data)) {
			return nil, fmt.Errorf("%w: update %q was sent to node %q with data %s at sequence %d; give this one its own id",
				ErrUpdateIDReused, updateID, d.Node, clip(d.Data), e.Seq)
		}
		res := &UpdateResult{ID: updateID, Seq: e.Seq}
		if err := s.Apply(e); err != nil {
			res.Reason = strings.TrimPrefix(strings.TrimPrefix(err.Error(), projection.ErrRefused.Error()+": "), projection.ErrStale.Error()+": ")
		} else {
			res.Accepted = true
			if ns := s.Nodes[node]; ns != nil {
				res.Output = ns.Output
			}
		}
		res.State = s
		return res, nil
	}
	return nil, nil
}

// clip shortens data for an error message.
func clip(data json.RawMessage) string {
	const most = 80
	if len(data) == 0 {
		return "(none)"
	}
	if len(data) > most {
		return string(data[:most]) + "…"
	}
	return string(data)
}
