package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
)

// Model is the read model's bucket.
type Model struct {
	kv jetstream.KeyValue
	st jetstream.Stream
	nc *nats.Conn
}

// bucketStream is the stream behind the bucket.
const bucketStream = "KV_" + Bucket

// subjectOf is the stream subject of a key.
func subjectOf(key string) string { return "$KV." + Bucket + "." + key }

// KVConfig is the bucket as it is created: one value per key, with as
// many replicas as the events stream.
func KVConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Weft read model of runs: one summary per run, keyed <status>.<run>",
		History:     1,
		Replicas:    replicas,
	}
}

// Open opens the read model; a missing bucket is ErrNoReadModel.
func Open(ctx context.Context, js jetstream.JetStream) (*Model, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: KV bucket %s does not exist (start a coordinator, or run 'weft admin reindex')", ErrNoReadModel, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("opening KV bucket %s: %w", Bucket, err)
	}
	return open(ctx, js, kv)
}

// Ensure opens the read model, creating its bucket with as many replicas
// as stream when it is missing.
func Ensure(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) (*Model, error) {
	if kv, err := js.KeyValue(ctx, Bucket); err == nil {
		return open(ctx, js, kv)
	}
	replicas, err := setup.StreamReplicas(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	kv, err := setup.EnsureKV(ctx, js, KVConfig(replicas), log)
	if err != nil {
		return nil, err
	}
	return open(ctx, js, kv)
}

func open(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (*Model, error) {
	st, err := js.Stream(ctx, bucketStream)
	if err != nil {
		return nil, fmt.Errorf("opening the stream of KV bucket %s: %w", Bucket, err)
	}
	return &Model{kv: kv, st: st, nc: js.Conn()}, nil
}

// Put writes a run's summary under its status, then, with compact,
// removes the run's older entries (its keys of other statuses): a purge of
// the run's keys that keeps the newest message, the one just put. Both
// steps are idempotent; a Put that is lost half way is repaired by the
// next Put of the run. compact may be false only when the run can have no
// other entry (its first Put, from its run-started).
func (m *Model) Put(ctx context.Context, sum Summary, compact bool) error {
	if !validRun(sum.RunID) || sum.Status == "" {
		return fmt.Errorf("read model: cannot index run %q with status %q", sum.RunID, sum.Status)
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	if _, err := m.kv.Put(ctx, sum.Key(), b); err != nil {
		return fmt.Errorf("indexing run %s: %w", sum.RunID, err)
	}
	if !compact {
		return nil
	}
	if err := m.st.Purge(ctx, jetstream.WithPurgeSubject(subjectOf("*."+sum.RunID)), jetstream.WithPurgeKeep(1)); err != nil {
		return fmt.Errorf("indexing run %s: removing its older entries: %w", sum.RunID, err)
	}
	return nil
}

// Get returns a run's summary.
func (m *Model) Get(ctx context.Context, run string) (*Summary, error) {
	if !validRun(run) {
		return nil, fmt.Errorf("%w: run id %q", ErrNotFound, run)
	}
	msg, err := m.st.GetLastMsgForSubject(ctx, subjectOf("*."+run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: run %s", ErrNotFound, run)
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s from the read model: %w", run, err)
	}
	if len(msg.Data) == 0 { // a delete marker
		return nil, fmt.Errorf("%w: run %s", ErrNotFound, run)
	}
	var sum Summary
	if err := json.Unmarshal(msg.Data, &sum); err != nil {
		return nil, fmt.Errorf("read model entry of run %s: %w", run, err)
	}
	return &sum, nil
}

// Remove removes a run's entries.
func (m *Model) Remove(ctx context.Context, run string) error {
	if !validRun(run) {
		return fmt.Errorf("%w: run id %q", ErrNotFound, run)
	}
	if err := m.st.Purge(ctx, jetstream.WithPurgeSubject(subjectOf("*."+run))); err != nil {
		return fmt.Errorf("removing run %s from the read model: %w", run, err)
	}
	return nil
}
