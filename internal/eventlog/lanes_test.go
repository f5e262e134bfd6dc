package eventlog_test

import (
	"fmt"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
)

// The coordinators consume each partition in two parts, the clients'
// run starts and the rest they must see: every subject a coordinator
// consumes (Consumed) is in exactly one part of exactly one partition,
// and no other subject is in any; the starts part holds the clients' run
// starts and nothing else (a child run's start is a decision, and goes
// with the progress); and with one partition the filters are the few
// they must be.
func TestPartitionLanes(t *testing.T) {
	var subjects []string
	for i := range 200 {
		run := fmt.Sprintf("run-%d", i)
		for _, typ := range eventlog.Types() {
			kind, _ := eventlog.Kind(typ)
			subjects = append(subjects, eventlog.Subject(run, eventlog.Class(typ), kind, "q1"))
		}
		subjects = append(subjects, eventlog.ChildStartedSubject(run), eventlog.ReadySubject(run, eventlog.LocalQueue))
	}
	for _, n := range []int{1, 2, 3, 4, 16, 64} {
		for _, subj := range subjects {
			var starts, progress int
			for p := range n {
				starts += matches(subj, eventlog.StartFilters(p, n))
				progress += matches(subj, eventlog.ProgressFilters(p, n))
			}
			run, _ := eventlog.RunOf(subj)
			isStart := subj == eventlog.StartedSubject(run)
			want := 0
			if eventlog.Consumed(subj) {
				want = 1
			}
			if starts+progress != want || (starts == 1) != isStart {
				t.Fatalf("%d partitions: %s is in %d starts filters and %d progress filters, want %d in all", n, subj, starts, progress, want)
			}
			p := eventlog.PartitionOf(run, n)
			if matches(subj, eventlog.StartFilters(p, n))+matches(subj, eventlog.ProgressFilters(p, n)) != want {
				t.Fatalf("%d partitions: %s is not in its run's partition %d", n, subj, p)
			}
		}
	}
	if got := len(eventlog.ProgressFilters(0, 1)); got != 6 {
		t.Fatalf("one partition's progress is %d filters (%v), want 6: two client kinds, two classes and two decisions", got, eventlog.ProgressFilters(0, 1))
	}
	// What a coordinator consumes, and what it does not: its own
	// decisions but a run's start and a local node's work item.
	for subj, want := range map[string]bool{
		eventlog.ChildStartedSubject("r1"):                            true,
		eventlog.ReadySubject("r1", eventlog.LocalQueue):              true,
		eventlog.ReadySubject("r1", "q1"):                             false,
		eventlog.TerminalSubjects("r1")[0]:                            false,
		eventlog.StartedSubject("r1"):                                 true,
		eventlog.Subject("r1", eventlog.ClassWorker, "invoked", "q1"): true,
		"weft.r.zz": false,
	} {
		if got := eventlog.Consumed(subj); got != want {
			t.Errorf("Consumed(%s) = %v, want %v", subj, got, want)
		}
	}
	if got := eventlog.StartFilters(0, 1); len(got) != 1 || got[0] != "weft.r.*.*.c.started" {
		t.Fatalf("one partition's starts filter is %v", got)
	}
}

// matches counts the filters subj is matched by.
func matches(subj string, filters []string) int {
	n := 0
	for _, f := range filters {
		if eventlog.SubsetOf(subj, f) {
			n++
		}
	}
	return n
}
