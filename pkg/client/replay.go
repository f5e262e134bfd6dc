package client

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/replay"
)

// Replay checks recorded runs against g: for each run it reads the log and
// asks the engine, at every recorded decision, what g decides from the
// same state (see package replay). A result with a nil Diff means every
// recorded decision is still what g decides; otherwise Diff names the
// first event where they differ. Nothing is written. A run that cannot be
// read fails the call.
func (c *Client) Replay(ctx context.Context, g *graph.Graph, runIDs ...string) ([]replay.Result, error) {
	out := make([]replay.Result, 0, len(runIDs))
	for _, id := range runIDs {
		evs, err := c.foldable(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("replaying run %s: %w", id, err)
		}
		out = append(out, replay.Run(g, evs))
	}
	return out, nil
}
