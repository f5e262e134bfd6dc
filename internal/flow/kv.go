package flow

import (
	"github.com/nats-io/nats.go"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/setup"

	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsKV is KV over a JetStream bucket: a key's revision is its stream
// sequence, and Create, Update and Delete at a revision are the server's
// compare-and-set.
type jsKV struct {
	kv jetstream.KeyValue
	nc *nats.Conn // After's message gets
}

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

// After lists the keys after a revision by the stream's own message
// gets ("next by subject" from rev+1, one at a time), answered by the
// bucket stream's leader, so a key created before the listing is listed
// (a direct get may be answered by a replica that is behind: a listing
// that missed a parked waiter would count its line down to none). No
// consumer is made: a watcher per refill was an ordered consumer per
// write of a busy key, each a request to the cluster's meta leader (the
// chaos test, 200 runs on three servers, lost JetStream under them).
// Delete markers are passed over.
func (j jsKV) After(ctx context.Context, prefix string, rev uint64, n int) ([]Item, error) {
	// Bounded: a key's batch waits on it.
	ctx, cancel := context.WithTimeout(ctx, afterTimeout)
	defer cancel()
	subject := "$KV." + Bucket + "."
	var out []Item
	for seq := rev + 1; len(out) < n; {
		m, err := eventlog.LeaderGet(ctx, j.nc, "KV_"+Bucket, map[string]any{"seq": seq, "next_by_subj": subject + prefix + ">"})
		if err != nil {
			return nil, fmt.Errorf("reading the flow bucket after %d: %w", seq, err)
		}
		if m == nil {
			return out, nil // none after seq
		}
		if m.Sequence < seq {
			return nil, fmt.Errorf("reading the flow bucket after %d: the answer is message %d", seq, m.Sequence)
		}
		seq = m.Sequence + 1
		if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" {
			continue // a delete or purge marker
		}
		out = append(out, Item{Key: strings.TrimPrefix(m.Subject, subject), Value: m.Data, Rev: m.Sequence})
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
