package client

import (
	"context"
	"errors"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/projection"
)

// RunSummary is one line of List: a run's entry in the read model of
// runs, as its coordinator last wrote it. Its fields: RunID; Graph and
// GraphDigest, the run's graph; Status (a projection.RunStatus);
// StartedAt and EndedAt; Parent, the run that started it as a child;
// Attrs, its search attributes (the graph's searchAttributes, read from
// the run's invocation state, else its input); Retention and ExpiresAt,
// how long it is kept once ended and when it may be removed; Terminated,
// set when 'weft terminate' ended it; ForkedFrom, the run and point it was
// forked from; Restored, when it was last put back from an archive. Its
// JSON form is what the UI and 'weft -o json list' show.
type RunSummary = readmodel.Summary

// RunPage is one page of ListPage, newest run first: Runs, Next (the
// cursor of the next page, for WithCursor; empty on the last) and Total
// (the runs the options select, over all pages).
type RunPage = readmodel.Page

// ListOption configures List.
type ListOption func(*listOptions)

// listOptions is the read model's query that List's options fill in.
type listOptions struct {
	readmodel.Query
	query *string // WithQuery's, compiled by compile()
}

// compile is the read model's query the options ask for.
func (o *listOptions) compile() (readmodel.Query, error) {
	q := o.Query
	if o.query != nil {
		f, err := readmodel.ParseFilter(*o.query)
		if err != nil {
			return q, err
		}
		q.Filter = f
	}
	return q, q.Validate()
}

// WithLimit returns at most n runs, the newest (default: all).
func WithLimit(n int) ListOption { return func(q *listOptions) { q.Limit = n } }

// WithStatus keeps only runs in one of the given statuses.
func WithStatus(statuses ...projection.RunStatus) ListOption {
	return func(q *listOptions) { q.Statuses = append(q.Statuses, statuses...) }
}

// WithGraph keeps only runs of the graph of this name.
func WithGraph(name string) ListOption { return func(q *listOptions) { q.Graph = name } }

// WithStartedBetween keeps only runs started at or after since and before
// until; a zero time leaves that side open.
func WithStartedBetween(since, until time.Time) ListOption {
	return func(q *listOptions) { q.Since, q.Until = since, until }
}

// WithAttr keeps only runs whose search attribute name has this value
// (see the graph's searchAttributes).
func WithAttr(name, value string) ListOption {
	return func(q *listOptions) {
		if q.Attrs == nil {
			q.Attrs = map[string]string{}
		}
		q.Attrs[name] = value
	}
}

// WithQuery keeps only the runs a query is true for: a CEL expression
// over a run's summary (id, status, terminated, graph, digest, started,
// ended, attrs, parent, forkedFrom, schedule, trigger, now), which also
// takes AND, OR, NOT and = (runs.FilterHelp has the whole language):
//
//	status = "failed" AND graph = "billing" AND started > "2026-11-01"
//
// A query that does not compile makes List return a *QueryError that
// says where.
func WithQuery(query string) ListOption {
	return func(q *listOptions) { q.query = &query }
}

// QueryError is a query that does not compile: its line, column and why.
type QueryError = readmodel.FilterError

// WithCursor continues a listing after the page whose Next it is.
func WithCursor(cursor string) ListOption { return func(q *listOptions) { q.Cursor = cursor } }

// WithDetails is kept for callers of older versions: every summary now
// carries the run's graph and start.
func WithDetails() ListOption { return func(*listOptions) {} }

// List lists runs, newest first (by start time, ties by run id), from the read model of runs (the KV
// bucket "weft-runs", kept by the coordinators): it never reads the events
// stream, so its cost does not grow with the runs' histories. A run shows
// up once its coordinator has handled its run-started, and its status
// follows the coordinator's. A missing bucket is an error wrapping
// ErrNoReadModel. ListPage gives the cursor of the next page and the
// count of the runs selected.
func (c *Client) List(ctx context.Context, opts ...ListOption) ([]RunSummary, error) {
	p, err := c.ListPage(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return p.Runs, nil
}

// ListPage is List with the cursor of the next page and the count of the
// runs the options select, over all pages.
func (c *Client) ListPage(ctx context.Context, opts ...ListOption) (*RunPage, error) {
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	q, err := o.compile()
	if err != nil {
		return nil, err
	}
	m, err := c.readModel(ctx)
	if err != nil {
		return nil, err
	}
	return m.List(ctx, q)
}

// Count counts the runs the options select (a limit or cursor aside). On
// statuses alone it reads only the read model's keys.
func (c *Client) Count(ctx context.Context, opts ...ListOption) (int, error) {
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	q, err := o.compile()
	if err != nil {
		return 0, err
	}
	m, err := c.readModel(ctx)
	if err != nil {
		return 0, err
	}
	return m.Count(ctx, q)
}

// Summary returns a run's entry in the read model; a run it has no entry
// for is an error wrapping ErrNotInReadModel.
func (c *Client) Summary(ctx context.Context, run string) (*RunSummary, error) {
	m, err := c.readModel(ctx)
	if err != nil {
		return nil, err
	}
	return m.Get(ctx, run)
}

// readModel opens the read model once.
func (c *Client) readModel(ctx context.Context) (*readmodel.Model, error) {
	if err := c.inNamespace(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs != nil {
		return c.runs, nil
	}
	m, err := readmodel.Open(ctx, eventlog.JetStream(c.store))
	if err != nil {
		return nil, err
	}
	c.runs = m
	return m, nil
}

// archive returns the archive removed runs are read from: the one given
// (WithArchive), else the default Object Store bucket when it exists.
func (c *Client) archive(ctx context.Context) Archive {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arch != nil || c.archChecked {
		return c.arch
	}
	a, err := readmodel.OpenObjectStore(ctx, eventlog.JetStream(c.store), readmodel.ArchiveBucket, c.store.StreamName(), false)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.archChecked = true
		}
		return nil
	}
	c.arch = a
	return a
}
