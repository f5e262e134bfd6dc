package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
)

// coordinatorsBucket is the KV bucket where coordinators hold partition
// leases and announce themselves (see internal/coordinator): each live
// coordinator writes its announcement, and renews its leases, several
// times per lease duration, and the bucket forgets entries older than
// that duration.
const coordinatorsBucket = "weft-coordinators"

// Coordinators is what the coordinators' bucket says of them.
type Coordinators struct {
	// LastSeen is when a coordinator last wrote to the bucket (an
	// announcement, a lease renewal, or its leave on a clean stop); zero
	// when no coordinator ever ran.
	LastSeen time.Time
	// Window is how long an announcement lasts: the lease duration.
	Window time.Duration
}

// AliveAt reports whether a coordinator wrote within the last Window
// before now: whether something is deciding. A coordinator writes several
// times per Window, so one that is alive is never missed; one that stopped
// cleanly counts as alive for at most one Window after its stop.
func (c Coordinators) AliveAt(now time.Time) bool {
	return !c.LastSeen.IsZero() && now.Sub(c.LastSeen) <= c.Window
}

// Coordinators reads the coordinators' bucket: the stream's information
// only (the client and UI roles may read it, nothing else of the bucket).
// A bucket that does not exist gives a zero LastSeen: no coordinator ever
// ran against this server.
func (c *Client) Coordinators(ctx context.Context) (Coordinators, error) {
	s, err := eventlog.JetStream(c.store).Stream(ctx, "KV_"+coordinatorsBucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return Coordinators{}, nil
	}
	if err != nil {
		return Coordinators{}, fmt.Errorf("reading the coordinators' bucket %s: %w", coordinatorsBucket, err)
	}
	info := s.CachedInfo()
	return Coordinators{LastSeen: info.State.LastTime, Window: info.Config.MaxAge}, nil
}
