package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestPartitionOwnersKilledRepeatedly starts runs on a three-node cluster
// with three partitioned coordinators and two workers while, again and
// again, it reads which coordinator holds a random partition's lease,
// SIGKILLs that process and starts a new one. The other coordinators take
// the dead one's partitions over when its leases expire, and the new one
// takes its share back from them. Once every run is started and the kills
// stop, every run completes, each with one decision of each kind
// (testkit.DuplicateDecisions: one node-ready per node attempt, one
// routing per activation, one ending) and one invocation per delivery.
//
// WEFT_OWNERKILL_RUNS sets the number of runs (default 100, well under a
// minute; `make ownerkill` runs 500).
func TestPartitionOwnersKilledRepeatedly(t *testing.T) {
	n := 100
	if v := os.Getenv("WEFT_OWNERKILL_RUNS"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("WEFT_OWNERKILL_RUNS=%q: want a positive number", v)
		}
		n = k
	}
	const rate = 10    // runs started per second
	const minKills = 4 // kills at least, however few the runs
	began := time.Now()
	c := startCluster(t)
	st, admin := openStores(t, c, leaseTTL)
	cs := c.coordinators(t, 3, leaseTTL)
	c.worker(t, "worker-1", "-name", "w1")
	c.worker(t, "worker-2", "-name", "w2")
	waitHolders(t, admin, 30*time.Second, "partitions spread over the three coordinators", cs.spread)
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// The client starts the runs at a steady rate while the kills go on.
	var mu sync.Mutex
	var runs []string
	var startErr error
	started := make(chan struct{})
	go func() {
		defer close(started)
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for i := range n {
			<-tick.C
			run, err := startOne(st, g, i)
			mu.Lock()
			if err != nil {
				startErr = err
				mu.Unlock()
				return
			}
			runs = append(runs, run)
			mu.Unlock()
		}
	}()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var failovers []time.Duration
	kills := 0
	done := false
	for !done || kills < minKills {
		select {
		case <-started:
			done = true
		default:
		}
		p := rng.IntN(partitions)
		held := waitHolders(t, admin, 30*time.Second, "every partition held by a live coordinator", cs.heldByLive)
		victim := cs.byPID(held[p])
		t.Logf("%s: killing %s, the holder of partition %d (%s)", time.Since(began).Round(time.Millisecond), victim.name, p, cs.describe(held))
		victim.kill(t)
		killed := time.Now()
		cs.remove(victim)
		kills++
		// Its partitions pass to the other two when its leases expire; the
		// replacement started meanwhile takes its share from them.
		time.Sleep(300 * time.Millisecond)
		cs.add(t)
		waitHolders(t, admin, 5*leaseTTL, fmt.Sprintf("partition %d taken over after its holder was killed", p), func(h map[int]int) bool {
			return cs.heldByLive(h) && h[p] != held[p]
		})
		failovers = append(failovers, time.Since(killed))
		// A random pause between kills: the fault schedule, not a wait for an event.
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	}
	<-started
	if startErr != nil {
		t.Fatalf("starting runs: %v", startErr)
	}
	killsOver := time.Since(began)

	checkRuns(t, st, runs, 4, 3*time.Minute+time.Duration(n)*100*time.Millisecond)
	dups := 0
	for _, run := range runs {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range testkit.DuplicateDecisions(evs) {
			dups++
			t.Errorf("run %s: decision %s", run, d)
		}
	}
	slices.Sort(failovers)
	t.Logf("ownerkill summary: runs=%d completed=%d kills=%d duplicate-decisions=%d failover p50=%s max=%s (kill to partition held by another live coordinator, lease-ttl %s) kills over at %s, wall=%s",
		n, len(runs), kills, dups, failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond),
		leaseTTL, killsOver.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	c.checkNoViolations(t)
}

// startOne appends the run-started event of one run of g, retrying while
// the cluster is unsettled.
func startOne(st events.Store, g *graph.Graph, i int) (string, error) {
	run := events.NewRunID()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
		Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
	})
	if err != nil {
		return "", err
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = st.Append(ctx, run, 0, e)
		cancel()
		if err == nil || errors.Is(err, events.ErrRunExists) {
			return run, nil // an earlier try landed
		}
		if try > 20 {
			return "", fmt.Errorf("run %d: %w", i, err)
		}
		// Backs off between retries while a partition fails over: the takeover has no event a client can wait for.
		time.Sleep(200 * time.Millisecond)
	}
}
