package ui

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/worker"
)

// consumersTimeout bounds the listing of the queues' consumers: a role
// that may not list them gets no answer at all, only a timeout.
const consumersTimeout = 3 * time.Second

type workersView struct {
	Queues       []queueView      `json:"queues"`
	Coordinators coordinatorsView `json:"coordinators"`
	// Limits and Rates are the concurrency and rate limits in use, from
	// the flow bucket, as 'weft queues' lists them.
	Limits []limitView      `json:"limits"`
	Rates  []flow.RateState `json:"rates"`
	Note   string           `json:"note,omitempty"`
}

// limitView is one (limit, key) of a concurrency limit in use: a node's,
// or a graph's run limit (its holders and waiters are runs, node START).
type limitView struct {
	Limit   string `json:"limit"`
	Key     string `json:"key"`
	Max     int    `json:"max"`
	Held    int    `json:"held"`
	Waiting int    `json:"waiting"`
	// Runs says the limit is a graph's run limit.
	Runs         bool       `json:"runs,omitempty"`
	OldestWaiter *time.Time `json:"oldestWaiter"`
	Holders      []string   `json:"holders"`
	Waiters      []string   `json:"waiters"`
}

type queueView struct {
	Name    string       `json:"name"`
	Workers []workerView `json:"workers"`
	// Waiting counts work items not yet delivered; nil when the
	// consumers could not be read.
	Waiting *uint64  `json:"waiting"`
	Types   []string `json:"types"`
}

type workerView struct {
	Name      string    `json:"name"`
	Types     []string  `json:"types"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
}

type coordinatorsView struct {
	Alive    bool       `json:"alive"`
	LastSeen *time.Time `json:"lastSeen"`
	Window   string     `json:"window"`
}

// workers answers GET /api/workers: the task queues, the live workers on
// each and the work waiting on each.
func (s *server) workers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readCtx(r)
	defer cancel()
	live, err := s.cl.LiveWorkers(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out workersView
	waiting, err := s.queueWaiting(ctx)
	if err != nil {
		out.Note = "the work waiting on each queue is unknown: the queues' consumers could not be read (" + err.Error() + "); Weft's client and ui roles may not list them"
	}
	out.Queues = queueViews(live, waiting)
	out.Limits, out.Rates, err = s.limits(ctx)
	if err != nil {
		out.Note = strings.TrimPrefix(out.Note+"; ", "; ") + "the limits in use are unknown: the flow bucket could not be read (" + err.Error() + ")"
	}
	co, err := s.cl.Coordinators(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out.Coordinators = coordinatorsView{Alive: co.AliveAt(time.Now()), Window: co.Window.String()}
	if !co.LastSeen.IsZero() {
		out.Coordinators.LastSeen = &co.LastSeen
	}
	writeJSON(w, http.StatusOK, out)
}

// queueViews is the task queues the live workers announce, and those
// with work waiting (by queue), with their workers and node types: the
// default queue first, then by name.
func queueViews(live []worker.Announcement, waiting map[string]uint64) []queueView {
	queues := map[string]*queueView{}
	queue := func(name string) *queueView {
		q := queues[name]
		if q == nil {
			q = &queueView{Name: name, Workers: []workerView{}, Types: []string{}}
			queues[name] = q
		}
		return q
	}
	for _, a := range live {
		for _, name := range a.Queues {
			q := queue(name)
			q.Workers = append(q.Workers, workerView{Name: a.Name, Types: a.Types, Started: a.Started, Heartbeat: a.Heartbeat})
			for _, t := range a.Types {
				if !slices.Contains(q.Types, t) {
					q.Types = append(q.Types, t)
				}
			}
		}
	}
	for name, n := range waiting {
		queue(name).Waiting = &n
	}
	out := []queueView{}
	for _, q := range queues {
		slices.Sort(q.Types)
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b queueView) int {
		switch {
		case a.Name == b.Name:
			return 0
		case a.Name == worker.DefaultQueue:
			return -1
		case b.Name == worker.DefaultQueue:
			return 1
		case a.Name < b.Name:
			return -1
		}
		return 1
	})
	return out
}

// consumersRetry is how long the server stops trying to list the queues'
// consumers after a failure: a role that may not list them gets no
// answer, only a timeout, and the page should not wait for it each time.
const consumersRetry = time.Minute

// queueWaiting reads, for each task queue's consumer, the work items it
// has not delivered yet.
func (s *server) queueWaiting(ctx context.Context) (map[string]uint64, error) {
	if s.cfg.NoConsumerList {
		return nil, errors.New("this server's NATS user may not list them")
	}
	s.consumersMu.Lock()
	failed, at := s.consumersErr, s.consumersAt
	s.consumersMu.Unlock()
	if failed != nil && time.Since(at) < consumersRetry {
		return nil, failed
	}
	out, err := s.listQueueConsumers(ctx)
	s.consumersMu.Lock()
	s.consumersErr, s.consumersAt = err, time.Now()
	s.consumersMu.Unlock()
	return out, err
}

func (s *server) listQueueConsumers(ctx context.Context) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, consumersTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Store.StreamName())
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		if q, ok := workqueue.QueueName(ci.Name); ok {
			out[q] = ci.NumPending
		}
	}
	if err := lister.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// limits reads the concurrency and rate limits in use from the flow
// bucket (none before a coordinator made it).
func (s *server) limits(ctx context.Context) ([]limitView, []flow.RateState, error) {
	limits, rates := []limitView{}, []flow.RateState{}
	l, err := flow.Lookup(ctx, s.js)
	if errors.Is(err, flow.ErrNoBucket) {
		return limits, rates, nil
	}
	if err != nil {
		return limits, rates, err
	}
	es, err := l.Entries(ctx)
	if err != nil {
		return limits, rates, err
	}
	for _, e := range es {
		v := limitView{Limit: e.Limit, Key: e.Key, Max: e.Max, Held: len(e.Holders), Waiting: e.Waiting(), Holders: []string{}, Waiters: []string{}}
		for _, h := range e.Holders {
			v.Runs = v.Runs || h.Node == flow.RunNode
			v.Holders = append(v.Holders, h.ID())
		}
		for _, h := range e.Waiters {
			v.Runs = v.Runs || h.Node == flow.RunNode
			v.Waiters = append(v.Waiters, h.ID())
		}
		if len(e.Waiters) > 0 {
			since := e.Waiters[0].Since
			v.OldestWaiter = &since
		}
		limits = append(limits, v)
	}
	rs, err := l.Rates(ctx)
	if err != nil {
		return limits, rates, err
	}
	return limits, append(rates, rs...), nil
}
