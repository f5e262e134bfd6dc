package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
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
// the fold of the log up to just before that decision, read back from the
// log (the coordinator's own state holds its decisions applied ahead of
// the log, and may miss facts of other processes it has not seen), and is
// kept in the KV bucket SnapshotsBucket under the run id: the latest one
// only. Loading a run (entry) starts from its snapshot and folds the
// events after it. Snapshots are a cache: a lost, failed or discarded one
// costs a longer fold, never a wrong state.
//
// # Snapshots are checked against the log
//
// The bucket is not the log: whoever can write it (today the coordinators
// and the admin; tomorrow a backup restored, a mirror, a mistake) could
// otherwise write a run's result. So the log records what each snapshot
// is. Its digest (SHA-256 over the run id, its sequence, its last decision
// and its state's bytes) is carried by the decision the checkpoint goes
// with, in the Weft-Checkpoint header ("<seq> sha256:<hex>"), and the
// snapshot records the sequence of that decision (Attested). Decisions
// live on the run's decision subjects, which only coordinators may write
// (NATS enforces it; a header cannot be added to someone else's message).
// Loading a snapshot costs one KV get and one get by sequence from the
// stream leader: the message at Attested must be on this run's decision
// subjects and carry this snapshot's sequence and digest, recomputed from
// the bytes read. Anything else (a state, a sequence or a last decision
// changed, a snapshot of another run or of a log since recreated, a
// pointer to another message, bytes that do not decode) is discarded:
// counted (Stats.SnapshotsDiscarded), logged at warn with the run id,
// deleted from the bucket (unless a newer one replaced it meanwhile), and
// the run is folded from its start. An older snapshot of the same run
// that the log attested is a true fold of the log at its sequence, and is
// used as it is: the tail from it gives the same state.
//
// A checkpoint is built from the previous snapshot only once that one is
// checked, so a forged snapshot is never carried into a new, attested one.

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

// LoadSnapshot returns a run's latest snapshot as stored, or nil when it
// has none; it is not checked against the log (see checkedSnapshot).
func LoadSnapshot(ctx context.Context, js jetstream.JetStream, run string) (*projection.Snapshot, error) {
	kv, err := js.KeyValue(ctx, SnapshotsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := DecodeSnapshot(run, e.Value())
	if err != nil {
		return nil, err
	}
	return &rec.Snapshot, nil
}

// SnapshotRecord is a snapshot as the bucket keeps it.
type SnapshotRecord struct {
	// Run is the run the snapshot is of.
	Run string `json:"run"`
	// Attested is the sequence of the decision whose Weft-Checkpoint
	// header records the snapshot's digest.
	Attested uint64 `json:"attested"`
	projection.Snapshot
}

// Digest is the snapshot's digest as the log records it: SHA-256 over the
// run, the sequence, the last decision and the state's bytes.
func (r *SnapshotRecord) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%d\n", r.Run, r.Seq, r.LastDecision)
	h.Write(r.State)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// checkpointValue is the Weft-Checkpoint header of the decision that
// attests r.
func (r *SnapshotRecord) checkpointValue() string {
	return strconv.FormatUint(r.Seq, 10) + " " + r.Digest()
}

// snapshotPurpose names snapshots among sealed values
// (eventlog.SealValue): a snapshot opens only as the snapshot of its run.
const snapshotPurpose = "snapshot"

// maxSnapshotSize bounds a snapshot value the coordinator decodes (the
// bucket's values are at most a message in any case).
const maxSnapshotSize = 64 << 20

// DecodeSnapshot decodes a stored snapshot of run, with the checks that
// need nothing but its bytes: it decodes, it is run's, it attests to a
// decision after its sequence, and its state restores to that sequence.
// It never panics; errors are ErrBadSnapshot.
func DecodeSnapshot(run string, b []byte) (*SnapshotRecord, error) {
	if len(b) > maxSnapshotSize {
		return nil, fmt.Errorf("%w: run %s: %d bytes, the limit is %d", ErrBadSnapshot, run, len(b), maxSnapshotSize)
	}
	b, err := eventlog.OpenValue(snapshotPurpose, run, b)
	if err != nil {
		return nil, fmt.Errorf("%w: run %s: %w", ErrBadSnapshot, run, err)
	}
	var r SnapshotRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: run %s: %v", ErrBadSnapshot, run, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: run %s: data after the snapshot", ErrBadSnapshot, run)
	}
	switch {
	case r.Run != run:
		return nil, fmt.Errorf("%w: run %s: the snapshot is of run %q", ErrBadSnapshot, run, r.Run)
	case r.Seq == 0 || r.Attested <= r.Seq:
		return nil, fmt.Errorf("%w: run %s: snapshot at %d attested at %d", ErrBadSnapshot, run, r.Seq, r.Attested)
	case r.LastDecision > r.Seq:
		return nil, fmt.Errorf("%w: run %s: last decision %d after the snapshot's sequence %d", ErrBadSnapshot, run, r.LastDecision, r.Seq)
	}
	s, err := r.Restore()
	if err != nil {
		return nil, fmt.Errorf("%w: run %s: %v", ErrBadSnapshot, run, err)
	}
	if s.RunID != run {
		return nil, fmt.Errorf("%w: run %s: the state is of run %q", ErrBadSnapshot, run, s.RunID)
	}
	return &r, nil
}

