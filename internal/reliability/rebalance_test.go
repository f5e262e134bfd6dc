package reliability

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/graph"
)

// TestPartitionsRebalanceAcrossProcesses starts one coordinator process,
// which takes every partition, then two more, and checks that the
// partitions spread over the three with no manual step, none held twice;
// then it stops one with SIGTERM, whose partitions are released on the way
// out and taken over at once (well within the lease duration), and
// SIGKILLs another, whose partitions are taken over only when its leases
// expire. A client starts runs throughout; every run completes, each
// decision written once.
func TestPartitionsRebalanceAcrossProcesses(t *testing.T) {
	const ttl = 4 * time.Second // the lease renewal and acquisition tick is ttl/5
	srv, st := testkit.Store(t)
	cs := &coordinators{url: srv.ClientURL(), replicas: 1, ttl: ttl}
	start(t, "worker-1", "nodeworker", nil, "-nats", srv.ClientURL(), "-concurrency", "32", "-name", "w1")
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// The client: a run every 100ms until the test is over.
	var mu sync.Mutex
	var runs []string
	var startErr error
	stop := make(chan struct{})
	var client sync.WaitGroup
	client.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			run, err := startOne(st, g, i)
			mu.Lock()
			if err != nil {
				startErr = err
			} else {
				runs = append(runs, run)
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	// ended waits until the runs started so far have ended: runs keep
	// completing in each phase.
	ended := func(phase string) {
		t.Helper()
		mu.Lock()
		now := append([]string(nil), runs...)
		mu.Unlock()
		testkit.WaitEnded(t, st, now, 60*time.Second)
		t.Logf("%s: %d runs ended", phase, len(now))
	}

	one := cs.add(t)
	waitHolders(t, st, 20*time.Second, "every partition held by the one coordinator", cs.spread)
	ended("one coordinator")

	began := time.Now()
	cs.add(t)
	cs.add(t)
	h := waitHolders(t, st, 6*ttl, "partitions spread over three coordinators", cs.spread)
	t.Logf("spread over three in %s: %s", time.Since(began).Round(time.Millisecond), cs.describe(h))
	ended("three coordinators")

	// A clean stop releases the leases: the others take them at their
	// next tick, not after the leases' expiry.
	term := cs.procs[1]
	began = time.Now()
	if err := term.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := term.cmd.Wait(); err != nil {
		t.Fatalf("%s stopped with %v", term.name, err)
	}
	cs.remove(term)
	h = waitHolders(t, st, 3*ttl, "partitions of the stopped coordinator taken over", cs.spread)
	termTakeover := time.Since(began)
	t.Logf("SIGTERM: partitions taken over in %s: %s", termTakeover.Round(time.Millisecond), cs.describe(h))
	if termTakeover >= ttl/2 {
		t.Errorf("partitions of a coordinator stopped with SIGTERM taken over in %s, want well within the lease duration %s", termTakeover, ttl)
	}
	ended("after SIGTERM")

	// A killed one releases nothing: its partitions wait for their leases
	// to expire.
	var kill *process
	for _, p := range cs.procs {
		if p != one {
			kill = p
		}
	}
	began = time.Now()
	kill.kill(t)
	cs.remove(kill)
	h = waitHolders(t, st, 3*ttl, "partitions of the killed coordinator taken over", cs.spread)
	killTakeover := time.Since(began)
	t.Logf("SIGKILL: partitions taken over in %s: %s", killTakeover.Round(time.Millisecond), cs.describe(h))
	if killTakeover < ttl/2 {
		t.Errorf("partitions of a killed coordinator taken over in %s, before its leases (%s) could expire", killTakeover, ttl)
	}
	ended("after SIGKILL")

	close(stop)
	client.Wait()
	if startErr != nil {
		t.Fatalf("starting runs: %v", startErr)
	}
	checkRuns(t, st, runs, 4, 60*time.Second)
}
