package projection_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestFoldInAnyDeliveryOrder: folding the events in any order a
// coordinator could receive them gives the log-order fold, byte for byte.
// A coordinator receives each run's events in log order, interleaved at
// random with other runs' events, and any event may be delivered again
// after later ones (a redelivery, or a reload that overlaps what was
// folded); Apply passes those over by their sequence. The runs are the
// recorded histories, each twice under another run id, on one stream.
func TestFoldInAnyDeliveryOrder(t *testing.T) {
	logs := map[string][]*events.Event{}
	var seq uint64
	for name, evs := range histories(t) {
		for copy := range 2 {
			run := fmt.Sprintf("%s-%d", name, copy)
			for _, e := range evs {
				c := *e
				c.RunID = run
				seq++
				c.Seq = seq
				logs[run] = append(logs[run], &c)
			}
		}
	}
	want := map[string][]byte{}
	for run, evs := range logs {
		want[run] = projection.Fold(evs).Marshal()
	}
	for i := range 300 {
		seed := uint64(i) + 1
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			states := map[string]*projection.State{}
			for _, e := range deliveries(rng, logs) {
				s := states[e.RunID]
				if s == nil {
					s = &projection.State{}
					states[e.RunID] = s
				}
				_ = s.Apply(e)
			}
			for run, w := range want {
				if got := states[run].Marshal(); !bytes.Equal(got, w) {
					t.Fatalf("seed %d: run %s folds to\n%s\nwant\n%s", seed, run, got, w)
				}
			}
		})
	}
}

// deliveries returns the events of the runs in one order a coordinator
// could receive them: each run's in log order, runs interleaved at random,
// with some events delivered again after later ones of their run.
func deliveries(rng *rand.Rand, logs map[string][]*events.Event) []*events.Event {
	runs := make([]string, 0, len(logs))
	for run := range logs {
		runs = append(runs, run)
	}
	// Map order is random but not seeded: sort, then shuffle by the seed.
	slices.Sort(runs)
	rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
	next := make(map[string]int, len(runs))
	var out []*events.Event
	for len(runs) > 0 {
		k := rng.IntN(len(runs))
		run := runs[k]
		evs, i := logs[run], next[run]
		out = append(out, evs[i])
		if i > 0 && rng.IntN(4) == 0 {
			// A redelivery of an earlier event of the run, after this one.
			out = append(out, evs[rng.IntN(i+1)])
		}
		next[run] = i + 1
		if i+1 == len(evs) {
			runs = append(runs[:k], runs[k+1:]...)
		}
	}
	return out
}
