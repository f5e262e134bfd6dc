package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
)

// failoverTTL is the coordinators' -lease-ttl in the failover figure.
const failoverTTL = 2 * time.Second

// failoverPartition is the partition whose owner is killed.
const failoverPartition = 0

// runFailover measures partition failover: three cmd/coordinator
// processes (-partitions 8, -lease-ttl 2s) decide a steady stream of short
// noop-chain runs (FailoverRate runs/s, an in-process worker); the process
// holding partition 0's lease (read from the leases bucket) is killed with
// SIGKILL, and the figure is the time from the kill to the stored time of
// the first decision of a partition-0 run stored after the new holder
// created its lease (so by the new holder: the old one is dead and its
// lease had to expire first). The killed process is then started again and
// the partitions rebalanced before the next kill. p50 and max over
// FailoverKills kills. The floor is the lease duration: a lease expires
// that long after its last renewal, which is up to a fifth of it (the
// renewal tick) before the kill, so a failover takes about the lease
// duration, and the target is that it takes less than two.
//
// Size: a benchmark script, read top to bottom (set up, load, kill,
// measure, report rows); split, its steps would hide the order the figures
// depend on.
func runFailover(ctx context.Context, e *env) ([]Result, error) {
	bin, err := e.binary(ctx, "cmd/coordinator")
	if err != nil {
		return nil, err
	}
	s := e.sizes
	g, err := chainGraph("failover", "noop", 3, nil)
	if err != nil {
		return nil, err
	}
	stream := e.name("WEFT_FAILOVER")
	defer e.dropStream(stream)
	if _, err := e.openStore(ctx, e.js, stream); err != nil {
		return nil, err
	}
	if err := e.freshLeases(ctx); err != nil {
		return nil, err
	}
	args := e.coordArgs(stream, coordPartitions, failoverTTL)
	procs := make([]*coordProc, 3)
	defer func() {
		for _, p := range procs {
			if p != nil {
				_, _ = p.stop()
			}
		}
	}()
	for i := range procs {
		if procs[i], err = e.spawnCoordinator(bin, args); err != nil {
			return nil, err
		}
	}
	w, err := e.startWorker(ctx, stream, e.sizes.TputWorkerConc)
	if err != nil {
		return nil, err
	}
	defer w.stop()

	// The steady stream of runs.
	fctx, stopFeed := context.WithCancel(ctx)
	var feed sync.WaitGroup
	var feedErr error
	var started int
	feed.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		per := max(s.FailoverRate/20, 1)
		for {
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
			if _, err := startRuns(fctx, e.js, g, per); err != nil {
				if fctx.Err() == nil {
					feedErr = err
				}
				return
			}
			started += per
		}
	})
	defer func() {
		stopFeed()
		feed.Wait()
	}()

	var times []time.Duration
	for i := range s.FailoverKills {
		if err := e.waitBalanced(ctx, procs, coordPartitions, time.Minute); err != nil {
			return nil, fmt.Errorf("kill %d: %w", i+1, err)
		}
		held, err := e.leaseHolders(ctx, coordPartitions)
		if err != nil {
			return nil, err
		}
		owner := holderOf(held[failoverPartition])
		k := slices.IndexFunc(procs, func(p *coordProc) bool { return p.holderID() == owner })
		if k < 0 {
			return nil, fmt.Errorf("kill %d: partition %d's holder %q is none of the coordinator processes", i+1, failoverPartition, owner)
		}
		killed := time.Now()
		procs[k].kill()
		procs[k] = nil
		d, err := e.firstDecisionAfter(ctx, stream, failoverPartition, owner, killed, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("kill %d: %w", i+1, err)
		}
		times = append(times, d)
		e.logf("kill %d: partition %d decided again %s after its holder was killed", i+1, failoverPartition, d.Round(time.Millisecond))
		if procs[k], err = e.spawnCoordinator(bin, args); err != nil {
			return nil, err
		}
	}
	stopFeed()
	feed.Wait()
	if feedErr != nil {
		return nil, fmt.Errorf("starting runs: %w", feedErr)
	}
	notes := fmt.Sprintf("3 coordinator processes, -partitions %d, -lease-ttl %s; %d kills (SIGKILL) of partition %d's holder, restarted after each; %d runs/s of 3-node noop chains (%d started); floor: the lease duration",
		coordPartitions, failoverTTL, len(times), failoverPartition, s.FailoverRate, started)
	return []Result{
		row("failover p50", pct(times, 50).Seconds(), "s", failoverTTL.Seconds(), nil, notes),
		row("failover max", slices.Max(times).Seconds(), "s", failoverTTL.Seconds(), ratioAtMost(2), ""),
	}, nil
}

// firstDecisionAfter waits until partition p's lease is held by another
// than old, then returns the time from killed to the stored time of the
// first decision of a run of p stored at or after that lease's creation.
func (e *env) firstDecisionAfter(ctx context.Context, stream string, p int, old string, killed time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	kv, err := e.js.KeyValue(ctx, coordinator.LeasesBucket)
	if err != nil {
		return 0, err
	}
	var since time.Time
	for {
		ent, err := kv.Get(ctx, fmt.Sprintf("lease.%d", p))
		if err == nil && holderOf(ent) != old {
			since = ent.Created()
			break
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partition %d was not taken over within %s", p, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cons, err := e.js.OrderedConsumer(wctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: decisionFilters(p, coordPartitions),
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
	})
	if err != nil {
		return 0, err
	}
	m, err := cons.Next(jetstream.FetchMaxWait(time.Until(deadline)))
	if err != nil {
		return 0, fmt.Errorf("no decision in partition %d after its takeover: %w", p, err)
	}
	meta, err := m.Metadata()
	if err != nil {
		return 0, err
	}
	return meta.Timestamp.Sub(killed), nil
}
