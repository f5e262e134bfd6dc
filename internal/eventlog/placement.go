package eventlog

import (
	"fmt"
)

// Subjects are per run and name who may write them (the layout is
// internal/eventlog's): "weft.r.<slot>.<run>.c.<kind>" for clients,
// ".w.<queue>.<kind>" for the workers of a queue, ".d.<kind>" for
// coordinator decisions and ".n.<kind>" for coordinator notices.

// subjectFor is the subject an event of type t is published on.
func subjectFor(runID string, t Type, decision bool, queue string) (string, error) {
	kind, ok := Kind(t)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	class := Class(t)
	if decision {
		if class != ClassCoordinator && t != NodeInvoked && t != NodeFailed {
			return "", fmt.Errorf("%w: %s is not a decision", ErrMisplaced, t)
		}
		class = ClassCoordinator
	}
	switch {
	case t == NodeReady:
		if !ValidQueue(queue) {
			return "", fmt.Errorf("%w: queue %q", ErrInvalidID, queue)
		}
	case class == ClassWorker:
		if !ValidQueue(queue) {
			return "", fmt.Errorf("%w: a %s event needs the queue of its work item, got %q", ErrInvalidID, t, queue)
		}
	}
	return Subject(runID, class, kind, queue), nil
}

// checkPlace reports whether an event of type t may stand where p says:
// its kind, and its writer class (NodeInvoked, NodeFailed: a worker's or a
// decision).
func checkPlace(t Type, p Place) error {
	class := Class(t)
	kind, _ := Kind(t)
	alsoDecision := (t == NodeInvoked || t == NodeFailed) && p.Class == ClassCoordinator
	if p.Kind != kind || (p.Class != class && !alsoDecision) {
		return fmt.Errorf("%w: a %s event is not accepted on a %q subject", ErrMisplaced, t, p.Class+"."+p.Kind)
	}
	return nil
}
