package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Checkpoints. A node's checkpoint policy (none, before, after, both) says
// when a snapshot of its run's projection is stored: "before" when the
// coordinator appends the decision that starts the node (its NodeReady, or
// NodeWaiting for a node the coordinator runs), "after" when it appends the
// decision that follows the node's outcome (its NodeRouted). A snapshot is
// the fold of the log up to that decision, read back from the log (the
// coordinator's own state may hold facts of other processes it has not
// seen), and is kept in the KV bucket SnapshotsBucket under the run id:
// the latest one only. Loading a run (entry) starts from its snapshot and
// folds the events after it. Snapshots are a cache: a lost or failed one
// costs a longer fold, never a wrong state.

// SnapshotsBucket is the KV bucket of run snapshots.
const SnapshotsBucket = "weft-snapshots"

// snapshotStore is the lazily opened snapshots bucket.
type snapshotStore struct {
	mu      sync.Mutex
	kv      jetstream.KeyValue
	checked time.Time // when the bucket was last found missing
}

// bucketRecheck is how long a coordinator that found no snapshots bucket
// goes without looking again (another coordinator may create it).
const bucketRecheck = 10 * time.Second

func (c *Coordinator) snapshotKV(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	s := &c.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	if c.js == nil {
		return nil, jetstream.ErrBucketNotFound
	}
	if !create && time.Since(s.checked) < bucketRecheck {
		return nil, jetstream.ErrBucketNotFound
	}
	kv, err := c.js.KeyValue(ctx, SnapshotsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		kv, err = ensureSnapshotsKV(ctx, c.js, c.store.StreamName(), c.log)
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		s.checked = time.Now()
	}
	if err != nil {
		return nil, err
	}
	s.kv = kv
	return kv, nil
}

// SnapshotsKVConfig is the snapshots bucket as coordinators create it:
// with as many replicas as the events stream, whose log it caches.
func SnapshotsKVConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      SnapshotsBucket,
		Description: "Weft run snapshots: the latest checkpoint of each run's projection",
		History:     1,
		Replicas:    replicas,
	}
}

// ensureSnapshotsKV creates the snapshots bucket, or uses the one another
// coordinator created as it is.
func ensureSnapshotsKV(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) (jetstream.KeyValue, error) {
	replicas, err := setup.StreamReplicas(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	return setup.EnsureKV(ctx, js, SnapshotsKVConfig(replicas), log)
}

// LoadSnapshot returns a run's latest snapshot, or nil when it has none.
func LoadSnapshot(ctx context.Context, js jetstream.JetStream, run string) (*projection.Snapshot, error) {
	kv, err := js.KeyValue(ctx, SnapshotsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return getSnapshot(ctx, kv, run)
}

func getSnapshot(ctx context.Context, kv jetstream.KeyValue, run string) (*projection.Snapshot, error) {
	e, err := kv.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sn projection.Snapshot
	if err := json.Unmarshal(e.Value(), &sn); err != nil {
		return nil, fmt.Errorf("snapshot of run %s: %w", run, err)
	}
	return &sn, nil
}

// fromSnapshot returns the state to fold a run's log into: its latest
// snapshot, or an empty state. from is the first sequence still to read;
// lastDecision the snapshot's.
func (c *Coordinator) fromSnapshot(ctx context.Context, run string) (s *projection.State, from, lastDecision uint64) {
	empty := &projection.State{}
	kv, err := c.snapshotKV(ctx, false)
	if err != nil {
		return empty, 0, 0
	}
	sn, err := getSnapshot(ctx, kv, run)
	if err != nil || sn == nil {
		if err != nil {
			c.log.Warn("reading a run's snapshot; folding its whole log", logattr.RunID, run, logattr.Error, err)
		}
		return empty, 0, 0
	}
	s, err = sn.Restore()
	if err != nil || s.RunID != run {
		c.log.Warn("passing over a snapshot that does not restore", logattr.RunID, run, logattr.Error, err)
		return empty, 0, 0
	}
	return s, sn.Seq + 1, sn.LastDecision
}

// checkpoint stores a snapshot of the run if the decisions just appended
// (up to sequence last) start or follow a node whose policy asks for one.
func (c *Coordinator) checkpoint(ctx context.Context, g *graph.Graph, run string, decided []*events.Event, last uint64) {
	if !checkpointDue(g, decided) {
		return
	}
	if err := c.writeSnapshot(ctx, run, last); err != nil {
		c.log.Warn("storing a checkpoint", logattr.RunID, run, logattr.Seq, last, logattr.Error, err)
	}
}

func checkpointDue(g *graph.Graph, decided []*events.Event) bool {
	due := func(node string, when graph.Checkpoint) bool {
		n, ok := g.Node(node)
		return ok && (n.Checkpoint == when || n.Checkpoint == graph.CheckpointBoth)
	}
	// A routing follows a node's outcome ("after"), whether it is written
	// on its own or with the activation it leads to ("before" that one).
	routedDue := func(rs []events.NodeRoutedData) bool {
		for _, r := range rs {
			if due(r.Node, graph.CheckpointAfter) {
				return true
			}
		}
		return false
	}
	for _, e := range decided {
		switch e.Type {
		case events.NodeReady, events.NodeWaiting, events.NodeSkipped, events.NodeRouted:
		default:
			continue
		}
		p, err := e.Payload()
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeReadyData:
			if due(d.Node, graph.CheckpointBefore) || routedDue(d.Routed) {
				return true
			}
		case *events.NodeWaitingData:
			if due(d.Node, graph.CheckpointBefore) || routedDue(d.Routed) {
				return true
			}
		case *events.NodeSkippedData:
			if routedDue(d.Routed) {
				return true
			}
		case *events.NodeRoutedData:
			if due(d.Node, graph.CheckpointAfter) {
				return true
			}
		}
	}
	return false
}

// writeSnapshot folds the run's log up to upTo, from its previous snapshot,
// and stores the result.
func (c *Coordinator) writeSnapshot(ctx context.Context, run string, upTo uint64) error {
	kv, err := c.snapshotKV(ctx, true)
	if err != nil {
		return err
	}
	s, from, lastDecision := &projection.State{}, uint64(0), uint64(0)
	if prev, err := getSnapshot(ctx, kv, run); err == nil && prev != nil {
		if prev.Seq >= upTo {
			return nil // a newer one is in
		}
		if ps, err := prev.Restore(); err == nil && ps.RunID == run {
			s, from, lastDecision = ps, prev.Seq+1, prev.LastDecision
		}
	}
	evs, err := c.store.Read(ctx, run, from, upTo)
	if err != nil {
		return err
	}
	for _, e := range evs {
		_ = s.Apply(e)
		if e.Decision {
			lastDecision = e.Seq
		}
	}
	b, err := json.Marshal(projection.TakeSnapshot(s, lastDecision))
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, run, b)
	return err
}
