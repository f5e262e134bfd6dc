package readmodel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Reindexed says what Reindex did.
type Reindexed struct {
	// Indexed counts the runs of the log put in the read model.
	Indexed int `json:"indexed"`
	// Dropped counts entries of runs the log no longer has.
	Dropped int `json:"dropped"`
}

// Reindex rebuilds the read model from the log: every run of the events
// stream is folded and its summary put (def is the retention of runs that
// name none, as the coordinators' -retention), and entries of runs the log
// does not have are removed. It creates the bucket when it is missing.
// Runs that move on while it works are indexed again by their
// coordinators.
func Reindex(ctx context.Context, store events.Store, def time.Duration, log *slog.Logger) (*Reindexed, error) {
	if def < 0 {
		return nil, fmt.Errorf("reindex: retention %s must not be negative", def)
	}
	if log == nil {
		log = slog.Default()
	}
	js := eventlog.JetStream(store)
	m, err := Ensure(ctx, js, store.StreamName(), log)
	if err != nil {
		return nil, fmt.Errorf("reindex: %w", err)
	}
	ids, err := runIDs(ctx, js, store.StreamName())
	if err != nil {
		return nil, fmt.Errorf("reindex: %w", err)
	}
	inLog := make(map[string]bool, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		inLog[id] = true
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			evs, err := store.Read(ctx, id, 0, 0)
			if err == nil {
				s := projection.Fold(evs)
				if s.Status == projection.RunPending {
					return
				}
				err = m.Put(ctx, summarizeLog(s, evs, def), true)
			}
			if err != nil && !errors.Is(err, events.ErrRunNotFound) {
				errs[i] = fmt.Errorf("reindexing run %s: %w", id, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := &Reindexed{Indexed: len(ids)}
	info, err := m.st.Info(ctx, jetstream.WithSubjectFilter(subjectOf(">")))
	if err != nil {
		return nil, fmt.Errorf("reindex: %w", err)
	}
	for subj := range info.State.Subjects {
		_, run, ok := strings.Cut(strings.TrimPrefix(subj, subjectOf("")), ".")
		if ok && !inLog[run] {
			if err := m.Remove(ctx, run); err != nil {
				return nil, fmt.Errorf("reindex: %w", err)
			}
			out.Dropped++
		}
	}
	return out, nil
}

// runIDs lists the runs of the events stream: the subjects of their
// run-started events.
func runIDs(ctx context.Context, js jetstream.JetStream, stream string) ([]string, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(eventlog.KindFilter(events.RunStarted)))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if id, ok := eventlog.RunOf(subj); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
