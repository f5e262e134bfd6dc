package decider_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/decider"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

const waitGraph = `
name: waits
nodes:
  - {id: w, type: wait, config: {until: "state.deadline"}}
  - {id: b, type: echo}
edges:
  - {from: START, to: w}
  - {from: w, to: b}
  - {from: b, to: END}
`

// waitOutput decodes a wait node's output.
func waitOutput(t *testing.T, s *projection.State, node string) (until time.Time, past bool) {
	t.Helper()
	var out struct {
		Until time.Time `json:"until"`
		Past  bool      `json:"past"`
	}
	if err := json.Unmarshal(s.Nodes[node].Output, &out); err != nil {
		t.Fatalf("output of %s: %v (%s)", node, err, s.Nodes[node].Output)
	}
	return out.Until, out.Past
}

func TestWaitForADurationIsATimerNotWork(t *testing.T) {
	sm := newSim(t, strings.Replace(waitGraph, `{until: "state.deadline"}`, `{duration: 72h}`, 1), "", "", echo)
	start := sm.clock
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s: %v", s.Status, s.Error)
	}
	if got, want := sm.types(), "run.started node.waiting:w timer.fired:w node.ready:b node.invoking:b node.invoked:b run.completed"; !strings.Contains(got, "node.waiting:w timer.fired:w") || strings.Contains(got, "node.ready:w") {
		t.Fatalf("log %s; want %s", got, want)
	}
	until, past := waitOutput(t, s, "w")
	if past || until.Before(start.Add(72*time.Hour)) || until.After(start.Add(72*time.Hour+time.Second)) {
		t.Fatalf("until %s past %v; want 72h after %s", until, past, start)
	}
}

func TestWaitUntilATimeInTheState(t *testing.T) {
	sm := newSim(t, waitGraph, `{"deadline":"2026-01-04T09:00:00Z"}`, "", echo)
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s: %v", s.Status, s.Error)
	}
	until, past := waitOutput(t, s, "w")
	if !until.Equal(time.Date(2026, 1, 4, 9, 0, 0, 0, time.UTC)) || past {
		t.Fatalf("until %s past %v", until, past)
	}
}

// A time in the past ends the wait at once, in the node-waiting event
// itself: no timer is asked for, and the output says so.
func TestWaitUntilThePastEndsAtOnce(t *testing.T) {
	sm := newSim(t, waitGraph, `{"deadline":"2020-01-01T00:00:00Z"}`, "", echo)
	work := sm.s.Clone()
	d := decider.Decide(sm.g, work, sm.clock)
	if len(d.Timers) != 0 {
		t.Fatalf("timers %+v for a time in the past", d.Timers)
	}
	if w := work.Nodes["w"]; w == nil || w.Status != projection.NodeSucceeded {
		t.Fatalf("w %+v", w)
	}
	s := sm.run()
	if s.Status != projection.RunCompleted {
		t.Fatalf("status %s: %v", s.Status, s.Error)
	}
	if got := sm.types(); strings.Contains(got, "timer.fired") {
		t.Fatalf("log %s", got)
	}
	if until, past := waitOutput(t, s, "w"); !past || until.Year() != 2020 {
		t.Fatalf("until %s past %v", until, past)
	}
}

// An until that gives no time fails the run at once, naming the node and
// the value: the run is never left waiting.
func TestWaitUntilBadTimeFailsTheRun(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"unparseable", `{"deadline":"next tuesday"}`, `"next tuesday", which is not an RFC 3339 time`},
		{"number", `{"deadline":1767225600}`, "want a timestamp or an RFC 3339 string, got int"},
		{"missing", `{}`, "deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := newSim(t, waitGraph, tc.input, "", echo)
			s := sm.run()
			if s.Status != projection.RunFailed || s.Error == nil || s.Error.Type != events.FailureInvalidWait {
				t.Fatalf("status %s error %v", s.Status, s.Error)
			}
			if !strings.Contains(s.Error.Message, `node "w": config.until`) || !strings.Contains(s.Error.Message, tc.want) {
				t.Fatalf("message %q; want the node, the field and %q", s.Error.Message, tc.want)
			}
		})
	}
}

// A run cancelled while it waits ends cancelled, its wait's timer gone
// with it: the timer firing later changes nothing.
func TestWaitCancelled(t *testing.T) {
	sm := newSim(t, strings.Replace(waitGraph, `{until: "state.deadline"}`, `{duration: 1h}`, 1), "", "", echo)
	work := sm.s.Clone()
	d := decider.Decide(sm.g, work, sm.clock)
	for _, e := range d.Events {
		sm.append(e)
	}
	if len(d.Timers) != 1 || sm.s.Nodes["w"].Status != projection.NodeWaiting || len(sm.s.Timers) != 1 {
		t.Fatalf("timers %v, w %+v", d.Timers, sm.s.Nodes["w"])
	}
	sm.append(sm.event("cancel", &events.RunCancelRequestedData{By: "tester", Reason: "no longer needed"}))
	work = sm.s.Clone()
	for _, e := range decider.Decide(sm.g, work, sm.clock).Events {
		sm.append(e)
	}
	if sm.s.Status != projection.RunCancelled || len(sm.s.Timers) != 0 {
		t.Fatalf("status %s, timers %v; want cancelled, none", sm.s.Status, sm.s.Timers)
	}
	fired := *d.Timers[0].Event
	fired.Seq = 100
	if err := sm.s.Apply(&fired); !errors.Is(err, projection.ErrStale) || sm.s.Status != projection.RunCancelled || sm.s.Nodes["w"].Status == projection.NodeSucceeded {
		t.Fatalf("a late wait timer: %v; status %s, w %s", err, sm.s.Status, sm.s.Nodes["w"].Status)
	}
}
