package readmodel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// A restore appends up to restoreChain messages one by one, more as atomic
// batches of up to restoreBatch (the server's limit).
const (
	restoreChain = 8
	restoreBatch = 1000
)

// Restored says what Restore did.
type Restored struct {
	RunID string `json:"runId"`
	// Events is how many messages were put back.
	Events int `json:"events"`
	// From names the archive the run came from.
	From string `json:"from"`
	// Status is the restored run's status, as its fold says.
	Status projection.RunStatus `json:"status"`
	// ExpiresAt is when retention may remove it again: its retention,
	// counted from the restore.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Restore puts an archived run back into the events stream, live again:
// its messages republished in log order on their subjects, with their
// headers and bodies (so their CloudEvents ids, times and trace context),
// each marked with eventlog.HdrRestored carrying its original stored time,
// which the fold reads in place of the stream's (events.DecodeStored).
// Stream sequences are new; the fold keeps only their order, so the
// restored run folds to the state it had, but for LastSeq. Headers the
// server acts on (Nats-*: de-duplication ids, expected sequences, batch
// markers) are not republished.
//
// Each message is checked to follow the one before over the run's
// subjects, the first to find the run absent from the log: a run that is
// live is refused (ErrLive), nothing else can slip in between, and two
// restores of one run do not both land. Up to 8 messages go one by one,
// more as atomic batches of up to 1000. The coordinators and workers pass
// restored messages over (they are history, not work). A restore cut
// short leaves a prefix of restored messages, which Restore, called
// again, completes.
//
// Before, it puts the large payloads the archive carries back into the
// payloads bucket, drops the run's snapshot (its sequences are the old ones)
// and writes the run's read-model entry, marked restored (Summary.Restored:
// the coordinators pass a message marked restored over only for a run so
// marked, since the header is any writer's), with def as the
// coordinators' default retention: the run is kept for its retention
// counted from the restore. Restoring needs the admin's rights.
func Restore(ctx context.Context, store events.Store, archive Archive, run string, def time.Duration) (*Restored, error) {
	return restore(ctx, newPurger(store), archive, run, def)
}

func restore(ctx context.Context, p *purger, archive Archive, run string, def time.Duration) (*Restored, error) {
	if !validRun(run) {
		return nil, fmt.Errorf("restoring run %q: not a run id", run)
	}
	if archive == nil {
		return nil, fmt.Errorf("restoring run %s: no archive given", run)
	}
	if def < 0 {
		return nil, fmt.Errorf("restoring run %s: retention %s must not be negative", run, def)
	}
	store := p.store
	recs, objects, folded, err := archivedRun(ctx, store, archive, run)
	if err != nil {
		return nil, err
	}
	if err := restorePayloads(ctx, store, run, objects); err != nil {
		return nil, err
	}
	from, last, err := restoredPrefix(ctx, store, run, recs)
	if err != nil {
		return nil, err
	}
	if from == 0 {
		if err := p.purgeSnapshot(ctx, run); err != nil {
			return nil, err
		}
	}
	// The read-model entry goes first: marked restored, it is what lets
	// the coordinators pass the run's restored messages over.
	m, err := Ensure(ctx, eventlog.JetStream(store), store.StreamName(), nil)
	if err != nil {
		return nil, fmt.Errorf("restoring run %s: %w", run, err)
	}
	sum := restoredSummary(Summarize(folded, def), time.Now().UTC())
	if err := m.Put(ctx, sum, true); err != nil {
		return nil, fmt.Errorf("restoring run %s: %w", run, err)
	}
	if last, err = republish(ctx, store, run, recs[from:], last); err != nil {
		if errors.Is(err, events.ErrConflict) {
			return nil, fmt.Errorf("restoring run %s: %w: someone wrote to it while it was being restored (%v)", run, ErrLive, err)
		}
		return nil, fmt.Errorf("restoring run %s: %w", run, err)
	}
	evs, err := store.ReadThrough(ctx, run, 0, last)
	if err != nil {
		return nil, fmt.Errorf("restoring run %s: reading it back: %w", run, err)
	}
	if len(evs) != len(recs) {
		return nil, fmt.Errorf("restoring run %s: the log holds %d of its %d messages", run, len(evs), len(recs))
	}
	return &Restored{RunID: run, Events: len(recs), From: archive.String(), Status: projection.Fold(evs).Status, ExpiresAt: sum.ExpiresAt}, nil
}

// restorePayloads puts the payload objects an archive carries back into
// the payloads bucket, before the run's messages: a reader that sees a
// restored event finds its object.
func restorePayloads(ctx context.Context, store events.Store, run string, objects map[string][]byte) error {
	for name, b := range objects {
		if err := eventlog.RestorePayload(ctx, store, run, name, b); err != nil {
			return fmt.Errorf("restoring run %s: %w", run, err)
		}
	}
	return nil
}

// archivedRun reads run's records from archive, the payload objects it
// carries, and their fold: the run must have ended.
func archivedRun(ctx context.Context, store events.Store, archive Archive, run string) ([]record, map[string][]byte, *projection.State, error) {
	data, err := archive.Get(ctx, run)
	if errors.Is(err, ErrNotArchived) {
		if _, lerr := store.LastSeq(ctx, run); lerr == nil {
			return nil, nil, nil, fmt.Errorf("restoring run %s: %w: it is in the log (and not in %s)", run, ErrLive, archive)
		}
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("restoring run %s: %w", run, err)
	}
	recs, objects, err := decodeRecords(run, data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("restoring run %s: %w", run, err)
	}
	// The engine passes restored messages over, so a run that had not
	// ended would never go on: only ended runs are archived, and only
	// they come back.
	folded := projection.Fold(decodeEvents(run, recs, objects))
	if !folded.Status.Ended() {
		return nil, nil, nil, fmt.Errorf("restoring run %s: %w in %s (status %s): the engine does not take up restored runs", run, ErrNotEnded, archive, cmpStatus(folded.Status))
	}
	return recs, objects, folded, nil
}

// republish appends an archived run's messages after sequence last, each
// checked to follow the one before over the run's subjects: up to
// restoreChain of them one by one, more as atomic batches of up to
// restoreBatch (an atomic batch costs the server a temporary store, more
// than a few single appends). It returns the sequence of the last.
func republish(ctx context.Context, store events.Store, run string, recs []record, last uint64) (uint64, error) {
	js := eventlog.JetStream(store)
	expect := func(m *nats.Msg, seq uint64) *nats.Msg {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, eventlog.RunFilter(run))
		return m
	}
	if len(recs) <= restoreChain {
		for _, r := range recs {
			ack, err := js.PublishMsg(ctx, expect(restoredMsg(r), last))
			if err != nil {
				var apiErr *jetstream.APIError
				if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
					return 0, fmt.Errorf("%w: %v", events.ErrConflict, err)
				}
				return 0, err
			}
			last = ack.Sequence
		}
		return last, nil
	}
	for start := 0; start < len(recs); start += restoreBatch {
		chunk := recs[start:min(start+restoreBatch, len(recs))]
		msgs := make([]*nats.Msg, len(chunk))
		for i, r := range chunk {
			msgs[i] = restoredMsg(r)
		}
		expect(msgs[0], last)
		var err error
		if last, err = eventlog.PublishAtomic(ctx, store, msgs); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// restoredPrefix looks at the run in the live log: absent, the restore
// starts at the first message; a prefix of the archive put back by a
// restore cut short, it goes on after it (last is the sequence the next
// batch is checked against). Anything else is ErrLive.
func restoredPrefix(ctx context.Context, store events.Store, run string, recs []record) (from int, last uint64, err error) {
	live, err := store.Read(ctx, run, 0, 0)
	if errors.Is(err, events.ErrRunNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("restoring run %s: %w", run, err)
	}
	if len(live) < len(recs) {
		prefix := true
		for i, e := range live {
			r := recs[i]
			if e.Restored.IsZero() || e.ID != r.Header.Get("ce-id") || e.Subject() != r.Subject {
				prefix = false
				break
			}
		}
		if prefix {
			return len(live), live[len(live)-1].Seq, nil
		}
	}
	return 0, 0, fmt.Errorf("restoring run %s: %w: the log holds %d of its events ('weft delete' it first to restore the archived copy)", run, ErrLive, len(live))
}

// restoredMsg is an archived message as it is put back: its subject,
// headers and body, without the headers the server acts on, marked
// restored with its original stored time.
func restoredMsg(r record) *nats.Msg {
	h := nats.Header{}
	for k, vs := range r.Header {
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			h[k] = vs
		}
	}
	// A message restored before keeps its first stamp, which its header
	// has (and which is older than the one it was archived with).
	if t, err := time.Parse(time.RFC3339Nano, h.Get(eventlog.HdrRestored)); err != nil || t.After(r.Stored) {
		h.Set(eventlog.HdrRestored, r.Stored.UTC().Format(time.RFC3339Nano))
	}
	return &nats.Msg{Subject: r.Subject, Header: h, Data: r.Data}
}

// summarizeLog is the read-model entry of a folded run whose events are
// evs: a restored run (its last event restored) is marked so, and kept
// for its retention counted from its restore.
func summarizeLog(s *projection.State, evs []*events.Event, def time.Duration) Summary {
	sum := Summarize(s, def)
	if len(evs) == 0 || evs[len(evs)-1].Restored.IsZero() {
		return sum
	}
	return restoredSummary(sum, evs[len(evs)-1].Restored)
}

// restoredSummary marks a summary restored at a time, and keeps the run
// for its retention from then.
func restoredSummary(sum Summary, at time.Time) Summary {
	sum.Restored = at.UTC()
	ret, err := time.ParseDuration(sum.Retention)
	if err == nil && !sum.ExpiresAt.IsZero() && at.Add(ret).After(sum.ExpiresAt) {
		sum.ExpiresAt = at.Add(ret).UTC()
	}
	return sum
}
