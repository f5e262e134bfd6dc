package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/telemetry"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// SignalOption configures one Signal call.
type SignalOption func(*signalOptions)

type signalOptions struct{ id string }

// WithSignalID sets the signal's id, chosen by the caller: a signal with an
// id already in the run's log is not applied again, whenever it is sent.
// The id is scoped to the run; it must be a subject-token-like string
// (letters, digits, '_' and '-', at most 128 characters), e.g. a UUID or a
// request id.
func WithSignalID(id string) SignalOption { return func(o *signalOptions) { o.id = id } }

// SignalRetryWindow is how long after a signal an identical one (same run,
// node, data and sender, and no other signal for the node since) is taken
// for a retry of it when no id is given. It matches the events stream's
// default de-duplication window.
const SignalRetryWindow = 2 * time.Minute

// Signal sends data to a node of a run: the input a human node waits for.
// The signal answers the node's activation that waits now (its iteration
// is in the event), so it is refused (ErrSignalRefused, with why) when the
// node is not a human node or does not wait for a signal now, and when its
// data does not fit what the node accepts (its outputSchema and
// config.checks; the error names the field or check). The fold refuses
// the same signals if they reach the log by another way, and a signal that
// came after its node stopped waiting: they never move the run. data is
// any JSON value (json.RawMessage and []byte are taken as JSON text); nil
// sends none.
//
// Signals are idempotent: each carries an id (its event id is derived from
// it and the run), which JetStream de-duplicates within its window and the
// fold applies once. Give the id with WithSignalID. Without one it is
// derived from the run, the node, the node's activation the signal is for
// (the waiting one, or the next) and a digest of the data, so that a call
// retried after a lost answer is the same signal; and a call that repeats
// the node's last signal (same data and sender, within SignalRetryWindow,
// no other signal since) is taken for such a retry even when the first one
// already moved a looping node on to its next wait. To send the same data
// again on purpose within that window, give each signal its own id.
//
// It checks that the run exists (events.ErrRunNotFound), has not ended
// (ErrRunEnded) and that its graph has the node (graph.ErrUnknownNode).
// A signal whose id the run took in already is a retry: nil, and nothing
// is sent.
func (c *Client) Signal(ctx context.Context, runID, node string, data any, opts ...SignalOption) error {
	var o signalOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.id != "" && !eventlog.ValidToken(o.id) {
		return fmt.Errorf("signalling node %q of run %s: %w: signal id %q (letters, digits, '_' and '-', at most %d)", node, runID, events.ErrInvalidID, o.id, eventlog.MaxTokenLen)
	}
	raw, err := jsonData(data)
	if err != nil {
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	if !eventlog.ValidToken(runID) {
		return fmt.Errorf("signalling node %q of run %s: run id %q: %w", node, runID, runID, events.ErrInvalidID)
	}
	history, err := c.foldable(ctx, runID)
	if err != nil {
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	st := projection.Fold(history)
	if st.Status.Ended() {
		return fmt.Errorf("signalling node %q of run %s: %w (%s)", node, runID, ErrRunEnded, st.Status)
	}
	if err := graphHasNode(st, runID, node, "signalling"); err != nil {
		return err
	}
	id := eventlog.DecisionID(runID, events.SignalReceived, o.id)
	if o.id == "" {
		id = c.derivedSignalID(runID, node, raw, st, history)
	}
	if st.SignalIDs[id] {
		return nil // sent before, and taken in: a retry
	}
	// The signal answers the activation that waits now, and none other.
	iteration := waitingIteration(st, node)
	if err := st.AcceptsSignal(node, max(iteration, 1), raw); err != nil {
		// The fold would refuse it: say so rather than grow the history.
		return fmt.Errorf("signalling node %q of run %s: %w: %s", node, runID, ErrSignalRefused, strings.TrimPrefix(err.Error(), projection.ErrRefused.Error()+": "))
	}
	ev, err := events.New(runID, id, time.Time{}, &events.SignalReceivedData{Node: node, Iteration: iteration, Data: raw, By: c.identity})
	if err != nil {
		return err
	}
	// The signal joins the run's trace, under a span of its own.
	ctx = telemetry.WithProviders(ctx, c.providers)
	ctx, span := telemetry.StartControl(ctx, history[0], telemetry.SpanSignal+" "+node, runID, ev.Subject(), telemetry.AttrSignalNode.String(node))
	defer span.End()
	telemetry.Inject(ctx, ev)
	if _, err := c.append(ctx, runID, events.AnySeq, ev); err != nil {
		telemetry.Fail(span, err)
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	c.log.DebugContext(ctx, "signal sent", logattr.RunID, runID, logattr.NodeID, node)
	return nil
}

// graphHasNode checks that the run's graph has node
// (graph.ErrUnknownNode); doing names the call, for the error.
func graphHasNode(st *projection.State, runID, node, doing string) error {
	nodes, err := nodeIDs(st.Graph)
	if err != nil {
		return fmt.Errorf("%s run %s: reading its graph: %w", doing, runID, err)
	}
	if !slices.Contains(nodes, node) {
		return fmt.Errorf("%s run %s: %w: graph %q has no node %q (its nodes: %s)", doing, runID, graph.ErrUnknownNode, st.GraphName, node, strings.Join(nodes, ", "))
	}
	return nil
}

// waitingIteration is the iteration of node's activation that waits for a
// signal now, or 0 when none does: a signal or update answers that one.
func waitingIteration(st *projection.State, node string) int {
	if ns := st.Nodes[node]; ns != nil && ns.Status == projection.NodeWaiting && ns.WaitingFor == "signal" {
		return ns.Iteration
	}
	return 0
}

// derivedSignalID is the event id of a signal sent without an id: see
// Signal.
func (c *Client) derivedSignalID(runID, node string, data json.RawMessage, st *projection.State, history []*events.Event) string {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:8])
	prefix := eventlog.DecisionID(runID, events.SignalReceived, "n", node) + ":"
	if id, ok := approvalSignalID(prefix, digest, st.Nodes[node]); ok {
		return id
	}
	// A repeat of the node's last signal, recent enough to be a retry of
	// it: the same id again.
	for i := len(history) - 1; i >= 0; i-- {
		e := history[i]
		if e.Refused != nil || e.Type != events.SignalReceived || e.NodeID != node {
			continue
		}
		p, err := e.Payload()
		if err != nil {
			break
		}
		last := p.(*events.SignalReceivedData)
		if strings.HasPrefix(e.ID, prefix) && strings.HasSuffix(e.ID, ":"+digest) && last.By == c.identity &&
			bytes.Equal(last.Data, data) && time.Since(e.Stored) < SignalRetryWindow {
			return e.ID
		}
		break
	}
	// The activation the signal is for: the one waiting, or else the next
	// one that has no buffered signal yet.
	target := 1 + len(st.Signals[node])
	if ns := st.Nodes[node]; ns != nil {
		target = ns.Iteration + 1 + len(st.Signals[node])
		if ns.Status == projection.NodeWaiting && ns.WaitingFor == "signal" {
			target = ns.Iteration
		}
	}
	return prefix + strconv.Itoa(target) + ":" + digest
}

// approvalSignalID is the id of a signal without an id for node state ns
// when it awaits a tool call's approval: the answer is for the attempt
// that awaits, so that the same answer to the next call ({"approved":
// true} again) is a signal of its own; a retry of it is the same id while
// the call awaits, and the data naming the call ("call") keeps a late
// retry from answering another. ok is false for any other node.
func approvalSignalID(prefix, digest string, ns *projection.NodeState) (string, bool) {
	if ns == nil || ns.Await == nil {
		return "", false
	}
	return prefix + strconv.Itoa(ns.Iteration) + "-a" + strconv.Itoa(ns.Attempt) + ":" + digest, true
}

// Cancel asks for a run to be cancelled. The coordinator ends the run as
// cancelled and workers stop the run's nodes in flight. Asking again is
// harmless: the request's id is derived from the run, so JetStream keeps
// one. It checks that the run exists (events.ErrRunNotFound) and has not
// ended (ErrRunEnded).
func (c *Client) Cancel(ctx context.Context, runID, reason string) error {
	history, err := c.live(ctx, runID)
	if err != nil {
		return fmt.Errorf("cancelling run %s: %w", runID, err)
	}
	ev, err := events.New(runID, eventlog.DecisionID(runID, events.RunCancelRequested), time.Time{}, &events.RunCancelRequestedData{By: c.identity, Reason: reason})
	if err != nil {
		return err
	}
	// The request joins the run's trace, under a span of its own.
	ctx = telemetry.WithProviders(ctx, c.providers)
	ctx, span := telemetry.StartControl(ctx, history[0], telemetry.SpanCancel, runID, ev.Subject())
	defer span.End()
	telemetry.Inject(ctx, ev)
	if _, err := c.append(ctx, runID, events.AnySeq, ev); err != nil {
		telemetry.Fail(span, err)
		return fmt.Errorf("cancelling run %s: %w", runID, err)
	}
	c.log.DebugContext(ctx, "cancel requested", logattr.RunID, runID)
	return nil
}

// live returns the history of a run that has not ended.
func (c *Client) live(ctx context.Context, runID string) ([]*events.Event, error) {
	if !eventlog.ValidToken(runID) {
		return nil, fmt.Errorf("run id %q: %w", runID, events.ErrInvalidID)
	}
	history, err := c.foldable(ctx, runID)
	if err != nil {
		return nil, err
	}
	if st := projection.Fold(history); st.Status.Ended() {
		return nil, fmt.Errorf("%w (%s)", ErrRunEnded, st.Status)
	}
	return history, nil
}

// nodeIDs lists the top-level node ids of a canonical graph.
func nodeIDs(canonical json.RawMessage) ([]string, error) {
	var def struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(canonical, &def); err != nil {
		return nil, err
	}
	ids := make([]string, len(def.Nodes))
	for i, n := range def.Nodes {
		ids[i] = n.ID
	}
	return ids, nil
}

// Terminate ends a run at once: the coordinator ends it as cancelled,
// marked terminated (events.RunCancelledData.Terminated), without waiting
// for anything; nodes in flight are stopped like a cancellation's, and
// their late outcomes are passed over. A run whose cancellation was
// requested already ends by that request. It checks that the run exists
// and has not ended (ErrRunEnded).
func (c *Client) Terminate(ctx context.Context, runID, reason string) error {
	if _, err := c.live(ctx, runID); err != nil {
		return fmt.Errorf("terminating run %s: %w", runID, err)
	}
	ev, err := events.New(runID, eventlog.DecisionID(runID, events.RunCancelRequested, "terminate"), time.Time{},
		&events.RunCancelRequestedData{By: c.identity, Reason: reason, Terminate: true})
	if err != nil {
		return err
	}
	if _, err := c.append(ctx, runID, events.AnySeq, ev); err != nil {
		return fmt.Errorf("terminating run %s: %w", runID, err)
	}
	return nil
}
