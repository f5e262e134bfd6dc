package decider

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/pkg/graph"
)

// TestJitterZeroMeansNone: a graph's `jitter: 0` turns jitter off (it once
// meant the default 20 %), and an unset jitter takes the default.
func TestJitterZeroMeansNone(t *testing.T) {
	const src = `
name: j
nodes:
  - {id: none, type: fail, retry: {maxAttempts: 5, initialInterval: 1s, jitter: 0}}
  - {id: dflt, type: fail, retry: {maxAttempts: 5, initialInterval: 1s}}
edges: [{from: START, to: none}, {from: START, to: dflt}, {from: none, to: END}, {from: dflt, to: END}]
`
	g, err := graph.Parse([]byte(src), "j.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none, _ := g.Node("none")
	dflt, _ := g.Node("dflt")
	jittered := 0
	for attempt := 1; attempt <= 4; attempt++ {
		want := time.Second << (attempt - 1)
		for k := range 20 {
			key := fmt.Sprintf("run:none:%d:%d", attempt, k)
			if got := Backoff(policy(none), attempt, key); got != want {
				t.Fatalf("jitter 0: attempt %d waits %s, want exactly %s", attempt, got, want)
			}
			got := Backoff(policy(dflt), attempt, key)
			if got > want || got < want-want/5 {
				t.Fatalf("default jitter: attempt %d waits %s, want within 20%% below %s", attempt, got, want)
			}
			if got != want {
				jittered++
			}
		}
	}
	if jittered == 0 {
		t.Error("the default policy never jittered")
	}
}
