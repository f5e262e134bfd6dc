package readmodel

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// OrphanGrace is how old an object must be before a payloads sweep
// deletes it ('weft admin retention -orphans'): an append writes its
// object before its event, and a restore its objects before its
// messages.
const OrphanGrace = time.Hour

// PayloadSweep says what SweepPayloads did.
type PayloadSweep struct {
	// Objects is how many objects the payloads bucket held.
	Objects int `json:"objects"`
	// Deleted counts the objects deleted: of runs neither in the log nor
	// kept by the archive, or copies of objects their run's archive
	// carries.
	Deleted int `json:"deleted"`
	// Migrated lists the runs whose archive held references only (written
	// before archives carried objects), rewritten to carry them.
	Migrated []string `json:"migrated,omitempty"`
	// Failed lists the runs whose objects were left, and why.
	Failed map[string]string `json:"failed,omitempty"`
}

// SweepPayloads deletes the payload objects no run needs any more: those
// of runs that are not in the log (removed, or never written: an append
// that failed after its object was written, a removal cut short between
// the purge and the objects' deletion). It lists the whole bucket, once:
// what Remove never does. An object written less than grace before now is
// left (its event, or a restore's messages, may be on the way). With an
// archive, a run it holds keeps what it needs: an archive written before
// archives carried objects (references only) is rewritten to carry them
// first, and the objects then leave the bucket too. Without one (nil),
// no run outside the log keeps objects.
func SweepPayloads(ctx context.Context, store events.Store, archive Archive, now time.Time, grace time.Duration) (*PayloadSweep, error) {
	js := eventlog.JetStream(store)
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return &PayloadSweep{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("payloads sweep: %w", err)
	}
	infos, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, fmt.Errorf("payloads sweep: listing %s: %w", eventlog.PayloadsBucket, err)
	}
	res := &PayloadSweep{Objects: len(infos)}
	byRun := map[string][]string{}
	recent := map[string]bool{}
	for _, info := range infos {
		run, _, _ := strings.Cut(info.Name, ".")
		if !eventlog.IsPayloadName(run, info.Name) {
			continue // not a name Weft writes
		}
		byRun[run] = append(byRun[run], info.Name)
		recent[run] = recent[run] || info.ModTime.After(now.Add(-grace))
	}
	for _, run := range slices.Sorted(maps.Keys(byRun)) {
		if recent[run] {
			continue
		}
		n, err := sweepRunPayloads(ctx, store, archive, run, byRun[run], res)
		res.Deleted += n
		if err != nil {
			if res.Failed == nil {
				res.Failed = map[string]string{}
			}
			res.Failed[run] = err.Error()
		}
	}
	return res, nil
}

// sweepRunPayloads deletes the objects names of run, unless the run is
// in the log, or its archive needs them (then it is rewritten to carry
// them first). It returns how many it deleted.
func sweepRunPayloads(ctx context.Context, store events.Store, archive Archive, run string, names []string, res *PayloadSweep) (int, error) {
	_, err := store.LastSeq(ctx, run)
	if err == nil {
		return 0, nil // live
	}
	if !errors.Is(err, events.ErrRunNotFound) {
		return 0, err
	}
	if archive != nil {
		migrated, err := carryPayloads(ctx, store, archive, run)
		if err != nil {
			return 0, err
		}
		if migrated {
			res.Migrated = append(res.Migrated, run)
		}
	}
	if err := eventlog.DeletePayloadObjects(ctx, eventlog.JetStream(store), run, names); err != nil {
		return 0, err
	}
	return len(names), nil
}

// carryPayloads makes run's archive, if it holds the run, carry every
// object its messages refer to that is still in the bucket, rewriting it
// when it lacks one. It reports whether it rewrote it.
func carryPayloads(ctx context.Context, store events.Store, archive Archive, run string) (bool, error) {
	data, err := archive.Get(ctx, run)
	if errors.Is(err, ErrNotArchived) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	recs, objects, err := decodeRecords(run, data)
	if err != nil {
		return false, err
	}
	added := 0
	for _, r := range recs {
		name, obj, err := eventlog.ArchivedPayload(ctx, eventlog.JetStream(store), run, r.Subject, r.Header, r.Data)
		if name == "" || objects[name] != nil || errors.Is(err, eventlog.ErrPayloadMissing) {
			continue
		}
		if err != nil {
			return false, err
		}
		objects[name] = obj
		added++
	}
	if added == 0 {
		return false, nil
	}
	b, err := encodeRecords(run, recs, objects)
	if err != nil {
		return false, err
	}
	return true, archive.Put(ctx, run, b)
}

// encodeRecords writes an archived run's records as an archive object,
// each payload object in objects after the first message that refers to
// it.
func encodeRecords(run string, recs []record, objects map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	written := map[string]bool{}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
		name, ok := eventlog.PayloadRef(run, r.Subject, r.Header, r.Data)
		if !ok || objects[name] == nil || written[name] {
			continue
		}
		written[name] = true
		if err := encodeObject(enc, name, objects[name]); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("archiving run %s: %w", run, err)
	}
	return buf.Bytes(), nil
}
