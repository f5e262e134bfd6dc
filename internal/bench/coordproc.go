package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
)

// coordProc is a cmd/coordinator child process. Its stderr (JSON logs) is
// read line by line: "took a partition" lines say which lease holder id it
// is, and the "stopped" line at shutdown carries its counters
// (internal/coordinatord). Warnings and errors are passed on to the
// harness's progress output.
type coordProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when stderr is read to its end

	mu      sync.Mutex
	holder  string            // its lease holder id, from "took a partition"
	stopped coordinator.Stats // summed over its "stopped" lines
	nStop   int
}

// coordLog is the part of a coordinator daemon's log line the harness
// reads.
type coordLog struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Holder     string `json:"holder"`
	Decisions  *int64 `json:"decisions"`
	Processed  int64  `json:"processed"`
	Conflicts  int64  `json:"conflicts"`
	Reloads    int64  `json:"reloads"`
	Reorders   int64  `json:"reorders"`
	HandedBack int64  `json:"handed_back"`
	Errors     int64  `json:"errors"`
}

// coordArgs are the flags every coordinator child of a figure gets.
func (e *env) coordArgs(stream string, partitions int, ttl time.Duration) []string {
	return []string{"-nats", e.url, "-stream", stream, "-storage", e.cfg.Storage,
		"-partitions", strconv.Itoa(partitions), "-lease-ttl", ttl.String(), "-log-level", "info"}
}

// spawnCoordinator starts a coordinator child process.
func (e *env) spawnCoordinator(bin string, args []string) (*coordProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a coordinator: %w", err)
	}
	p := &coordProc{cmd: cmd, done: make(chan struct{})}
	go p.read(stderr, e.progress)
	return p, nil
}

func (p *coordProc) read(r io.Reader, progress io.Writer) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l coordLog
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			fmt.Fprintf(progress, "coordinator %d: %s\n", p.cmd.Process.Pid, sc.Text())
			continue
		}
		p.mu.Lock()
		if l.Msg == "took a partition" && l.Holder != "" {
			p.holder = l.Holder
		}
		if l.Decisions != nil && strings.Contains(l.Msg, "stopped") {
			s := &p.stopped
			s.Processed += l.Processed
			s.Decisions += *l.Decisions
			s.Conflicts += l.Conflicts
			s.Reloads += l.Reloads
			s.Reorders += l.Reorders
			s.HandedBack += l.HandedBack
			s.Errors += l.Errors
			p.nStop++
		}
		p.mu.Unlock()
		if l.Level == "WARN" || l.Level == "ERROR" {
			fmt.Fprintf(progress, "coordinator %d: %s\n", p.cmd.Process.Pid, sc.Text())
		}
	}
}

// holderID is the lease holder id the process logged, "" before it took
// a partition.
func (p *coordProc) holderID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder
}

// cpu is the process's user and system CPU time so far, from
// /proc/<pid>/stat (clock ticks of 10ms, the Linux USER_HZ).
func (p *coordProc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("reading a coordinator's CPU time (needs Linux /proc): %w", err)
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (field 3, state).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat %q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat %q", s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("unexpected /proc stat %q: %w", s, err)
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// stop ends the process with SIGTERM (its leases are released, its
// counters logged) and returns the counters of its "stopped" lines.
func (p *coordProc) stop() (coordinator.Stats, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(40 * time.Second)
}

// kill ends the process with SIGKILL.
func (p *coordProc) kill() {
	_ = p.cmd.Process.Kill()
	_, _ = p.wait(10 * time.Second)
}

func (p *coordProc) wait(d time.Duration) (coordinator.Stats, error) {
	waited := make(chan error, 1)
	go func() {
		<-p.done
		waited <- p.cmd.Wait()
	}()
	var err error
	select {
	case err = <-waited:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		err = errors.Join(fmt.Errorf("coordinator %d did not stop in %s", p.cmd.Process.Pid, d), <-waited)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = nil // stopped by the signal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.nStop == 0 && p.cmd.ProcessState != nil && p.cmd.ProcessState.Success() {
		err = fmt.Errorf("coordinator %d logged no \"stopped\" line with its counters", p.cmd.Process.Pid)
	}
	return p.stopped, err
}

// freshLeases deletes the leases bucket, so that a figure's coordinators
// create it with their own lease duration and see no leases of an earlier
// figure's.
func (e *env) freshLeases(ctx context.Context) error {
	err := e.js.DeleteKeyValue(ctx, coordinator.LeasesBucket)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("deleting the leases bucket: %w", err)
	}
	return nil
}

// leaseHolders reads the partition leases: partition → holder id (missing
// partitions are not held).
func (e *env) leaseHolders(ctx context.Context, partitions int) (map[int]jetstream.KeyValueEntry, error) {
	kv, err := e.js.KeyValue(ctx, coordinator.LeasesBucket)
	if err != nil {
		return nil, err
	}
	out := map[int]jetstream.KeyValueEntry{}
	for p := range partitions {
		ent, err := kv.Get(ctx, "lease."+strconv.Itoa(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[p] = ent
	}
	return out, nil
}

// holderOf is the holder id of a lease entry (coordinator.Holder JSON).
func holderOf(ent jetstream.KeyValueEntry) string {
	if h, err := coordinator.ParseHolder(ent.Value()); err == nil {
		return h.ID
	}
	return string(ent.Value())
}

// waitBalanced waits until every partition is held, by exactly the
// holders of procs, none holding more than its share.
func (e *env) waitBalanced(ctx context.Context, procs []*coordProc, partitions int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	share := (partitions + len(procs) - 1) / len(procs)
	var last string
	for {
		held, err := e.leaseHolders(ctx, partitions)
		if err == nil {
			count := map[string]int{}
			for _, ent := range held {
				count[holderOf(ent)]++
			}
			ok := len(held) == partitions && len(count) == len(procs)
			for _, p := range procs {
				if n := count[p.holderID()]; n == 0 || n > share {
					ok = false
				}
			}
			if ok {
				return nil
			}
			last = fmt.Sprintf("%d of %d partitions held, by %d holders: %v", len(held), partitions, len(count), count)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d coordinators did not share the %d partitions within %s (%s)", len(procs), partitions, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// decisionFilters are the subject filters of the decisions of a
// partition's runs (all runs' decisions with one partition).
func decisionFilters(p, partitions int) []string {
	var out []string
	for _, f := range eventlog.PartitionFilters(p, partitions) {
		// weft.r.<slot>.> or weft.r.> → the decisions under it.
		base := strings.TrimSuffix(f, ">")
		if base == strings.TrimSuffix(eventlog.AllEvents, ">") {
			base += "*."
		}
		out = append(out, base+"*.d.>")
	}
	return out
}
