package eventlog

import "testing"

// A pending timer's subject gives back its run; other subjects do not.
func TestScheduledRun(t *testing.T) {
	run := "06h1tkbav1t5movata2v1ght0k"
	if got, ok := ScheduledRun(ScheduleSubject(run, "retry-a-1-2")); !ok || got != run {
		t.Fatalf("ScheduledRun(ScheduleSubject) = %q, %v", got, ok)
	}
	for _, subj := range []string{FiredSubject(run), "weft.t.s.00." + run + ".t", "weft.t.s." + Slot(run) + "." + run, "weft.r.x"} {
		if got, ok := ScheduledRun(subj); ok {
			t.Errorf("ScheduledRun(%q) = %q, want none", subj, got)
		}
	}
}