// checkedSnapshot returns a run's latest snapshot and its state, once the
// log has attested it; nil when there is none or it is discarded (logged
// and counted here).
func (c *Coordinator) checkedSnapshot(ctx context.Context, kv jetstream.KeyValue, run string) (*SnapshotRecord, *projection.State) {
	e, err := kv.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		c.log.Warn("reading a run's snapshot; folding its whole log", logattr.RunID, run, logattr.Error, err)
		return nil, nil
	}
	rec, err := DecodeSnapshot(run, e.Value())
	bad := err != nil
	if err == nil {
		err = c.attested(ctx, rec)
		bad = errors.Is(err, ErrBadSnapshot)
	}
	if err != nil {
		c.n.snapshotsDiscarded.Add(1)
		c.log.Warn("discarding a snapshot the log does not attest; folding the run's whole log", logattr.RunID, run, logattr.Error, err)
		if bad {
			// Gone, so that later loads of the run do not check it
			// again; a newer snapshot put meanwhile stays.
			_ = kv.Delete(ctx, run, jetstream.LastRevision(e.Revision()))
		}
		return nil, nil
	}
	s, _ := rec.Restore() // restored once by DecodeSnapshot
	return rec, s
}

// attested checks that the log records rec: the message at rec.Attested
// is a decision of rec's run that carries rec's sequence and digest.
func (c *Coordinator) attested(ctx context.Context, rec *SnapshotRecord) error {
	m, err := eventlog.LeaderSeq(ctx, c.store, rec.Attested)
	if err != nil {
		return fmt.Errorf("reading the decision at %d: %w", rec.Attested, err)
	}
	if m == nil {
		return fmt.Errorf("%w: run %s: no message at %d", ErrBadSnapshot, rec.Run, rec.Attested)
	}
	if run, ok := eventlog.RunOf(m.Subject); !ok || run != rec.Run || !eventlog.IsDecision(m.Subject) {
		return fmt.Errorf("%w: run %s: the message at %d is not one of its decisions (%s)", ErrBadSnapshot, rec.Run, rec.Attested, m.Subject)
	}
	if got, want := m.Header.Get(eventlog.HdrCheckpoint), rec.checkpointValue(); got != want {
		return fmt.Errorf("%w: run %s: the decision at %d records %q, the snapshot is %q", ErrBadSnapshot, rec.Run, rec.Attested, got, want)
	}
	return nil
}

// fromSnapshot returns the state to fold a run's log into: its latest
// checked snapshot, or an empty state. from is the first sequence still to
// read; lastDecision the snapshot's.
func (c *Coordinator) fromSnapshot(ctx context.Context, run string) (s *projection.State, from, lastDecision uint64) {
	empty := &projection.State{}
	kv, err := c.snapshotKV(ctx, false)
	if err != nil {
		return empty, 0, 0
	}
	rec, s := c.checkedSnapshot(ctx, kv, run)
	if rec == nil {
		return empty, 0, 0
	}
	return s, rec.Seq + 1, rec.LastDecision
}

// pendingCheckpoint is a snapshot whose digest rides on the decisions
// being appended; it is stored once they are in.
type pendingCheckpoint struct {
	kv  jetstream.KeyValue
	rec *SnapshotRecord
}

