package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/worker"
)

// Queue is a task queue as operators see it: the live workers on it, the
// node types they serve there, and its work: waiting (not yet delivered
// to a worker) and in flight (delivered, not yet acknowledged).
type Queue struct {
	Name    string                `json:"name"`
	Workers []worker.Announcement `json:"workers"`
	Types   []string              `json:"types"`
	// Waiting and InFlight are nil when the queue's consumer could not be
	// read (QueuesNote says why).
	Waiting  *uint64 `json:"waiting"`
	InFlight *uint64 `json:"inFlight"`
}

// queuesTimeout bounds the listing of the queues' consumers: a role
// that may not list them gets no answer, only a timeout.
const queuesTimeout = 3 * time.Second

// Queues lists the task queues that have live workers or work items,
// the default queue first, then by name. The work counts come from the
// queues' consumers; a role that may not list them (Weft's client and ui
// roles) gets the queues and workers without counts, and note says why.
func (c *Client) Queues(ctx context.Context) (queues []Queue, note string, err error) {
	live, err := c.LiveWorkers(ctx)
	if err != nil {
		return nil, "", err
	}
	byName := map[string]*Queue{}
	queue := func(name string) *Queue {
		if byName[name] == nil {
			byName[name] = &Queue{Name: name, Workers: []worker.Announcement{}, Types: []string{}}
		}
		return byName[name]
	}
	for _, a := range live {
		for _, name := range a.Queues {
			q := queue(name)
			q.Workers = append(q.Workers, a)
			for _, t := range a.Types {
				if !slices.Contains(q.Types, t) {
					q.Types = append(q.Types, t)
				}
			}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, queuesTimeout)
	defer cancel()
	js := eventlog.JetStream(c.store)
	st, err := js.Stream(lctx, c.store.StreamName())
	if err == nil {
		lister := st.ListConsumers(lctx)
		for ci := range lister.Info() {
			if name, ok := workqueue.QueueName(ci.Name); ok {
				waiting, inFlight := ci.NumPending, uint64(ci.NumAckPending)
				q := queue(name)
				q.Waiting, q.InFlight = &waiting, &inFlight
			}
		}
		err = lister.Err()
	}
	if err != nil {
		note = fmt.Sprintf("the work on each queue is unknown: its consumer could not be read (%v); Weft's client and ui roles may not list consumers", err)
	}
	for _, q := range byName {
		slices.Sort(q.Types)
		queues = append(queues, *q)
	}
	slices.SortFunc(queues, func(a, b Queue) int {
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
	return queues, note, nil
}
