package readmodel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// snapshotsBucket is internal/coordinator's SnapshotsBucket, repeated
// here because the coordinator imports this package.
const snapshotsBucket = "weft-snapshots"

// Removed says what Remove did.
type Removed struct {
	RunID string `json:"runId"`
	// Events is how many messages the run's log held.
	Events int `json:"events"`
	// Archived names the archive that holds the run now, if any.
	Archived string `json:"archived,omitempty"`
}

// Remove removes an ended run: it archives the run's log first when
// archive is not nil (Archive.Put is durable when it returns), with the
// large payloads it refers to, then purges the run's subjects in the
// events stream, its timers, its snapshot and its read-model entry, and
// deletes its payload objects (the ones its log names, archived or not). A run that has not ended is refused (ErrNotEnded); an
// archive that fails leaves everything as it was. It needs the admin's
// rights: purges of the events stream.
func Remove(ctx context.Context, store events.Store, run string, archive Archive) (*Removed, error) {
	return remove(ctx, newPurger(store), run, archive)
}

func remove(ctx context.Context, p *purger, run string, archive Archive) (*Removed, error) {
	store := p.store
	evs, err := store.Read(ctx, run, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("removing run %s: %w", run, err)
	}
	s := projection.Fold(evs)
	if !s.Status.Ended() {
		return nil, fmt.Errorf("removing run %s: %w (status %s): 'weft cancel' or 'weft terminate' it first", run, ErrNotEnded, cmpStatus(s.Status))
	}
	out := &Removed{RunID: run, Events: len(evs)}
	// The run's bodies kept beside the log go with it: an archive carries
	// them with its events (a restore puts them back). Their names come
	// from the log, which the purge removes.
	var objects []string
	if archive != nil {
		a, err := archiveRun(ctx, p, run, evs, archive)
		if err != nil {
			return nil, err
		}
		out.Archived, objects = archive.String(), a.objects
	} else if objects, err = eventlog.RunPayloads(ctx, store, run); err != nil {
		return nil, fmt.Errorf("removing run %s: %w", run, err)
	}
	if err := p.purge(ctx, run); err != nil {
		return nil, err
	}
	if err := eventlog.DeletePayloadObjects(ctx, eventlog.JetStream(store), run, objects); err != nil {
		return nil, fmt.Errorf("removing run %s: its payloads beside the log: %w", run, err)
	}
	return out, nil
}

// archiveRun puts a run's log, and the payload objects it refers to, in
// archive (durable when it returns).
func archiveRun(ctx context.Context, p *purger, run string, evs []*events.Event, archive Archive) (*archived, error) {
	store := p.store
	st, err := p.stream(ctx, store.StreamName())
	if err != nil || st == nil {
		return nil, fmt.Errorf("archiving run %s: stream %s: %w", run, store.StreamName(), err)
	}
	a, err := encode(ctx, st, eventlog.JetStream(store), run, evs)
	if err != nil {
		return nil, err
	}
	if a.n < len(evs) {
		return nil, fmt.Errorf("archiving run %s: read %d of its %d events; the run was not removed", run, a.n, len(evs))
	}
	if err := archive.Put(ctx, run, a.data); err != nil {
		return nil, err
	}
	return a, nil
}

func cmpStatus(s projection.RunStatus) string {
	if s == projection.RunPending {
		return "not started"
	}
	return string(s)
}

// purger removes every trace of a run: its events, timers, snapshot and
// read-model entry. It looks each stream up once.
type purger struct {
	store   events.Store
	mu      sync.Mutex
	streams map[string]jetstream.Stream
}

func newPurger(store events.Store) *purger {
	return &purger{store: store, streams: map[string]jetstream.Stream{}}
}

// stream returns a stream, or nil when it does not exist.
func (p *purger) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.streams[name]; ok {
		return st, nil
	}
	st, err := eventlog.JetStream(p.store).Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.streams[name] = st
	return st, nil
}