// prepareCheckpoint, when the decisions about to be appended start or
// follow a node whose policy asks for a checkpoint, folds the run's log up
// to the last event the entry has seen and marks the last decision with
// the snapshot's digest. It returns nil when no checkpoint is due or one
// cannot be made (logged; the decisions go in without it).
func (c *Coordinator) prepareCheckpoint(ctx context.Context, g *graph.Graph, ent *runEntry, decided []*events.Event) *pendingCheckpoint {
	if len(decided) == 0 || c.js == nil || !checkpointDue(g, decided) {
		return nil
	}
	rec, kv, err := c.snapshotUpTo(ctx, ent.run, max(ent.prefix, ent.lastDecision, ent.ownMax))
	if err != nil {
		c.log.Warn("preparing a checkpoint", logattr.RunID, ent.run, logattr.Error, err)
		return nil
	}
	if rec == nil {
		return nil
	}
	decided[len(decided)-1].Checkpoint = rec.checkpointValue()
	return &pendingCheckpoint{kv: kv, rec: rec}
}

// store keeps the checkpoint once its decisions landed, the last at last.
func (pc *pendingCheckpoint) store(ctx context.Context, c *Coordinator, last uint64) {
	if pc == nil {
		return
	}
	pc.rec.Attested = last
	b, err := json.Marshal(pc.rec)
	if err == nil {
		// A snapshot holds the run's data: sealed like its events.
		b, err = eventlog.SealValue(snapshotPurpose, pc.rec.Run, b)
	}
	if err == nil {
		_, err = pc.kv.Put(ctx, pc.rec.Run, b)
	}
	if err != nil {
		c.log.Warn("storing a checkpoint", logattr.RunID, pc.rec.Run, logattr.Seq, last, logattr.Error, err)
	}
}

func checkpointDue(g *graph.Graph, decided []*events.Event) bool {
	for _, e := range decided {
		switch e.Type {
		case events.NodeReady, events.NodeWaiting, events.NodeSkipped, events.NodeRouted:
		default:
			continue
		}
		if p, err := e.Payload(); err == nil && decisionDue(g, p) {
			return true
		}
	}
	return false
}

// decisionDue reports whether one decision's payload asks for a
// checkpoint: an activation of a node checkpointed "before", or a routing,
// which follows a node's outcome ("after"), whether it is written on its
// own or with the activation it leads to.
func decisionDue(g *graph.Graph, p any) bool {
	switch d := p.(type) {
	case *events.NodeReadyData:
		return nodeDue(g, d.Node, graph.CheckpointBefore) || routedDue(g, d.Routed)
	case *events.NodeWaitingData:
		return nodeDue(g, d.Node, graph.CheckpointBefore) || routedDue(g, d.Routed)
	case *events.NodeSkippedData:
		return routedDue(g, d.Routed)
	case *events.NodeRoutedData:
		return nodeDue(g, d.Node, graph.CheckpointAfter)
	}
	return false
}

func nodeDue(g *graph.Graph, node string, when graph.Checkpoint) bool {
	n, ok := g.Node(node)
	return ok && (n.Checkpoint == when || n.Checkpoint == graph.CheckpointBoth)
}

func routedDue(g *graph.Graph, rs []events.NodeRoutedData) bool {
	for _, r := range rs {
		if nodeDue(g, r.Node, graph.CheckpointAfter) {
			return true
		}
	}
	return false
}

// snapshotUpTo folds the run's log up to upTo, from its previous checked
// snapshot, into a snapshot record (not yet attested). It returns nil when
// the stored snapshot is as new already.
func (c *Coordinator) snapshotUpTo(ctx context.Context, run string, upTo uint64) (*SnapshotRecord, jetstream.KeyValue, error) {
	kv, err := c.snapshotKV(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	s, from, lastDecision := &projection.State{}, uint64(0), uint64(0)
	if prev, ps := c.checkedSnapshot(ctx, kv, run); prev != nil {
		if prev.Seq >= upTo {
			return nil, kv, nil
		}
		s, from, lastDecision = ps, prev.Seq+1, prev.LastDecision
	}
	err = eventlog.Each(ctx, c.store, run, from, upTo, func(e *events.Event) error {
		if e.Seq > upTo {
			return eventlog.ErrStop
		}
		_ = s.Apply(e)
		if e.IsDecision() {
			lastDecision = e.Seq
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if s.LastSeq == 0 || s.RunID != run {
		return nil, kv, nil
	}
	return &SnapshotRecord{Run: run, Snapshot: *projection.TakeSnapshot(s, lastDecision)}, kv, nil
}
