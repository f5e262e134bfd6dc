package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// RunSummary is one line of List.
type RunSummary struct {
	RunID  string               `json:"runId"`
	Status projection.RunStatus `json:"status"`
	// Graph and StartedAt come from the run-started event; List fills them
	// in only when asked (WithDetails).
	Graph     string    `json:"graph,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// ForkedFrom is the run and point a forked run was forked from (with
	// WithDetails).
	ForkedFrom *events.ForkRef `json:"forkedFrom,omitempty"`
}

// ListOption configures List.
type ListOption func(*listOptions)

type listOptions struct {
	limit    int
	statuses []projection.RunStatus
	details  bool
}

// WithLimit returns at most n runs, the newest (default: all).
func WithLimit(n int) ListOption { return func(o *listOptions) { o.limit = n } }

// WithStatus keeps only runs in one of the given statuses.
func WithStatus(statuses ...projection.RunStatus) ListOption {
	return func(o *listOptions) { o.statuses = append(o.statuses, statuses...) }
}

// WithDetails fills in each listed run's graph name and start time, at the
// cost of reading its run-started event (one direct get per listed run).
func WithDetails() ListOption { return func(o *listOptions) { o.details = true } }

// List lists runs, newest first.
//
// It reads the stream's subject index, not the runs' histories: the runs
// are the subjects of run-started events, and a run's status follows from
// which terminal decision subject it has (or its cancel-request subject), so
// listing costs a handful of requests whatever the runs' sizes. Runs are
// ordered by run id, descending, which is newest first for ids from
// events.NewRunID; with WithDetails the page is then ordered by start, the
// newest first.
func (c *Client) List(ctx context.Context, opts ...ListOption) ([]RunSummary, error) {
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	st, err := c.eventsStream(ctx)
	if err != nil {
		return nil, err
	}
	runs, err := runsOn(ctx, st, events.KindFilter(events.RunStarted))
	if err != nil {
		return nil, err
	}
	status := make(map[string]projection.RunStatus, len(runs))
	for _, id := range runs {
		status[id] = projection.RunRunning
	}
	// Later kinds win: a cancel request is overridden by any end.
	for _, k := range []struct {
		t events.Type
		s projection.RunStatus
	}{
		{events.RunCancelRequested, projection.RunCancelling},
		{events.RunCancelled, projection.RunCancelled},
		{events.RunFailed, projection.RunFailed},
		{events.RunCompleted, projection.RunCompleted},
	} {
		ids, err := runsOn(ctx, st, events.KindFilter(k.t))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if _, ok := status[id]; ok {
				status[id] = k.s
			}
		}
	}
	out := make([]RunSummary, 0, len(runs))
	for _, id := range runs {
		if len(o.statuses) > 0 && !slices.Contains(o.statuses, status[id]) {
			continue
		}
		out = append(out, RunSummary{RunID: id, Status: status[id]})
	}
	slices.SortFunc(out, func(a, b RunSummary) int { return strings.Compare(b.RunID, a.RunID) })
	if o.limit > 0 && len(out) > o.limit {
		out = out[:o.limit]
	}
	if o.details {
		if err := c.details(ctx, st, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runsOn returns the run ids of the subjects matching filter, from the
// stream's subject index.
func runsOn(ctx context.Context, st jetstream.Stream, filter string) ([]string, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("listing subjects %s: %w", filter, err)
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if id, ok := events.RunOf(subj); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// details reads the run-started events of runs, a few at a time, and orders
// runs by start, newest first.
func (c *Client) details(ctx context.Context, st jetstream.Stream, runs []RunSummary) error {
	seqs := make([]uint64, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &runs[i]
			m, err := st.GetLastMsgForSubject(ctx, events.StartedSubject(r.RunID))
			if err != nil {
				errs[i] = fmt.Errorf("reading the start of run %s: %w", r.RunID, err)
				return
			}
			e, err := events.Decode(m.Subject, m.Header, m.Data)
			if err != nil {
				errs[i] = fmt.Errorf("reading the start of run %s: %w", r.RunID, err)
				return
			}
			p, _ := e.Payload()
			if d, ok := p.(*events.RunStartedData); ok {
				r.Graph, r.ForkedFrom = d.GraphName, d.Fork
			}
			r.StartedAt, seqs[i] = e.Time, m.Sequence
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case seqs[a] > seqs[b]:
			return -1
		case seqs[a] < seqs[b]:
			return 1
		}
		return 0
	})
	sorted := make([]RunSummary, len(runs))
	for i, j := range order {
		sorted[i] = runs[j]
	}
	copy(runs, sorted)
	return nil
}
