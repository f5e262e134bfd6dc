package coordinator

import (
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// noticeEnd publishes the ended notice of run (eventlog.EndedNotice) when
// evs, decisions of run just appended, end it: a hint, with core NATS, by
// which workers spare the read of their ended-run check. A notice lost
// (no connection, a slow subscriber) costs a worker that read, or the run
// of work whose outcome the fold passes over; nothing waits on it.
func (c *Coordinator) noticeEnd(run string, evs ...*events.Event) {
	if c.js == nil {
		return // not on JetStream (the simulator)
	}
	for _, e := range evs {
		switch e.Type {
		case events.RunCompleted, events.RunFailed, events.RunCancelled:
			_ = c.js.Conn().Publish(eventlog.EndedNotice(run), nil)
			return
		}
	}
}
