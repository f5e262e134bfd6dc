// Package provision creates what only the admin may create in a Weft
// deployment under the roles (deploy/SECURITY.md): the timers stream
// beside the events stream, and the KV buckets of the workers'
// announcements, the snapshots, the coordinators' leases, the read
// model of runs and the batch jobs (internal/batch), each with the
// settings its users would create it with.
// In a namespace (Options.Namespace) it also limits the events stream and
// sets up admission: the tickets streams of the namespace's limits, and
// the stream's metadata that turns admission on (internal/admission).
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

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/schedule"
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
	// Namespace, when set, is the quota of the namespace the store is in
	// (namespace.go): its events stream is limited and its client
	// writes pass admission. Nil: a deployment without namespaces, set
	// up as before.
	Namespace *Namespace
}

// Namespace is what Run sets up for a namespace (natsconn.Quota holds
// more: the account's limits, which the server's configuration sets).
type Namespace struct {
	Name string
	// StreamMaxBytes and StreamMaxMsgs limit the events stream, which
	// then discards new messages: a full stream refuses appends, never
	// drops a run's events.
	StreamMaxBytes int64
	StreamMaxMsgs  int64
	// StartsPerSecond and SignalsPerSecond are the admission limits: the
	// tickets streams' max_msgs (internal/admission).
	StartsPerSecond  int
	SignalsPerSecond int
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
	if o.Namespace != nil {
		if err := limitNamespace(ctx, store, *o.Namespace); err != nil {
			return nil, err
		}
	}
	buckets := []jetstream.KeyValueConfig{
		workqueue.WorkersKVConfig(o.Replicas),
		coordinator.SnapshotsKVConfig(o.Replicas),
		coordinator.LeasesKVConfig(o.LeaseTTL, o.Replicas),
		readmodel.KVConfig(o.Replicas),
		flow.KVConfig(o.Replicas),
		batch.KVConfig(o.Replicas),
	}
	buckets = append(buckets, schedule.KVConfigs(o.Replicas)...)
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

// limitNamespace limits the events stream of a namespace (discarding new
// messages, so that a full stream refuses appends instead of dropping
// runs' events), turns admission on in its metadata, and makes the
// tickets streams of the admission limits. Run again with other limits,
// it updates them.
func limitNamespace(ctx context.Context, store events.Store, ns Namespace) error {
	js := eventlog.JetStream(store)
	st, err := js.Stream(ctx, store.StreamName())
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", store.StreamName(), err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes, cfg.MaxMsgs, cfg.Discard = ns.StreamMaxBytes, ns.StreamMaxMsgs, jetstream.DiscardNew
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	if cfg.MaxMsgs == 0 {
		cfg.MaxMsgs = -1
	}
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[eventlog.MetaAdmission] = "on"
	cfg.Metadata[eventlog.MetaNamespace] = ns.Name
	if _, err := setup.UpdateStream(ctx, js, cfg); err != nil {
		return fmt.Errorf("limiting stream %s of namespace %s: %w", cfg.Name, ns.Name, err)
	}
	for _, t := range []struct {
		suffix, subject string
		limit           int
	}{
		{eventlog.AdmitStartsSuffix, eventlog.TicketStarts, ns.StartsPerSecond},
		{eventlog.AdmitSignalsSuffix, eventlog.TicketSignals, ns.SignalsPerSecond},
	} {
		if t.limit < 1 {
			return fmt.Errorf("namespace %s: an admission limit of %d per second: want at least 1", ns.Name, t.limit)
		}
		tc := eventlog.TicketStreamConfig(cfg.Name+t.suffix, t.subject, t.limit, cfg.Storage, cfg.Replicas)
		if _, err := setup.EnsureStream(ctx, js, tc); err != nil {
			return fmt.Errorf("setting up the tickets stream %s of namespace %s: %w", tc.Name, ns.Name, err)
		}
	}
	return nil
}
