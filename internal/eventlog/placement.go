package eventlog

import (
	"crypto/sha256"
	"encoding/hex"
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
		if class != ClassCoordinator && !alsoDecision(t) {
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

// alsoDecision reports whether events of type t, of another writer class,
// are also coordinator decisions: a router's or a fallback's outcome, an
// attempt the coordinator timed out (NodeInvoked, NodeFailed), a child
// run's start (RunStarted).
func alsoDecision(t Type) bool { return t == NodeInvoked || t == NodeFailed || t == RunStarted }

// checkPlace reports whether an event of type t may stand where p says:
// its kind, and its writer class (NodeInvoked, NodeFailed: a worker's or a
// decision; RunStarted: a client's, or the coordinator's for a child run).
func checkPlace(t Type, p Place) error {
	class := Class(t)
	kind, _ := Kind(t)
	decision := alsoDecision(t) && p.Class == ClassCoordinator
	if p.Kind != kind || (p.Class != class && !decision) {
		return fmt.Errorf("%w: a %s event is not accepted on a %q subject", ErrMisplaced, t, p.Class+"."+p.Kind)
	}
	return nil
}

// checkStart refuses a run-started that claims what its subject does not
// allow. The engine's own starts stand on the run's decision subject
// (ChildStartedSubject), which only the coordinator may write, and only
// there: a child run, started by its parent's coordinator (it names the
// parent), and a run a schedule's fire or an event trigger's message
// started (it names that schedule or trigger, RunStartedData.Trigger). A
// client's run-started that names a parent is someone passing a run of
// its own off as another run's child (ParentClaimError); one that names a
// schedule or trigger, someone passing it off as that schedule's or
// trigger's (TriggerClaimError). A start on the decision subject names
// exactly one of the two.
func checkStart(subject string, p Place, d *RunStartedData) error {
	if err := checkGraphDigest(subject, d); err != nil {
		return err
	}
	return checkStarter(subject, p.Class == ClassCoordinator, d)
}

// checkStarter is checkStart's claim check: decision is whether the start
// stands on (or is to be written on) the decision subject.
func checkStarter(subject string, decision bool, d *RunStartedData) error {
	switch {
	case !decision && d.Parent != nil:
		return &ParentClaimError{Subject: subject, Parent: *d.Parent}
	case !decision && d.Trigger != nil:
		return &TriggerClaimError{Subject: subject, Trigger: *d.Trigger}
	case decision && d.Parent == nil && d.Trigger == nil:
		return fmt.Errorf("%w: %s: a run-started on a decision subject is the engine's: it must name its parent run or the schedule or trigger that started it", ErrMisplaced, subject)
	case decision && d.Parent != nil && d.Trigger != nil:
		return fmt.Errorf("%w: %s: a run-started names both a parent run and a %s", ErrMisplaced, subject, d.Trigger.Kind)
	}
	return nil
}

// startPlaced refuses to encode a run-started where checkStart would
// refuse to read it: a decision (the engine's start) that names neither a
// parent nor a schedule or trigger, or a client's that names one (only
// the engine starts child runs and the runs of schedules and triggers).
func startPlaced(e *Event) error {
	if e.Type != RunStarted {
		return nil
	}
	p, err := e.Payload()
	if err != nil {
		return err
	}
	d := p.(*RunStartedData)
	subject := StartedSubject(e.RunID)
	if e.decision {
		subject = ChildStartedSubject(e.RunID)
	}
	if err := checkGraphDigest(subject, d); err != nil {
		return err
	}
	return checkStarter(subject, e.decision, d)
}

// GraphDigest is the digest of a graph's canonical JSON as a run-started
// records it: "sha256:" and the hex SHA-256 of the bytes (pkg/graph's
// Graph.Digest).
func GraphDigest(graph []byte) string {
	sum := sha256.Sum256(graph)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkGraphDigest refuses a run-started whose graphDigest is not its
// graph's (GraphDigestError). A start without a digest has nothing to
// check: no reader keeps its graph by digest.
func checkGraphDigest(subject string, d *RunStartedData) error {
	if d.GraphDigest == "" {
		return nil
	}
	if got := GraphDigest(d.Graph); got != d.GraphDigest {
		return &GraphDigestError{Subject: subject, Claimed: d.GraphDigest, Actual: got}
	}
	return nil
}
