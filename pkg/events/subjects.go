package events

import (
	"fmt"

	"github.com/weft-dev/weft/internal/eventlog"
)

// LocalQueue is the queue (Event.Queue) of the nodes the coordinator runs
// itself, local nodes: the queue of their work items and outcomes. It is
// no valid queue name, so no worker can be given it, and only the
// coordinator writes there.
const LocalQueue = "_local"

// Subjects are per run and name who may write them (the layout is
// internal/eventlog's): "weft.r.<slot>.<run>.c.<kind>" for clients,
// ".w.<queue>.<kind>" for the workers of a queue, ".d.<kind>" for
// coordinator decisions and ".n.<kind>" for coordinator notices.

// subjectFor is the subject an event of type t is published on.
func subjectFor(runID string, t Type, decision bool, queue string) (string, error) {
	kind, ok := eventlog.Kind(t)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	class := eventlog.Class(t)
	if decision {
		if class != eventlog.ClassCoordinator && t != NodeInvoked && t != NodeFailed {
			return "", fmt.Errorf("%w: %s is not a decision", ErrMisplaced, t)
		}
		class = eventlog.ClassCoordinator
	}
	switch {
	case t == NodeReady:
		if !eventlog.ValidQueue(queue) {
			return "", fmt.Errorf("%w: queue %q", ErrInvalidID, queue)
		}
	case class == eventlog.ClassWorker:
		if !eventlog.ValidQueue(queue) {
			return "", fmt.Errorf("%w: a %s event needs the queue of its work item, got %q", ErrInvalidID, t, queue)
		}
	}
	return eventlog.Subject(runID, class, kind, queue), nil
}

// checkPlace reports whether an event of type t may stand where p says:
// its kind, and its writer class (NodeInvoked, NodeFailed: a worker's or a
// decision).
func checkPlace(t Type, p eventlog.Place) error {
	class := eventlog.Class(t)
	kind, _ := eventlog.Kind(t)
	alsoDecision := (t == NodeInvoked || t == NodeFailed) && p.Class == eventlog.ClassCoordinator
	if p.Kind != kind || (p.Class != class && !alsoDecision) {
		return fmt.Errorf("%w: a %s event is not accepted on a %q subject", ErrMisplaced, t, p.Class+"."+p.Kind)
	}
	return nil
}
