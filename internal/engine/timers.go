package engine

import (
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TimerEvent builds the event a pending timer of the state fires: the same
// event, with the same id, as the decision that asked for the timer
// scheduled, so that a coordinator re-arming the timers of a run it folded
// from the log arms exactly what was decided.
func TimerEvent(run, id string, t projection.Timer) (*events.Event, error) {
	return events.New(run, events.DecisionID(run, events.TimerFired, id), t.At, &events.TimerFiredData{
		TimerID: id, Purpose: t.Purpose, Ref: t.Ref, Attempt: t.Attempt,
	})
}
