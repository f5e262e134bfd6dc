package reliability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// The kill tests run three coordinator processes that split the runs into
// partitions (internal/coordinator, partition.go).
const (
	partitions = 6
	leaseTTL   = 2 * time.Second
)

// coordinatorArgs are the flags of a partitioned coordinator on the cluster
// at url.
func coordinatorArgs(url string, replicas int, ttl time.Duration) []string {
	return []string{"-nats", url, "-replicas", fmt.Sprint(replicas), "-partitions", fmt.Sprint(partitions), "-lease-ttl", ttl.String()}
}

// coordinators is a set of coordinator processes, by name.
type coordinators struct {
	url      string
	replicas int
	ttl      time.Duration
	// start starts a coordinator process (as the coordinator role, on
	// the cluster); nil: with no credentials.
	start func(t *testing.T, name string, args ...string) *process
	procs []*process
	n     int // processes started, for names
	// extra are flags added to every coordinator started (a log level).
	extra []string
}

// add starts one more coordinator process.
func (cs *coordinators) add(t *testing.T) *process {
	t.Helper()
	cs.n++
	name, args := fmt.Sprintf("coordinator-%d", cs.n), append(coordinatorArgs(cs.url, cs.replicas, cs.ttl), cs.extra...)
	var p *process
	if cs.start != nil {
		p = cs.start(t, name, args...)
	} else {
		p = start(t, name, "coordinator", nil, args...)
	}
	cs.procs = append(cs.procs, p)
	return p
}

// remove forgets a process that was stopped or killed.
func (cs *coordinators) remove(p *process) {
	cs.procs = slices.DeleteFunc(cs.procs, func(q *process) bool { return q == p })
}

// byPID finds the live process with a process id.
func (cs *coordinators) byPID(pid int) *process {
	for _, p := range cs.procs {
		if p.cmd.Process.Pid == pid {
			return p
		}
	}
	return nil
}

// leaseHolders reads who holds each partition's lease: the process id of
// its holder, by partition; a partition no one holds is missing.
func leaseHolders(ctx context.Context, js jetstream.JetStream) (map[int]int, error) {
	kv, err := js.KeyValue(ctx, coordinator.LeasesBucket)
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for p := range partitions {
		e, err := kv.Get(ctx, coordinator.LeaseKey(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		h, err := coordinator.ParseHolder(e.Value())
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		out[p] = h.PID
	}
	return out, nil
}

// waitHolders waits until the leases satisfy ok, and returns them; it
// fails the test after timeout, saying what the leases were.
func waitHolders(t *testing.T, st events.Store, timeout time.Duration, what string, ok func(map[int]int) bool) map[int]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[int]int
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h, err := leaseHolders(ctx, eventlog.JetStream(st))
		cancel()
		if err == nil {
			last = h
			if ok(h) {
				return h
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (leases by partition: %v, last error: %v)", what, timeout, last, lastErr)
		}
		// Polls: the leases are KV values this loop re-reads.
		time.Sleep(20 * time.Millisecond)
	}
}

// heldByLive says every partition is held by one of the live processes.
func (cs *coordinators) heldByLive(h map[int]int) bool {
	if len(h) != partitions {
		return false
	}
	for _, pid := range h {
		if cs.byPID(pid) == nil {
			return false
		}
	}
	return true
}

// spread says every partition is held by a live process, each holding its
// share and at least one.
func (cs *coordinators) spread(h map[int]int) bool {
	if !cs.heldByLive(h) {
		return false
	}
	share := (partitions + len(cs.procs) - 1) / len(cs.procs)
	count := map[int]int{}
	for _, pid := range h {
		count[pid]++
	}
	if len(count) != len(cs.procs) {
		return false
	}
	for _, n := range count {
		if n > share {
			return false
		}
	}
	return true
}

// describe names the holder of each partition.
func (cs *coordinators) describe(h map[int]int) string {
	var out []string
	for p := range partitions {
		name := "none"
		if pid, ok := h[p]; ok {
			name = fmt.Sprintf("pid %d", pid)
			if q := cs.byPID(pid); q != nil {
				name = q.name
			}
		}
		out = append(out, fmt.Sprintf("%d:%s", p, name))
	}
	return strings.Join(out, " ")
}
