package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Signal sends data to a node of a run: the input a human node waits for.
// A signal for a node that is not waiting yet is kept in the run's state
// until the node waits. data is any JSON value (json.RawMessage and []byte
// are taken as JSON text); nil sends none.
//
// It checks that the run exists (events.ErrRunNotFound), has not ended
// (ErrRunEnded) and that its graph has the node (graph.ErrUnknownNode).
func (c *Client) Signal(ctx context.Context, runID, node string, data any) error {
	raw, err := jsonData(data)
	if err != nil {
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	st, err := c.live(ctx, runID)
	if err != nil {
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	nodes, err := nodeIDs(st.Graph)
	if err != nil {
		return fmt.Errorf("signalling run %s: reading its graph: %w", runID, err)
	}
	if !slices.Contains(nodes, node) {
		return fmt.Errorf("signalling run %s: %w: graph %q has no node %q (its nodes: %s)", runID, graph.ErrUnknownNode, st.GraphName, node, strings.Join(nodes, ", "))
	}
	ev, err := events.New(runID, events.RandomID(), time.Time{}, &events.SignalReceivedData{Node: node, Data: raw, By: c.identity})
	if err != nil {
		return err
	}
	if _, err := c.store.Append(ctx, runID, events.AnySeq, ev); err != nil {
		return fmt.Errorf("signalling node %q of run %s: %w", node, runID, err)
	}
	return nil
}

// Cancel asks for a run to be cancelled. The coordinator ends the run as
// cancelled and workers stop the run's nodes in flight. Asking again is
// harmless: the request's id is derived from the run, so JetStream keeps
// one. It checks that the run exists (events.ErrRunNotFound) and has not
// ended (ErrRunEnded).
func (c *Client) Cancel(ctx context.Context, runID, reason string) error {
	if _, err := c.live(ctx, runID); err != nil {
		return fmt.Errorf("cancelling run %s: %w", runID, err)
	}
	ev, err := events.New(runID, events.DecisionID(runID, events.RunCancelRequested), time.Time{}, &events.RunCancelRequestedData{By: c.identity, Reason: reason})
	if err != nil {
		return err
	}
	if _, err := c.store.Append(ctx, runID, events.AnySeq, ev); err != nil {
		return fmt.Errorf("cancelling run %s: %w", runID, err)
	}
	return nil
}

// live returns the state of a run that has not ended.
func (c *Client) live(ctx context.Context, runID string) (*projection.State, error) {
	if !events.ValidToken(runID) {
		return nil, fmt.Errorf("run id %q: %w", runID, events.ErrInvalidID)
	}
	st, err := c.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if st.Status.Ended() {
		return nil, fmt.Errorf("%w (%s)", ErrRunEnded, st.Status)
	}
	return st, nil
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
