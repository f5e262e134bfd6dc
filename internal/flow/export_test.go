package flow

import "github.com/nats-io/nats.go/jetstream"

// BucketKV is the KV a Limiter opens over a JetStream bucket, for tests
// that wrap it with faults.
func BucketKV(js jetstream.JetStream, kv jetstream.KeyValue) KV { return jsKV{kv, js.Conn()} }

// DecodeEntry reads a key's value as the bucket stores it.
func DecodeEntry(b []byte) (*Entry, error) { return decodeEntry(b) }

// SetMaxKeys bounds a limit's keys at n in place of MaxKeys.
func (l *Limiter) SetMaxKeys(n int) { l.maxKeys = n }
