package readmodel_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/projection"
)

// boundedYAML: a node that fails its first attempts (retries, each a
// durable timer), then a loop of limit iterations.
const boundedYAML = `
name: bounded
nodes:
  - id: init
    type: transform
    config: {set: {count: "0"}}
  - id: flaky
    type: fail
    config: {failAttempts: %d}
    retry: {maxAttempts: 6, initialInterval: 10ms, maxInterval: 20ms}
  - id: step
    type: transform
    maxIterations: 30
    config: {set: {count: "state.count + 1"}}
edges:
  - {from: START, to: init}
  - {from: init, to: flaky}
  - {from: flaky, to: step}
  - {from: step, to: step, when: "state.count < %d"}
  - {from: step, to: END, when: "state.count >= %d"}
`

// TestSubjectsPerRunBounded: a run with five retries and a loop of
// twenty-five iterations leaves as many subjects in the stream as a run
// with one retry and two iterations, within SubjectsPerRun, and nothing in
// the timers stream once ended.
func TestSubjectsPerRunBounded(t *testing.T) {
	ctx := timeout(t)
	c, store := engine(t, time.Hour)
	small := startAll(t, ctx, c, mustGraph(t, fmt.Sprintf(boundedYAML, 1, 2, 2)), []map[string]any{{}})[0]
	big := startAll(t, ctx, c, mustGraph(t, fmt.Sprintf(boundedYAML, 5, 25, 25)), []map[string]any{{}})[0]
	states := testkit.WaitEnded(t, store, []string{small, big}, 45*time.Second)
	for run, st := range states {
		if st.Status != projection.RunCompleted {
			t.Fatalf("run %s: %s %v", run, st.Status, st.Error)
		}
	}
	if st := states[big]; st.Stats.Retries < 5 || st.Nodes["step"].Iteration < 20 {
		t.Fatalf("big run: %d retries, %d iterations of step; want 5 and 25", st.Stats.Retries, st.Nodes["step"].Iteration)
	}
	// The read model's entry is there too, but in its own bucket.
	waitIndexed(t, ctx, store, map[string]projection.RunStatus{small: projection.RunCompleted, big: projection.RunCompleted})
	var ns, nb int
	ns = subjectsOf(t, ctx, store, store.StreamName(), eventlog.RunFilter(small))
	nb = subjectsOf(t, ctx, store, store.StreamName(), eventlog.RunFilter(big))
	t.Logf("subjects: small run %d, big run %d (bound %d)", ns, nb, readmodel.SubjectsPerRun(1))
	if nb != ns {
		t.Errorf("the big run left %d subjects, the small one %d: the count grows with retries and loops", nb, ns)
	}
	if nb > readmodel.SubjectsPerRun(1) {
		t.Errorf("the big run left %d subjects, over the bound %d", nb, readmodel.SubjectsPerRun(1))
	}
	for _, run := range []string{small, big} {
		if n := subjectsOf(t, ctx, store, eventlog.Must(store).TimerStream(), eventlog.ScheduleFilter(run)); n != 0 {
			t.Errorf("run %s left %d pending timers after its end", run, n)
		}
	}
}
