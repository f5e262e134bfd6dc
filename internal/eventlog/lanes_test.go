package eventlog_test

import (
	"fmt"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
)

// The coordinators consume each partition in two parts, the clients'
// run starts and everything else: every subject of every run is in
// exactly one part of exactly one partition, the starts part holds the
// clients' run starts and nothing else (a child run's start is a
// decision, and goes with its parent's progress), and with one
// partition the filters are the few they must be.
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
			if starts+progress != 1 || (starts == 1) != isStart {
				t.Fatalf("%d partitions: %s is in %d starts filters and %d progress filters", n, subj, starts, progress)
			}
			p := eventlog.PartitionOf(run, n)
			if matches(subj, eventlog.StartFilters(p, n))+matches(subj, eventlog.ProgressFilters(p, n)) != 1 {
				t.Fatalf("%d partitions: %s is not in its run's partition %d", n, subj, p)
			}
		}
	}
	if got := len(eventlog.ProgressFilters(0, 1)); got != 5 {
		t.Fatalf("one partition's progress is %d filters (%v), want 5: two client kinds and three classes", got, eventlog.ProgressFilters(0, 1))
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
