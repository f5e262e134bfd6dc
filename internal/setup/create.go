package setup

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// The one place Weft creates JetStream resources: streams, consumers, KV
// buckets and object stores. Their configurations are their owners'
// (eventlog for the streams, workqueue for the queues, coordinator for
// its partitions and leases, runs for the read model and the archive);
// how a missing one is created, and a creation raced by another process
// is settled, is here. Each returns the live resource: when another
// process created it first, that one, to be checked by its owner.

// CreateStream returns the stream cfg names, creating it with cfg when it
// is missing; created says it did.
func CreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (s jetstream.Stream, created bool, err error) {
	s, err = js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s, err = js.CreateStream(ctx, cfg); err == nil {
			return s, true, nil
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, cfg.Name)
		}
	}
	if err != nil {
		return nil, false, err
	}
	return s, false, nil
}

// CreateConsumer creates the durable consumer cfg on stream; when it
// already exists (another process made it meanwhile) it returns that one.
// Callers look a consumer up first when an existing one is the common
// case.
func CreateConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		c, err = js.Consumer(ctx, stream, cfg.Durable)
	}
	return c, err
}

// CreateKV returns the KV bucket cfg names, creating it with cfg when it
// is missing; created says it did.
func CreateKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (kv jetstream.KeyValue, created bool, err error) {
	kv, err = js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if kv, err = js.CreateKeyValue(ctx, cfg); err == nil {
			return kv, true, nil
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, false, err
	}
	return kv, false, nil
}

// CreateObjectStore creates the object store cfg names; when it already
// exists (another process made it meanwhile) it returns that one.
func CreateObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	o, err := js.CreateObjectStore(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		o, err = js.ObjectStore(ctx, cfg.Bucket)
	}
	return o, err
}

// EnsureConsumer creates the durable consumer cfg on stream, or updates
// it to cfg: for the consumers whose configuration is their owner's alone
// to change (a schedule runner's, a trigger's).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return js.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// EnsureStream creates the stream cfg names, or updates it to cfg: for
// the streams an administrator's command sets whole (a namespace's
// admission tickets).
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return js.CreateOrUpdateStream(ctx, cfg)
}

// UpdateStream changes an existing stream to cfg (an administrator's
// limits, retention, de-duplication window).
func UpdateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return js.UpdateStream(ctx, cfg)
}

// UpdateConsumer changes an existing consumer to cfg (a queue's filter
// after an upgrade, an administrator's ack wait).
func UpdateConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return js.UpdateConsumer(ctx, stream, cfg)
}

// UpdateKV changes an existing KV bucket to cfg (an administrator's
// replicas).
func UpdateKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return js.UpdateKeyValue(ctx, cfg)
}

// KVConflict reports whether err is a compare-and-set on one of the KV
// buckets made here that lost: the key exists (Create), or its last
// revision is not the one given (Update). A replicated bucket (R3) says
// the latter with its own code (10164, "key revision mismatch"), not the
// single server's 10071 that nats.go turns into ErrKeyExists: a check of
// ErrKeyExists alone reads a lost race on a cluster as an error.
func KVConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
