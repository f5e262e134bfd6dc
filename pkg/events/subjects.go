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
		if class != eventlog.ClassCoordinator && !alsoDecision(t) {
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

// alsoDecision reports whether events of type t, of another writer class,
// are also coordinator decisions: a router's or a fallback's outcome, an
// attempt the coordinator timed out (NodeInvoked, NodeFailed), a child
// run's start (RunStarted).
func alsoDecision(t Type) bool { return t == NodeInvoked || t == NodeFailed || t == RunStarted }

// checkPlace reports whether an event of type t may stand where p says:
// its kind, and its writer class (NodeInvoked, NodeFailed: a worker's or a
// decision; RunStarted: a client's, or the coordinator's for a child run).
func checkPlace(t Type, p eventlog.Place) error {
	class := eventlog.Class(t)
	kind, _ := eventlog.Kind(t)
	decision := alsoDecision(t) && p.Class == eventlog.ClassCoordinator
	if p.Kind != kind || (p.Class != class && !decision) {
		return fmt.Errorf("%w: a %s event is not accepted on a %q subject", ErrMisplaced, t, p.Class+"."+p.Kind)
	}
	return nil
}

// checkStart refuses a run-started that claims what its subject does not
// allow: a child run is started by its parent's coordinator, on the child's
// decision subject (eventlog.ChildStartedSubject), and only there. A
// client's run-started that names a parent is someone passing a run of its
// own off as another run's child (ParentClaimError); a start on the
// decision subject that names none is not a child's.
func checkStart(subject string, p eventlog.Place, d *RunStartedData) error {
	switch {
	case p.Class != eventlog.ClassCoordinator && d.Parent != nil:
		return &ParentClaimError{Subject: subject, Parent: *d.Parent}
	case p.Class == eventlog.ClassCoordinator && d.Parent == nil:
		return fmt.Errorf("%w: %s: a run-started on a decision subject starts a child run and must name its parent", ErrMisplaced, subject)
	}
	return nil
}

// startPlaced refuses to encode a run-started where checkStart would
// refuse to read it: a decision (a child run's start) that names no
// parent, or a client's that names one (a ParentClaimError: only the
// engine starts child runs).
func startPlaced(e *Event) error {
	if e.Type != RunStarted {
		return nil
	}
	p, err := e.Payload()
	if err != nil {
		return err
	}
	d := p.(*RunStartedData)
	switch {
	case !e.decision && d.Parent != nil:
		return &ParentClaimError{Subject: eventlog.StartedSubject(e.RunID), Parent: *d.Parent}
	case e.decision && d.Parent == nil:
		return fmt.Errorf("%w: a child run's start (a decision) must name its parent", ErrMisplaced)
	}
	return nil
}
