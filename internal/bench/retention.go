package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/runs"
)

// runRetention measures the log at scale (issue 13): a nats-server
// process of its own (so that its RSS is the server's alone) holds N ended
// runs (MemRuns at full size, a fifth in -quick), each a short log of
// four events on four subjects, one in ten failed, each with its entry in
// the read model of runs. The figures: the server's RSS, its live heap
// after a GC, and the stream's subject count with the runs and after
// retention removed them (runs.Sweep, archiving each to a directory
// first), against the empty server's, and the share of the runs' heap the
// server kept (RSS also counts idle heap the Go runtime returns to the OS
// lazily, so the heap is the figure with a target); 'weft list -status
// failed' (the read model's List, a page of 50) p50 with the N runs in the
// read model; the archive rate (archive, purge, per run) and the restore
// rate (a removed run read back from the archive and folded) in runs per
// second, to a directory and to the Object Store bucket.
func runRetention(ctx context.Context, e *env) ([]Result, error) {
	n := e.sizes.MemRuns
	if e.cfg.Quick {
		n /= 5
	}
	if v, err := strconv.Atoi(os.Getenv("WEFTBENCH_RETENTION_RUNS")); err == nil && v > 0 {
		n = v // for a quick look at one size
	}
	srv, err := e.startServerProcess(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	nc, err := nats.Connect(srv.url, nats.Name("weftbench retention"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, js, "WEFT", e.storage())
	if err != nil {
		return nil, err
	}
	if err := events.EnsureTimers(ctx, store); err != nil {
		return nil, err
	}
	model, err := runs.Ensure(ctx, js, "WEFT", e.quiet)
	if err != nil {
		return nil, err
	}
	arch, err := runs.OpenObjectStore(ctx, js, runs.ArchiveBucket, "WEFT", true)
	if err != nil {
		return nil, err
	}
	emptyRSS := srv.settledRSS(ctx, 0, 30*time.Second)
	emptyMem, err := srv.mem(ctx)
	if err != nil {
		return nil, err
	}
	emptyHeap := emptyMem.HeapAlloc
	e.logf("empty server: RSS %.1f MiB; %s", mib(emptyRSS), emptyMem)
	g, err := graph.New("orders").Node("work", "noop").Edge(graph.Start, "work").Edge("work", graph.End).Build()
	if err != nil {
		return nil, err
	}
	e.logf("writing %d ended runs", n)
	t0 := time.Now()
	for done := 0; done < n; done += 1000 {
		if err := writeEndedRuns(ctx, js, g, done, min(1000, n-done)); err != nil {
			return nil, err
		}
	}
	e.logf("wrote %d runs in %s", n, time.Since(t0).Round(time.Millisecond))
	loadedSubjects, err := subjectCount(ctx, js, "WEFT")
	if err != nil {
		return nil, err
	}
	loadedRSS := srv.settledRSS(ctx, 0, 30*time.Second)
	loadedMem, err := srv.mem(ctx)
	if err != nil {
		return nil, err
	}
	loadedHeap := loadedMem.HeapAlloc
	e.logf("with %d runs: RSS %.1f MiB; %s", n, mib(loadedRSS), loadedMem)

	// weft list -status failed: a page of the newest 50.
	var lat []time.Duration
	var failed int
	for range 21 {
		t := time.Now()
		p, err := model.List(ctx, runs.Query{Statuses: []projection.RunStatus{projection.RunFailed}, Limit: 50})
		if err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
		failed = p.Total
	}
	slices.Sort(lat)
	listP50 := lat[len(lat)/2]
	if failed != n/10 {
		return nil, fmt.Errorf("the read model lists %d failed runs, want %d", failed, n/10)
	}

	// Retention: every run's time has come; each is archived (to a
	// directory: the server's memory is measured, not the archive's),
	// then purged.
	dirArch, err := runs.OpenDir(mustMkdir(e.tmp, "archive"))
	if err != nil {
		return nil, err
	}
	dirRate, dirIDs, err := sweepAll(ctx, e, store, dirArch, n)
	if err != nil {
		return nil, err
	}
	afterSubjects, err := subjectCount(ctx, js, "WEFT")
	if err != nil {
		return nil, err
	}
	// An idle Go server collects its heap at the latest every two
	// minutes, and only then returns freed memory: a large figure waits
	// for that.
	settle := 10 * time.Second
	if n >= 1000 {
		settle = 150 * time.Second
	}
	t0 = time.Now()
	afterRSS := srv.settledRSS(ctx, emptyRSS, settle)
	settled := time.Since(t0)
	afterMem, err := srv.mem(ctx)
	if err != nil {
		return nil, err
	}
	afterHeap := afterMem.HeapAlloc
	e.logf("after removal: RSS %.1f MiB after %s; %s; RSS now %.1f MiB", mib(afterRSS), settled.Round(time.Second), afterMem, mib(vmRSS(srv.cmd.Process.Pid)))
	dirRestore, err := restoreRate(ctx, store, dirArch, dirIDs)
	if err != nil {
		return nil, err
	}
	// The default archive, an Object Store bucket on the same server.
	m := min(n, 2000)
	for done := 0; done < m; done += 1000 {
		if err := writeEndedRuns(ctx, js, g, done, min(1000, m-done)); err != nil {
			return nil, err
		}
	}
	objRate, objIDs, err := sweepAll(ctx, e, store, arch, m)
	if err != nil {
		return nil, err
	}
	objRestore, err := restoreRate(ctx, store, arch, objIDs)
	if err != nil {
		return nil, err
	}

	kept := 0.0
	if loadedHeap > emptyHeap {
		kept = 100 * (float64(afterHeap) - float64(emptyHeap)) / (float64(loadedHeap) - float64(emptyHeap))
	}
	notes := fmt.Sprintf("%d ended runs (4 events, 4 subjects each; 1 in 10 failed) in a nats-server process of its own, %s storage; empty server %.1f MiB",
		n, e.cfg.Storage, mib(emptyRSS))
	sweepNotes := "runs.Sweep, 16 runs at a time: read the log, gzip it to the archive, purge the run's events, timers, snapshot and read-model entry by subject"
	return []Result{
		row(fmt.Sprintf("retention: server RSS with %d ended runs", n), mib(loadedRSS), "MiB", mib(emptyRSS), nil, notes),
		row(fmt.Sprintf("retention: server RSS after removing %d runs", n), mib(afterRSS), "MiB", mib(emptyRSS), nil,
			fmt.Sprintf("floor: the empty server's RSS; VmRSS read each second after the sweep (which archived every run to a directory and purged it by subject) until within 20%% of the floor, at most %s: this one after %s", settle, settled.Round(time.Second))),
		row(fmt.Sprintf("retention: server heap with %d ended runs", n), mib(loadedHeap), "MiB", mib(emptyHeap), nil,
			"the server's live heap after a GC (HeapAlloc, from its --profile endpoint); floor: the empty server's"),
		row(fmt.Sprintf("retention: server heap after removing %d runs", n), mib(afterHeap), "MiB", mib(emptyHeap), nil,
			"the server's live heap after a GC once retention removed every run; the RSS rows count, besides, the heap the Go runtime keeps idle and returns to the OS lazily"),
		row("retention: share of the runs' heap kept after removal", kept, "%", 0, valueAtMost(20),
			"(heap after − empty) / (heap with the runs − empty): what purging by subject did not give back; a constant of the buckets and connections dominates at small sizes"),
		row(fmt.Sprintf("retention: stream subjects with %d ended runs", n), float64(loadedSubjects), "subjects", 0, nil, ""),
		row(fmt.Sprintf("retention: stream subjects after removing %d runs", n), float64(afterSubjects), "subjects", 0, valueAtMost(0), ""),
		row(fmt.Sprintf("weft list -status failed p50 (%d runs in the read model)", n), float64(listP50.Microseconds())/1000, "ms", 0, nil,
			fmt.Sprintf("a page of 50 of %d failed runs, from the read model's subject index (KV weft-runs, keys <status>.<run>); 21 calls", n/10)),
		row("archive rate, Object Store (archive + purge)", objRate, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs, to the Object Store bucket weft-archive on the same server", sweepNotes, m)),
		row("restore rate, Object Store (read + fold)", objRestore, "runs/s", 0, nil, fmt.Sprintf("%d removed runs read back through runs.Read (live log first, then the archive) and folded, 8 at a time", min(m, 2000))),
		row("archive rate, directory (archive + purge)", dirRate, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs, to a local directory", sweepNotes, n)),
		row("restore rate, directory (read + fold)", dirRestore, "runs/s", 0, nil, fmt.Sprintf("%d removed runs read back and folded, 8 at a time", min(n, 2000))),
	}, nil
}

func mustMkdir(parent, name string) string {
	dir := filepath.Join(parent, name)
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

// sweepAll removes every ended run through runs.Sweep to arch and returns
// the rate in runs/s and the ids removed; want is how many there are.
func sweepAll(ctx context.Context, e *env, store events.Store, arch runs.Archive, want int) (float64, []string, error) {
	t0 := time.Now()
	res, err := runs.Sweep(ctx, store, arch, time.Now().Add(time.Minute), 0, e.quiet)
	if err != nil {
		return 0, nil, err
	}
	took := time.Since(t0)
	if len(res.Removed) != want {
		for run, why := range res.Failed {
			return 0, nil, fmt.Errorf("retention removed %d of %d runs (%d failed; run %s: %s)", len(res.Removed), want, len(res.Failed), run, why)
		}
		return 0, nil, fmt.Errorf("retention removed %d of %d runs", len(res.Removed), want)
	}
	ids := make([]string, 0, len(res.Removed))
	for _, r := range res.Removed {
		ids = append(ids, r.RunID)
	}
	e.logf("removed %d runs to %s in %s", want, arch, took.Round(time.Millisecond))
	return float64(want) / took.Seconds(), ids, nil
}

// restoreRate reads up to 2000 removed runs back and folds them.
func restoreRate(ctx context.Context, store events.Store, arch runs.Archive, ids []string) (float64, error) {
	sample := ids[:min(len(ids), 2000)]
	t0 := time.Now()
	if err := restoreAll(ctx, store, arch, sample); err != nil {
		return 0, err
	}
	return float64(len(sample)) / time.Since(t0).Seconds(), nil
}

// writeEndedRuns appends count ended runs of g and their read-model
// entries, as fast as the server takes them.
func writeEndedRuns(ctx context.Context, js jetstream.JetStream, g *graph.Graph, from, count int) error {
	var msgs []*nats.Msg
	at := time.Now().UTC()
	for i := from; i < from+count; i++ {
		run := events.NewRunID()
		evs, err := endedRun(run, g, at, i%10 == 0)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			m, err := events.Encode(ev)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		s := projection.Fold(evs)
		s.EndedAt = &at // the fold of unstored events has no stored time
		sum := runs.Summarize(s, 0)
		b, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		msgs = append(msgs, &nats.Msg{Subject: "$KV." + runs.Bucket + "." + sum.Key(), Data: b})
	}
	return publishAll(ctx, js, msgs)
}

// endedRun is a run's log: started, one node ready and taken, ended.
func endedRun(run string, g *graph.Graph, at time.Time, failed bool) ([]*events.Event, error) {
	started, err := startedEvent(run, g, json.RawMessage(`{"customer":"acme"}`))
	if err != nil {
		return nil, err
	}
	ref := events.NodeRef{Node: "work"}
	ready, err := events.New(run, events.DecisionID(run, events.NodeReady, "work"), at, &events.NodeReadyData{
		NodeRef: ref, Attempt: 1, Type: "noop", Queue: "default", IdempotencyKey: events.IdempotencyKey(run, ref, 1),
	})
	if err != nil {
		return nil, err
	}
	ready.Decision = true
	invoking, err := events.New(run, events.RandomID(), at, &events.NodeInvokingData{NodeRef: ref, Attempt: 1, Delivery: 1, Worker: "bench"})
	if err != nil {
		return nil, err
	}
	invoking.Queue = "default"
	var end *events.Event
	if failed {
		end, err = events.New(run, events.DecisionID(run, events.RunFailed), at, &events.RunFailedData{Error: events.Failure{Type: "Bench", Message: "failed on purpose"}})
	} else {
		end, err = events.New(run, events.DecisionID(run, events.RunCompleted), at, &events.RunCompletedData{})
	}
	if err != nil {
		return nil, err
	}
	end.Decision = true
	return []*events.Event{started, ready, invoking, end}, nil
}

func restoreAll(ctx context.Context, store events.Store, arch runs.Archive, ids []string) error {
	errs := make([]error, len(ids))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			evs, err := runs.Read(ctx, store, arch, id)
			if err == nil && !projection.Fold(evs).Status.Ended() {
				err = fmt.Errorf("restored run %s has not ended", id)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func subjectCount(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.NumSubjects, nil
}

// serverProc is a nats-server process of the figure's own.
type serverProc struct {
	*proc
	url  string
	prof string // its profiling endpoint (--profile)
}

// memStats are the server's runtime.MemStats as its heap profile prints
// them (/debug/pprof/heap?gc=1&debug=1, after a GC): HeapAlloc is its live
// heap; HeapIdle − HeapReleased is heap the runtime holds but does not
// use (counted in RSS until the scavenger returns it to the OS).
type memStats struct {
	HeapAlloc, HeapInuse, HeapIdle, HeapReleased, HeapSys, StackSys, Sys uint64
	NextGC, NumGC                                                        uint64
}

// String is a log line of the figures that make up RSS.
func (m memStats) String() string {
	return fmt.Sprintf("heap alloc %.1f MiB, in use %.1f, idle %.1f (released %.1f), stacks %.1f, sys %.1f MiB; next GC at %.1f MiB; %d GCs",
		mib(m.HeapAlloc), mib(m.HeapInuse), mib(m.HeapIdle), mib(m.HeapReleased), mib(m.StackSys), mib(m.Sys), mib(m.NextGC), m.NumGC)
}

// mem returns the server's MemStats after a GC.
func (s *serverProc) mem(ctx context.Context) (memStats, error) {
	var m memStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.prof+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("reading the server's heap: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return m, err
	}
	fields := map[string]*uint64{
		"HeapAlloc": &m.HeapAlloc, "HeapInuse": &m.HeapInuse, "HeapIdle": &m.HeapIdle, "HeapReleased": &m.HeapReleased,
		"HeapSys": &m.HeapSys, "Stack": &m.StackSys, "NextGC": &m.NextGC, "Sys": &m.Sys, "NumGC": &m.NumGC,
	}
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if _, sys, ok := strings.Cut(v, " / "); ok { // Stack = inuse / sys
			v = sys
		}
		if p, want := fields[k]; ok && want {
			if *p, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64); err != nil {
				return m, fmt.Errorf("the server's heap profile: %s: %w", k, err)
			}
			seen++
		}
	}
	if seen < len(fields) {
		return m, fmt.Errorf("the server's heap profile lacks MemStats (%d of %d fields)", seen, len(fields))
	}
	return m, nil
}

// startServerProcess builds nats-server from the module Weft embeds and
// starts it with JetStream on a free loopback port.
func (e *env) startServerProcess(ctx context.Context) (*serverProc, error) {
	bin, err := e.natsServerBinary(ctx)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	profPort := l2.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	_ = l2.Close()
	dir, err := os.MkdirTemp(e.tmp, "retention-")
	if err != nil {
		return nil, err
	}
	p, err := e.spawnEnv(strings.Fields(os.Getenv("WEFTBENCH_SERVER_ENV")), bin, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-l", filepath.Join(dir, "server.log"),
		"--profile", strconv.Itoa(profPort))
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			return &serverProc{proc: p, url: url, prof: fmt.Sprintf("http://127.0.0.1:%d", profPort)}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.stop()
			return nil, fmt.Errorf("nats-server on port %d did not start: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) natsServerBinary(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	const key = "nats-server"
	if p, ok := e.bins[key]; ok {
		return p, nil
	}
	out := filepath.Join(e.tmp, "bin", key)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build nats-server (run weftbench inside the module): %v\n%s", err, b)
	}
	e.bins[key] = out
	return out, nil
}

// settledRSS reads the server's RSS a second apart for at most max: with
// goal 0 until it stops falling (three readings no lower), with a goal
// until it is within 20% of it; it returns the lowest reading.
func (s *serverProc) settledRSS(ctx context.Context, goal uint64, max time.Duration) uint64 {
	pid := s.cmd.Process.Pid
	last, same := vmRSS(pid), 0
	for deadline := time.Now().Add(max); time.Now().Before(deadline) && ctx.Err() == nil; {
		if os.Getenv("WEFTBENCH_RSS_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "rss %.1f MiB\n", mib(last))
		}
		if goal > 0 && float64(last) <= 1.2*float64(goal) {
			return last
		}
		time.Sleep(time.Second)
		r := vmRSS(pid)
		if r >= last {
			if same++; goal == 0 && same >= 3 {
				return last
			}
		} else {
			same = 0
		}
		last = min(last, r)
	}
	return last
}
