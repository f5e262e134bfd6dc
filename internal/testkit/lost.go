package testkit

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// LosingJetStream wraps a JetStream and loses the first answer of each
// request of a KV bucket: opening the bucket, and the first get and the
// first delete of each key.
// A lost answer is what a request sent while a NATS node restarts, or a
// leader is being elected, may get: none, so the request waits as long as
// its context lets it and then fails with the context's error.
type LosingJetStream struct {
	jetstream.JetStream
	mu   sync.Mutex
	seen map[string]bool
	lost int
	// Always loses every answer, not only the first (a request refused
	// by permissions is not answered either).
	Always bool
}

// NewLosingJetStream wraps js.
func NewLosingJetStream(js jetstream.JetStream) *LosingJetStream {
	return &LosingJetStream{JetStream: js, seen: map[string]bool{}}
}

// Lost is how many answers were lost.
func (l *LosingJetStream) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// lose reports whether the request named what loses its answer: the
// first one does.
func (l *LosingJetStream) lose(what string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[what] && !l.Always {
		return false
	}
	l.seen[what] = true
	l.lost++
	return true
}

// KeyValue opens a bucket, whose gets lose their first answers; the
// first open of each bucket loses its own.
func (l *LosingJetStream) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	if l.lose("open " + bucket) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	kv, err := l.JetStream.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return &losingKV{KeyValue: kv, l: l}, nil
}

type losingKV struct {
	jetstream.KeyValue
	l *LosingJetStream
}

func (kv *losingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if kv.l.lose("get " + kv.Bucket() + " " + key) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return kv.KeyValue.Get(ctx, key)
}

func (kv *losingKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if kv.l.lose("delete " + kv.Bucket() + " " + key) {
		<-ctx.Done()
		return ctx.Err()
	}
	return kv.KeyValue.Delete(ctx, key, opts...)
}
