package events

import (
	"regexp"
	"strings"
)

// Subject layout. Every run's events live under "weft.ev.<run>."; delayed
// events wait under "weft.sched.<run>." until JetStream fires them onto the
// run's subjects.
const (
	subjectPrefix  = "weft.ev."
	schedulePrefix = "weft.sched."
	// AllEvents is the filter of every run's events.
	AllEvents = "weft.ev.>"
	// AllSchedules is the filter of every pending delayed event.
	AllSchedules = "weft.sched.>"
)

// RunFilter is the subject filter of one run's history.
func RunFilter(runID string) string { return subjectPrefix + runID + ".>" }

// DecisionFilter is the subject filter of a run's coordinator decisions.
func DecisionFilter(runID string) string { return subjectPrefix + runID + ".d.>" }

// ReadySubject is the subject of node-ready work for a queue.
func ReadySubject(runID, queue string) string {
	return subjectPrefix + runID + ".d.ready." + queue
}

// QueueFilter is the subject filter of a task queue's work across runs.
func QueueFilter(queue string) string { return subjectPrefix + "*.d.ready." + queue }

// decisionKinds are the types only the coordinator writes.
var decisionKinds = map[Type]bool{
	RunCompleted: true, RunFailed: true, RunCancelled: true,
	NodeReady: true, NodeSkipped: true, NodeWaiting: true, NodeRouted: true,
	RetryScheduled: true, ChildRunStarted: true,
}

// KindFilter is the filter of one type of event across all runs, for
// example KindFilter(RunStarted) lists every run. For NodeInvoked it
// matches workers' reports only, not the outcomes the coordinator records
// for routers and fallbacks.
func KindFilter(t Type) string {
	switch {
	case t == NodeReady:
		return subjectPrefix + "*.d.ready.*"
	case decisionKinds[t]:
		return subjectPrefix + "*.d." + kinds[t]
	}
	return subjectPrefix + "*." + kinds[t]
}

// IsDecision reports whether an event subject is a coordinator decision's.
func IsDecision(subject string) bool {
	rest, ok := strings.CutPrefix(subject, subjectPrefix)
	if !ok {
		return false
	}
	_, kind, _ := strings.Cut(rest, ".")
	return strings.HasPrefix(kind, "d.")
}

// ScheduleSubject is where a delayed event waits.
func ScheduleSubject(runID, timerID string) string {
	return schedulePrefix + runID + "." + timerID
}

// RunOf returns the run id of an event subject.
func RunOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, subjectPrefix)
	if !ok {
		return "", false
	}
	run, _, ok := strings.Cut(rest, ".")
	return run, ok && run != ""
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ValidToken reports whether s can be a run id, node id or queue name: it
// becomes one token of a NATS subject, so no dots, spaces or wildcards.
func ValidToken(s string) bool { return tokenRE.MatchString(s) }
