// Package provision creates what only the admin may create in a Weft
// deployment under the roles (deploy/SECURITY.md): the timers stream
// beside the events stream, and the KV buckets of the workers'
// announcements, the snapshots, the coordinators' leases and the read
// model of runs, each with the settings its users would create it with.
// No other role may create a stream or a bucket, since a stream's
// configuration could capture or republish any subject.
//
// 'weft roles -setup' runs it, and so do the embedded engine under the
// roles (pkg/weft's WithRoles) and the tests that run the engine under the
// roles (internal/reliability, internal/security).
package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/runs"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

// DefaultLeaseTTL is the leases bucket's TTL when Options leave it unset:
// the coordinators' default lease duration (coordinator.WithLeaseTTL).
const DefaultLeaseTTL = 5 * time.Second

// Options are the settings of what Run creates.
type Options struct {
	// Replicas of the KV buckets (default 1); the events and timers
	// streams are as the store was opened.
	Replicas int
	// LeaseTTL is the TTL of the coordinators' leases bucket, which the
	// coordinators adopt as their lease duration (default
	// DefaultLeaseTTL).
	LeaseTTL time.Duration
}

// Run sets up, beside the store's events stream (which opening the store
// as the admin created), the timers stream and the KV buckets. Existing
// ones are kept as they are. It returns the buckets' names.
func Run(ctx context.Context, store events.Store, o Options) ([]string, error) {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if err := eventlog.EnsureTimers(ctx, store); err != nil {
		return nil, err
	}
	buckets := []jetstream.KeyValueConfig{
		workqueue.WorkersKVConfig(o.Replicas),
		coordinator.SnapshotsKVConfig(o.Replicas),
		coordinator.LeasesKVConfig(o.LeaseTTL, o.Replicas),
		runs.KVConfig(o.Replicas),
		flow.KVConfig(o.Replicas),
	}
	js := eventlog.JetStream(store)
	names := make([]string, len(buckets))
	for i, b := range buckets {
		if _, _, err := setup.CreateKV(ctx, js, b); err != nil {
			return nil, fmt.Errorf("creating KV bucket %s: %w", b.Bucket, err)
		}
		names[i] = b.Bucket
	}
	return names, nil
}