func (p *purger) purge(ctx context.Context, run string) error {
	store := p.store
	targets := []struct{ stream, filter string }{
		{store.StreamName(), eventlog.RunFilter(run)},
		{eventlog.Must(store).TimerStream(), eventlog.ScheduleFilter(run)},
		{eventlog.Must(store).TimerStream(), eventlog.FiredSubject(run)},
		{"KV_" + snapshotsBucket, "$KV." + snapshotsBucket + "." + run},
		{bucketStream, subjectOf("*." + run)},
	}
	for i, t := range targets {
		st, err := p.stream(ctx, t.stream)
		if err == nil && st == nil {
			if i == 0 {
				return fmt.Errorf("removing run %s: stream %s does not exist", run, t.stream)
			}
			continue // no timers, snapshots or read model yet
		}
		if err == nil {
			err = st.Purge(ctx, jetstream.WithPurgeSubject(t.filter))
		}
		if err != nil {
			return fmt.Errorf("removing run %s: purging %s of stream %s: %w", run, t.filter, t.stream, err)
		}
	}
	return nil
}

// purgeSnapshot drops a run's snapshot, if there is one.
func (p *purger) purgeSnapshot(ctx context.Context, run string) error {
	st, err := p.stream(ctx, "KV_"+snapshotsBucket)
	if err == nil && st != nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+snapshotsBucket+"."+run))
	}
	if err != nil {
		return fmt.Errorf("restoring run %s: dropping its snapshot: %w", run, err)
	}
	return nil
}

// sweepConcurrency is how many runs Sweep removes at a time.
const sweepConcurrency = 16

// SweepResult says what Sweep did.
type SweepResult struct {
	// Expired counts the ended runs whose retention had passed.
	Expired int       `json:"expired"`
	Removed []Removed `json:"removed"`
	// Failed lists the runs that could not be removed, and why.
	Failed map[string]string `json:"failed,omitempty"`
	// Payloads is what a payloads sweep after it did ('weft admin
	// retention -orphans': SweepPayloads), if there was one.
	Payloads *PayloadSweep `json:"payloads,omitempty"`
}

// Sweep removes the ended runs whose retention passed by now (at most
// limit of them, 0: all), archiving each to archive first when it is not
// nil. A run that cannot be archived or removed is left as it is and
// reported; the others go on.
func Sweep(ctx context.Context, store events.Store, archive Archive, now time.Time, limit int, log *slog.Logger) (*SweepResult, error) {
	if log == nil {
		log = slog.Default()
	}
	m, err := Open(ctx, eventlog.JetStream(store))
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	expired, err := m.expired(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	if limit > 0 && len(expired) > limit {
		expired = expired[:limit]
	}
	res := &SweepResult{Expired: len(expired), Removed: []Removed{}}
	p := newPurger(store)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, sweepConcurrency)
	for _, run := range expired {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := remove(ctx, p, run, archive)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if res.Failed == nil {
					res.Failed = map[string]string{}
				}
				res.Failed[run] = err.Error()
				log.Warn("retention: a run was not removed", logattr.RunID, run, logattr.Error, err)
				return
			}
			res.Removed = append(res.Removed, *r)
		})
	}
	wg.Wait()
	slices.SortFunc(res.Removed, func(a, b Removed) int { return cmp.Compare(a.RunID, b.RunID) })
	return res, nil
}

// expired lists the ended runs whose retention passed by now, oldest
// first.
func (m *Model) expired(ctx context.Context, now time.Time) ([]string, error) {
	var out []Summary
	err := m.each(ctx, []projection.RunStatus{projection.RunCompleted, projection.RunFailed, projection.RunCancelled}, func(s Summary) {
		if s.Status.Ended() && !s.ExpiresAt.IsZero() && !s.ExpiresAt.After(now) {
			out = append(out, s)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Summary) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	ids := make([]string, len(out))
	for i, s := range out {
		ids[i] = s.RunID
	}
	return ids, nil
}

// Read returns a run's events from the live log, or, when the log has no
// such run and archive is not nil, from the archive.
func Read(ctx context.Context, store events.Store, archive Archive, run string) ([]*events.Event, error) {
	evs, err := store.Read(ctx, run, 0, 0)
	if err == nil || archive == nil || !errors.Is(err, events.ErrRunNotFound) {
		return evs, err
	}
	data, aerr := archive.Get(ctx, run)
	if errors.Is(aerr, ErrNotArchived) {
		return nil, err
	}
	if aerr != nil {
		return nil, aerr
	}
	return Decode(run, data)
}
