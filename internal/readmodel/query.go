package readmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// Filter keeps the runs a query (ParseFilter) is true for.
	Filter *Filter
}

// Page is one page of a listing, newest run first: by start time, ties by
// run id (a run id a user chose says nothing about when the run started,
// so ids alone cannot order runs).
type Page struct {
	Runs []Summary `json:"runs"`
	// Next is the cursor of the next page; empty on the last. It names
	// the last run of this page by its start time and id, so that runs
	// that start while a listing is paged through never shift its pages:
	// they sort before the cursor.
	Next string `json:"next,omitempty"`
	// Total counts the runs the query selects, over all pages.
	Total int `json:"total"`
}

func (q Query) keep(s *Summary, now time.Time) bool {
	if q.Filter != nil && !q.Filter.Match(s, now) {
		return false
	}
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
	if q.Cursor != "" {
		if _, err := ParseCursor(q.Cursor); err != nil {
			errs = append(errs, err)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		errs = append(errs, fmt.Errorf("time range: until %s is not after since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339)))
	}
	return errors.Join(errs...)
}

// List answers a query from the read model alone: it reads the summaries
// of the statuses asked for (batched direct gets of the bucket's stream,
// one subject filter a status), keeps those the query selects, and sorts
// them newest first by start time. Ordering by start time needs every
// selected run's start, so a page costs a read of the selection, not of
// the page; the read model holds small summaries, and retention bounds
// how many.
func (m *Model) List(ctx context.Context, q Query) (*Page, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	statuses := withWaiting(q.Statuses)
	if len(statuses) == 0 {
		statuses = []projection.RunStatus{"*"}
	}
	byRun := map[string]Summary{}
	now := time.Now()
	err := m.each(ctx, statuses, func(s Summary) {
		if !q.keep(&s, now) {
			return
		}
		// A run met twice (it moved on while this read, and Put writes
		// the new key before it purges the old): the later.
		if old, ok := byRun[s.RunID]; !ok || statusRank(s.Status) >= statusRank(old.Status) {
			byRun[s.RunID] = s
		}
	})
	if err != nil {
		return nil, err
	}
	runs := slices.SortedFunc(maps.Values(byRun), Newer)
	page := &Page{Total: len(runs)}
	page.Runs, page.Next = cut(runs, q)
	return page, nil
}

// Count counts the runs a query selects (its limit and cursor aside).
// A query on statuses alone is answered from the bucket's subject index
// (the keys), without reading a summary.
func (m *Model) Count(ctx context.Context, q Query) (int, error) {
	q.Limit, q.Cursor = 0, ""
	if err := q.Validate(); err != nil {
		return 0, err
	}
	if q.Graph != "" || !q.Since.IsZero() || !q.Until.IsZero() || len(q.Attrs) > 0 || q.Filter != nil {
		p, err := m.List(ctx, q)
		if err != nil {
			return 0, err
		}
		return p.Total, nil
	}
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []projection.RunStatus{"*"}
	}
	seen := map[string]bool{}
	for _, st := range statuses {
		info, err := m.st.Info(ctx, jetstream.WithSubjectFilter(subjectOf(key(st, "*"))))
		if err != nil {
			return 0, fmt.Errorf("counting the read model: %w", err)
		}
		for subj := range info.State.Subjects {
			// A run met twice is moving on (Put writes the new key before
			// it purges the old): counted once.
			if _, run, ok := strings.Cut(strings.TrimPrefix(subj, subjectOf("")), "."); ok {
				seen[run] = true
			}
		}
	}
	return len(seen), nil
}

// Newer orders summaries newest first: by start time, latest first, then
// by run id, greatest first.
func Newer(a, b Summary) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.RunID, a.RunID)
}

// Cursor is a position in a listing: after the run of this start time and
// id.
type Cursor struct {
	StartedAt time.Time
	RunID     string
}

// String is the cursor as Page.Next gives it: "<unix nanoseconds>-<run>".
func (c Cursor) String() string {
	ns := int64(0)
	if !c.StartedAt.IsZero() {
		ns = c.StartedAt.UnixNano()
	}
	return strconv.FormatInt(ns, 10) + "-" + c.RunID
}

// CursorOf is the cursor after s.
func CursorOf(s Summary) Cursor { return Cursor{StartedAt: s.StartedAt, RunID: s.RunID} }

// ParseCursor reads a cursor Page.Next gave.
func ParseCursor(s string) (Cursor, error) {
	ns, run, ok := strings.Cut(s, "-")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || n < 0 || !validRun(run) {
		return Cursor{}, fmt.Errorf("cursor %q: not a cursor a listing gave (want <unix nanoseconds>-<run id>)", s)
	}
	c := Cursor{RunID: run}
	if n > 0 {
		c.StartedAt = time.Unix(0, n).UTC()
	}
	return c, nil
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
func cut(runs []Summary, q Query) ([]Summary, string) {
	if q.Cursor != "" {
		c, _ := ParseCursor(q.Cursor) // Validate checked it
		after := Summary{RunID: c.RunID, StartedAt: c.StartedAt}
		i, _ := slices.BinarySearchFunc(runs, after, Newer)
		for i < len(runs) && Newer(runs[i], after) <= 0 {
			i++
		}
		runs = runs[i:]
	}
	if q.Limit > 0 && len(runs) > q.Limit {
		return runs[:q.Limit], CursorOf(runs[q.Limit-1]).String()
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
