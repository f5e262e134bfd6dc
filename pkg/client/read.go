package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// History returns a run's events in log order: from the live log, or, for
// a run removed from it, from the archive (WithArchive), transparently. A
// run with no events in either gives an error wrapping
// events.ErrRunNotFound.
func (c *Client) History(ctx context.Context, runID string) ([]*events.Event, error) {
	if err := c.inNamespace(ctx); err != nil {
		return nil, err
	}
	evs, err := c.store.Read(ctx, runID, 0, 0)
	if errors.Is(err, events.ErrRunNotFound) {
		if a := c.archive(ctx); a != nil {
			evs, err = readmodel.Read(ctx, c.store, a, runID)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", runID, err)
	}
	return evs, nil
}

// foldable is History for a fold: an error, naming the event and the key
// id, when an event's data is sealed with a key this process does not
// hold (events.ErrKeyMissing). Folded without it, the state would be
// wrong, not merely incomplete. History itself keeps such an event, with
// Refused set, for the readers that show a run's events.
func (c *Client) foldable(ctx context.Context, runID string) ([]*events.Event, error) {
	evs, err := c.History(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		if errors.Is(e.Refused, events.ErrKeyMissing) {
			return nil, fmt.Errorf("reading run %s: event at sequence %d (%s): %w", runID, e.Seq, e.Type, e.Refused)
		}
	}
	return evs, nil
}

// Get returns a run's current state, folded from its whole log.
func (c *Client) Get(ctx context.Context, runID string) (*projection.State, error) {
	evs, err := c.foldable(ctx, runID)
	if err != nil {
		return nil, err
	}
	return projection.Fold(evs), nil
}

// RunEvent is one event of a run with its position in the run: 1 for
// run-started, 2 for the next event of the run, and so on. Positions are
// the run's own and the same on every stream; the stream sequence
// (Event.Seq) also counts other runs' events.
type RunEvent struct {
	Position int `json:"position"`
	*events.Event
}

// Events returns a run's events in log order with their positions.
func (c *Client) Events(ctx context.Context, runID string) ([]RunEvent, error) {
	evs, err := c.History(ctx, runID)
	if err != nil {
		return nil, err
	}
	return positioned(evs), nil
}

// runEventJSON is RunEvent's JSON form: the event's own (CloudEvents
// structured JSON, see events.Event.MarshalJSON) beside its position.
type runEventJSON struct {
	Position int           `json:"position"`
	Event    *events.Event `json:"event"`
}

// MarshalJSON writes {"position": N, "event": {...}}; without it the
// embedded event's MarshalJSON would drop the position.
func (r RunEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(runEventJSON{Position: r.Position, Event: r.Event})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *RunEvent) UnmarshalJSON(b []byte) error {
	var j runEventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	r.Position, r.Event = j.Position, j.Event
	return nil
}

func positioned(evs []*events.Event) []RunEvent {
	out := make([]RunEvent, len(evs))
	for i, e := range evs {
		out[i] = RunEvent{Position: i + 1, Event: e}
	}
	return out
}

// StateAt returns a run's state after the event at position pos of the run
// (see RunEvent): the fold of its first pos events. Zero means the current
// state. A position past the run's last event gives an error wrapping
// ErrNoSuchPosition that states the valid range.
func (c *Client) StateAt(ctx context.Context, runID string, pos int) (*projection.State, error) {
	evs, err := c.foldable(ctx, runID)
	if err != nil {
		return nil, err
	}
	if pos == 0 {
		return projection.Fold(evs), nil
	}
	if err := checkPosition(runID, pos, len(evs)); err != nil {
		return nil, err
	}
	return projection.Fold(evs[:pos]), nil
}

// checkPosition says whether pos is a position of a run of n events.
func checkPosition(runID string, pos, n int) error {
	if pos < 1 || pos > n {
		return fmt.Errorf("%w: run %s has events at positions 1 to %d; %d is out of range", ErrNoSuchPosition, runID, n, pos)
	}
	return nil
}

// StateAtSeq returns a run's state as of stream sequence seq: the fold of
// its events with sequence ≤ seq. Sequences are the stream's (see
// events.Event.Seq). Zero means the current state.
func (c *Client) StateAtSeq(ctx context.Context, runID string, seq uint64) (*projection.State, error) {
	// The whole log is read and folded up to seq: the store's upper bound
	// is not applied by every server version to batched direct gets.
	evs, err := c.foldable(ctx, runID)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		return projection.Fold(evs), nil
	}
	if evs[0].Seq > seq {
		return nil, fmt.Errorf("%w: run %s has no events at or before sequence %d: its events are at sequences %d to %d", ErrNoSuchSeq, runID, seq, evs[0].Seq, evs[len(evs)-1].Seq)
	}
	return projection.FoldTo(evs, seq), nil
}

// LiveWorkers lists the workers that announced themselves recently: their
// names, queues and node types (see worker.LiveWorkers). Work for a node
// type that none of them serves on its queue waits, ready, until one does.
func (c *Client) LiveWorkers(ctx context.Context) ([]worker.Announcement, error) {
	return worker.LiveWorkers(ctx, eventlog.JetStream(c.store))
}
