package coordinatord

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/coordinator"
)

// probe answers the daemon's /readyz (with -http). The coordinator is
// ready when it is connected to NATS and takes part in deciding: it
// announced itself in the leases bucket within its lease duration, which
// it does only once its setup (the timers stream, the leases bucket) is
// done, and then holds its share of the partitions, each with its bound
// consumer, or stands by to take over those of a coordinator that stops.
// A standby is ready: it is what a second replica is for.
type probe struct {
	nc atomic.Pointer[nats.Conn]
	c  atomic.Pointer[coordinator.Coordinator]
}

func (p *probe) ready(context.Context) error {
	if nc := p.nc.Load(); nc == nil || !nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	c := p.c.Load()
	if c == nil {
		return errors.New("the coordinator is not running yet")
	}
	r := c.Readiness()
	if !r.Ready(time.Now()) {
		if r.Announced.IsZero() {
			return errors.New("the coordinator's setup is not done (timers stream, leases bucket)")
		}
		return fmt.Errorf("the coordinator could not announce itself for %s (longer than its lease duration %s)", time.Since(r.Announced).Round(time.Millisecond), r.LeaseTTL)
	}
	return nil
}

// probes are the probes of the namespaces a daemon serves: ready when
// every one is.
type probes []*probe

func (ps probes) ready(ctx context.Context) error {
	for _, p := range ps {
		if err := p.ready(ctx); err != nil {
			return err
		}
	}
	return nil
}
