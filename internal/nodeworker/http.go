package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/telemetry"
)

// probe answers the daemon's /readyz (with -http) and reports its queues'
// gauges. The worker is ready when it is connected to NATS and the
// consumer of every queue it serves exists (the worker pulls from them;
// until they do, it sets them up).
type probe struct {
	js     atomic.Pointer[jetstream.JetStream] // set once connected
	stream string
	queues []string
}

func (p *probe) ready(ctx context.Context) error {
	jsp := p.js.Load()
	if jsp == nil || !(*jsp).Conn().IsConnected() {
		return errors.New("not connected to NATS")
	}
	js := *jsp
	for _, q := range p.queues {
		if _, err := js.Consumer(ctx, p.stream, natsconn.QueueConsumerName(q)); err != nil {
			return fmt.Errorf("queue %s: its consumer %s is not bound: %w", q, natsconn.QueueConsumerName(q), err)
		}
	}
	return nil
}

// queueStats reads, for each queue, the work items not yet delivered and
// the age of the oldest of them: the first work item after the last one
// delivered.
func (p *probe) queueStats(ctx context.Context) []telemetry.QueueStat {
	jsp := p.js.Load()
	if jsp == nil {
		return nil
	}
	js := *jsp
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, p.stream)
	if err != nil {
		return nil
	}
	var out []telemetry.QueueStat
	for _, q := range p.queues {
		c, err := js.Consumer(ctx, p.stream, natsconn.QueueConsumerName(q))
		if err != nil {
			continue
		}
		info := c.CachedInfo()
		s := telemetry.QueueStat{Queue: q, Depth: int64(info.NumPending)}
		if info.NumPending > 0 {
			if m, err := st.GetMsg(ctx, info.Delivered.Stream+1, jetstream.WithGetMsgSubject(eventlog.QueueFilter(q))); err == nil {
				s.Oldest = max(time.Since(m.Time), 0)
			}
		}
		out = append(out, s)
	}
	return out
}

// probes are the probes of the daemon's connections: ready when every one
// is.
type probes []*probe

func (ps probes) ready(ctx context.Context) error {
	for _, p := range ps {
		if err := p.ready(ctx); err != nil {
			return err
		}
	}
	return nil
}
