package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/projection"
)

// Query selects runs from the read model. Zero fields select everything.
type Query struct {
	// Statuses keeps runs in one of them. Running includes waiting (a
	// running run that only waits is still running): a query for running
	// runs finds every run that neither ended nor is being cancelled,
	// as it did before waiting was a status.
	Statuses []projection.RunStatus
	// Graph keeps runs of the graph of this name.
	Graph string
	// Since and Until keep runs started at or after Since and before
	// Until.
	Since, Until time.Time
	// Attrs keeps runs whose search attributes have all these values.
	Attrs map[string]string
	// Limit is the page size (0: every run).
	Limit int
	// Cursor continues a listing: Page.Next of the page before.
	Cursor string
}

// Page is one page of a listing, newest run first (run ids from
// events.NewRunID sort by time).
type Page struct {
	Runs []Summary `json:"runs"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
	// Total counts the runs the query selects, over all pages.
	Total int `json:"total"`
}

// filtersValues says whether the query needs the runs' summaries to
// select them, or their keys suffice.
func (q Query) filtersValues() bool {
	return q.Graph != "" || !q.Since.IsZero() || !q.Until.IsZero() || len(q.Attrs) > 0
}

func (q Query) keep(s *Summary) bool {
	switch {
	case q.Graph != "" && s.Graph != q.Graph,
		!q.Since.IsZero() && s.StartedAt.Before(q.Since),
		!q.Until.IsZero() && !s.StartedAt.Before(q.Until):
		return false
	}
	for k, v := range q.Attrs {
		if s.Attrs[k] != v {
			return false
		}
	}
	return true
}

// Validate reports a query that cannot be answered.
func (q Query) Validate() error {
	var errs []error
	for _, s := range q.Statuses {
		if !slices.Contains(Statuses, s) {
			errs = append(errs, fmt.Errorf("status %q: want running, waiting, cancelling, completed, failed or cancelled", s))
		}
	}
	if q.Limit < 0 {
		errs = append(errs, fmt.Errorf("limit: want 0 or more, got %d", q.Limit))
	}
	if q.Cursor != "" && !validRun(q.Cursor) {
		errs = append(errs, fmt.Errorf("cursor %q: not a run id", q.Cursor))
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		errs = append(errs, fmt.Errorf("time range: until %s is not after since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339)))
	}
	return errors.Join(errs...)
}

// List answers a query from the read model alone. It reads the bucket's
// subject index for the keys of the statuses asked for; only when the
// query filters on graph, time or attributes does it read every selected
// status's summaries (batched direct gets of those keys), else it reads the
// summaries of the page only.
func (m *Model) List(ctx context.Context, q Query) (*Page, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	statuses := withWaiting(q.Statuses)
	if len(statuses) == 0 {
		statuses = []projection.RunStatus{"*"}
	}
	if q.filtersValues() {
		return m.listByValue(ctx, q, statuses)
	}
	var ids []string
	status := map[string]projection.RunStatus{}
	for _, st := range statuses {
		info, err := m.st.Info(ctx, jetstream.WithSubjectFilter(subjectOf(key(st, "*"))))
		if err != nil {
			return nil, fmt.Errorf("listing the read model: %w", err)
		}
		for subj := range info.State.Subjects {
			s, run, ok := strings.Cut(strings.TrimPrefix(subj, subjectOf("")), ".")
			if !ok {
				continue
			}
			// A run met twice moved on while Put replaced its entry
			// (the new key is written before the old is purged): the later.
			if old, met := status[run]; met && statusRank(old) > statusRank(projection.RunStatus(s)) {
				continue
			}
			ids = append(ids, run)
			status[run] = projection.RunStatus(s)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(b, a) })
	ids = slices.Compact(ids)
	page := &Page{Total: len(ids)}
	ids, page.Next = cut(ids, q, func(id string) string { return id })
	page.Runs = make([]Summary, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e, err := m.kv.Get(ctx, key(status[id], id))
			if err == nil {
				err = json.Unmarshal(e.Value(), &page.Runs[i])
			}
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				// It moved on meanwhile: its latest entry.
				var s *Summary
				if s, err = m.Get(ctx, id); err == nil {
					page.Runs[i] = *s
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("reading run %s from the read model: %w", id, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return page, nil
}

// listByValue reads the summaries of the statuses asked for and filters
// them.
func (m *Model) listByValue(ctx context.Context, q Query, statuses []projection.RunStatus) (*Page, error) {
	byRun := map[string]Summary{}
	err := m.each(ctx, statuses, func(s Summary) {
		if !q.keep(&s) {
			return
		}
		// A run met twice (it moved on while this read): the later.
		if old, ok := byRun[s.RunID]; !ok || statusRank(s.Status) >= statusRank(old.Status) {
			byRun[s.RunID] = s
		}
	})
	if err != nil {
		return nil, err
	}
	runs := slices.SortedFunc(maps.Values(byRun), func(a, b Summary) int { return cmp.Compare(b.RunID, a.RunID) })
	page := &Page{Total: len(runs)}
	page.Runs, page.Next = cut(runs, q, func(s Summary) string { return s.RunID })
	return page, nil
}

// StatusIn reports whether a run of status st is selected by statuses, as
// Query.Statuses selects: running selects waiting too; no statuses select
// every run.
func StatusIn(st projection.RunStatus, statuses []projection.RunStatus) bool {
	return len(statuses) == 0 || slices.Contains(withWaiting(statuses), st)
}

// withWaiting adds waiting to statuses that ask for running and not for
// it (see Query.Statuses).
func withWaiting(statuses []projection.RunStatus) []projection.RunStatus {
	if slices.Contains(statuses, projection.RunRunning) && !slices.Contains(statuses, projection.RunWaiting) {
		return append(slices.Clip(statuses), projection.RunWaiting)
	}
	return statuses
}

// cut applies the cursor and the limit to runs sorted newest first.
func cut[T any](runs []T, q Query, id func(T) string) ([]T, string) {
	if q.Cursor != "" {
		i, _ := slices.BinarySearchFunc(runs, q.Cursor, func(r T, c string) int { return cmp.Compare(c, id(r)) })
		for i < len(runs) && id(runs[i]) >= q.Cursor {
			i++
		}
		runs = runs[i:]
	}
	if q.Limit > 0 && len(runs) > q.Limit {
		return runs[:q.Limit], id(runs[q.Limit-1])
	}
	return runs, ""
}

// each calls fn with every summary of the statuses ("*": all), read with
// batched direct gets of the bucket's stream (direct.go): no consumer.
// Statuses are read in the order runs go through them, so that a run that
// moves on while they are read is met at least once.
func (m *Model) each(ctx context.Context, statuses []projection.RunStatus, fn func(Summary)) error {
	statuses = slices.Clone(statuses)
	slices.SortStableFunc(statuses, func(a, b projection.RunStatus) int { return cmp.Compare(statusRank(a), statusRank(b)) })
	for _, st := range statuses {
		err := eachDirect(ctx, m.nc, bucketStream, subjectOf(key(st, "*")), func(msg *nats.Msg) error {
			var s Summary
			if json.Unmarshal(msg.Data, &s) == nil {
				fn(s)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("reading the read model: %w", err)
		}
	}
	return nil
}

// statusRank orders statuses as a run goes through them. Running and
// waiting share a rank: a run goes from one to the other and back, so a
// run met under both while it moved is kept under the one read last.
func statusRank(s projection.RunStatus) int {
	switch {
	case s.Ended():
		return 2
	case s == projection.RunCancelling:
		return 1
	}
	return 0
}
