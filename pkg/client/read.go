package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/runs"
	"github.com/weft-dev/weft/pkg/worker"
)

// History returns a run's events in log order: from the live log, or, for
// a run removed from it, from the archive (WithArchive), transparently. A
// run with no events in either gives an error wrapping
// events.ErrRunNotFound.
func (c *Client) History(ctx context.Context, runID string) ([]*events.Event, error) {
	evs, err := c.store.Read(ctx, runID, 0, 0)
	if errors.Is(err, events.ErrRunNotFound) {
		if a := c.archive(ctx); a != nil {
			evs, err = runs.Read(ctx, c.store, a, runID)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", runID, err)
	}
	return evs, nil
}

// Get returns a run's current state, folded from its whole log.
func (c *Client) Get(ctx context.Context, runID string) (*projection.State, error) {
	evs, err := c.History(ctx, runID)
	if err != nil {
		return nil, err
	}
	return projection.Fold(evs), nil
}

// StateAt returns a run's state as of stream sequence seq: the fold of its
// events with sequence ≤ seq. Sequences are the stream's (see
// events.Event.Seq), as History and the CLI's timeline show them. Zero
// means the current state.
func (c *Client) StateAt(ctx context.Context, runID string, seq uint64) (*projection.State, error) {
	// The whole log is read and folded up to seq: the store's upper bound
	// is not applied by every server version to batched direct gets.
	evs, err := c.History(ctx, runID)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		return projection.Fold(evs), nil
	}
	if evs[0].Seq > seq {
		return nil, fmt.Errorf("%w: run %s has no events at or before sequence %d: it starts at %d", ErrNoSuchSeq, runID, seq, evs[0].Seq)
	}
	return projection.FoldTo(evs, seq), nil
}

// LiveWorkers lists the workers that announced themselves recently: their
// names, queues and node types (see worker.LiveWorkers). Work for a node
// type that none of them serves on its queue waits, ready, until one does.
func (c *Client) LiveWorkers(ctx context.Context) ([]worker.Announcement, error) {
	return worker.LiveWorkers(ctx, c.store.JetStream())
}
