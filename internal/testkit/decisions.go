package testkit

import (
	"fmt"
	"sort"

	"github.com/weft-dev/weft/pkg/events"
)

// DuplicateDecisions returns, for one run's history, every coordinator
// decision that is in the log more than once, as "what: n times". It counts
// decisions, not outcomes (a worker's outcome id includes its delivery, so
// a redelivered attempt legitimately reports again): one node-ready per node
// attempt, one skip, wait and routing per activation (a wait for a slot or
// a rate's turn: per attempt), one retry per attempt,
// one child run per activation, one outcome the coordinator records per
// attempt (routers, fallbacks), and one ending of the run of any kind. It
// also reports a decision's event id that is in the log twice
// (de-duplication failed). Events the log holds but could not decode are
// passed over; DuplicateFacts reports the other events twice in the log.
//
// Size: a test fake: the fault's whole logic in one place, so that a test's
// reader sees what is injected.
func DuplicateDecisions(evs []*events.Event) []string {
	seen := map[string]int{}
	ids := map[string]int{}
	note := func(r *events.NodeRoutedData) { seen["routed "+r.Key()]++ }
	for _, e := range evs {
		if e.Refused != nil {
			continue
		}
		if !e.IsDecision() {
			continue
		}
		ids[e.ID]++
		p, err := e.Payload()
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeReadyData:
			seen[fmt.Sprintf("ready %s attempt %d", d.Key(), d.Attempt)]++
			for i := range d.Routed {
				note(&d.Routed[i])
			}
		case *events.NodeSkippedData:
			seen["skipped "+d.Key()]++
			for i := range d.Routed {
				note(&d.Routed[i])
			}
		case *events.NodeWaitingData:
			if d.Attempt > 0 {
				// A wait for a slot or a turn of a rate is an attempt's:
				// each retry of the node waits again.
				seen[fmt.Sprintf("waiting %s for %s attempt %d", d.Key(), d.For, d.Attempt)]++
			} else {
				seen["waiting "+d.Key()]++
			}
			for i := range d.Routed {
				note(&d.Routed[i])
			}
		case *events.NodeRoutedData:
			note(d)
		case *events.RetryScheduledData:
			seen[fmt.Sprintf("retry %s attempt %d", d.Key(), d.Attempt)]++
		case *events.NodeInvokedData:
			seen[fmt.Sprintf("decided outcome %s attempt %d", d.Key(), d.Attempt)]++
		case *events.ChildRunStartedData:
			seen["child run "+d.Key()]++
		case *events.RunCompletedData, *events.RunFailedData, *events.RunCancelledData:
			seen["run end"]++
		}
	}
	var out []string
	for k, n := range seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s: %d times", k, n))
		}
	}
	for id, n := range ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("event id %s: %d times", id, n))
		}
	}
	sort.Strings(out)
	return out
}

// DuplicateFacts returns the ids of events that are not decisions (a
// client's, a worker's, a timer's) and are in the log more than once, as
// "id (type): n times". A worker's outcome id includes its delivery, so a
// repeated one is a de-duplication failure; a timer's firing may repeat
// when JetStream re-fires a message schedule (after a leader change), and
// the fold must pass the second over.
func DuplicateFacts(evs []*events.Event) []string {
	ids := map[string]int{}
	types := map[string]events.Type{}
	for _, e := range evs {
		if e.Refused != nil || e.IsDecision() || e.ID == "" {
			continue
		}
		ids[e.ID]++
		types[e.ID] = e.Type
	}
	var out []string
	for id, n := range ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%s): %d times", id, types[id], n))
		}
	}
	sort.Strings(out)
	return out
}
