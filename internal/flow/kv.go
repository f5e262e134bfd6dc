package flow

import (
	"github.com/nats-io/nats.go"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/setup"

	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsKV is KV over a JetStream bucket: a key's revision is its stream
// sequence, and Create, Update and Delete at a revision are the server's
// compare-and-set.
type jsKV struct{ kv jetstream.KeyValue }

func (j jsKV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := j.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

func (j jsKV) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	var err error
	var next uint64
	switch {
	case value == nil:
		err = j.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	case rev == 0:
		next, err = j.kv.Create(ctx, key, value)
	default:
		next, err = j.kv.Update(ctx, key, value, rev)
	}
	if conflict(err) {
		return 0, ErrConflict
	}
	return next, err
}

// conflict reports whether err is a compare-and-set that lost: the key
// exists (Create), or its last revision is not the one given. A replicated
// bucket (R3) says the latter with its own code (10164, "key revision
// mismatch"), not the single server's 10071: missed, a lost race was an
// error, and a slot given back in it stayed held until a sweep (the chaos
// test, on three servers).
func conflict(err error) bool { return setup.KVConflict(err) }

func (j jsKV) Keys(ctx context.Context, prefix string) ([]string, error) {
	filter := ">"
	if prefix != "" {
		filter = prefix + ">"
	}
	lister, err := j.kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	_ = lister.Stop() // the keys were all read; it has ended
	return out, nil
}

// After lists the keys after a revision with a watcher resumed from it:
// an ordered consumer of the bucket's stream from rev+1 over prefix's
// subjects, deletes passed over, stopped once n keys or the keys there
// when it began were read.
func (j jsKV) After(ctx context.Context, prefix string, rev uint64, n int) ([]Item, error) {
	// Bounded: a key's batch waits on it.
	ctx, cancel := context.WithTimeout(ctx, afterTimeout)
	defer cancel()
	w, err := j.kv.WatchFiltered(ctx, []string{prefix + ">"}, jetstream.IgnoreDeletes(), jetstream.ResumeFromRevision(rev+1))
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []Item
	for len(out) < n {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return out, nil // the keys there when it began were read
			}
			if e.Revision() > rev {
				out = append(out, Item{Key: e.Key(), Value: e.Value(), Rev: e.Revision()})
			}
		}
	}
	return out, nil
}

// afterTimeout bounds one listing of parked waiters (jsKV.After).
const afterTimeout = 5 * time.Second

// readerKV is the bucket as a reader sees it: keys listed by direct gets
// of the bucket's stream (no consumer), gets as jsKV's (direct too, the
// bucket allowing them).
type readerKV struct {
	jsKV
	nc *nats.Conn
}

func (r readerKV) Keys(ctx context.Context, prefix string) ([]string, error) {
	subject := "$KV." + Bucket + "."
	var out []string
	seen := map[string]bool{}
	err := readmodel.EachDirect(ctx, r.nc, "KV_"+Bucket, subject+prefix+">", func(m *nats.Msg) error {
		// A direct get's answer names the message's subject in a header
		// (its own subject is the reader's inbox).
		k := strings.TrimPrefix(m.Header.Get(jetstream.SubjectHeader), subject)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// After is not a reader's: readers list entries, not parked waiters.
func (readerKV) After(context.Context, string, uint64, int) ([]Item, error) {
	return nil, errors.New("flow: a reader does not list parked waiters")
}
