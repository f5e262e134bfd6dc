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

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// runRetention measures the log at scale (issue 13): a nats-server
// process of its own (so that its RSS is the server's alone) holds N ended
// runs (MemRuns at full size, a fifth in -quick), each a short log of
// four events on four subjects, one in ten failed, each with its entry in
// the read model of runs, written straight to the stream (see
// writeEndedRuns). The figures: the server's RSS, its live heap after a
// GC, and the stream's subject count with the runs and after retention
// removed them (readmodel.Sweep, archiving each to a directory first), against
// the empty server's; 'weft list -status failed' (the read model's List,
// a page of 50) p50 with the N runs in the read model; the archive rate
// (archive, purge, per run), the restore rate (readmodel.Restore: a removed
// run put back into the stream, live again) and the archived-read rate
// (readmodel.Read of a removed run, folded) in runs per second, to a directory
// and to the Object Store bucket.
//
// Size: a benchmark script, read top to bottom (write, measure, sweep,
// restore, report rows); its steps share a dozen figures, and half its
// length is the rows' notes.
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
	defer func() { _ = srv.stop() }() // the process of the last (re)start
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
	if err := eventlog.EnsureTimers(ctx, store); err != nil {
		return nil, err
	}
	model, err := readmodel.Ensure(ctx, js, "WEFT", e.quiet)
	if err != nil {
		return nil, err
	}
	arch, err := readmodel.OpenObjectStore(ctx, js, readmodel.ArchiveBucket, "WEFT", true)
	if err != nil {
		return nil, err
	}
	emptyRSS := srv.settledRSS(ctx, 0, 30*time.Second)
	emptyMem, err := srv.mem(ctx)
	if err != nil {
		return nil, err
	}
	e.logf("empty server: RSS %.1f MiB (%s); %s", mib(emptyRSS), rssParts(srv.cmd.Process.Pid), emptyMem)
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
	wrote := time.Since(t0)
	e.logf("wrote %d runs in %s", n, wrote.Round(time.Millisecond))
	var burstRSS uint64
	if e.restartAfterWrites() {
		if burstRSS, err = restartPastWindow(ctx, e, srv, js); err != nil {
			return nil, err
		}
	}
	loadedSubjects, err := subjectCount(ctx, js, "WEFT")
	if err != nil {
		return nil, err
	}
	loadedRSS := srv.settledRSS(ctx, 0, 30*time.Second)
	loadedMem, err := srv.mem(ctx)
	if err != nil {
		return nil, err
	}
	e.logf("with %d runs: RSS %.1f MiB (%s); %s; the server's store: %s", n, mib(loadedRSS), rssParts(srv.cmd.Process.Pid), loadedMem, dirSize(srv.dir))

	// weft list -status failed: a page of the newest 50.
	var lat []time.Duration
	var failed int
	for range 21 {
		t := time.Now()
		p, err := model.List(ctx, readmodel.Query{Statuses: []projection.RunStatus{projection.RunFailed}, Limit: 50})
		if err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
		failed = p.Total
	}
	slices.Sort(lat)
	listP50 := lat[len(lat)/2]
	if failed != (n+9)/10 {
		return nil, fmt.Errorf("the read model lists %d failed runs, want %d", failed, (n+9)/10)
	}

	// Retention: every run's time has come; each is archived (to a
	// directory: the server's memory is measured, not the archive's),
	// then purged.
	dirArch, err := readmodel.OpenDir(mustMkdir(e.tmp, "archive"))
	if err != nil {
		return nil, err
	}
	if d, err := time.ParseDuration(os.Getenv("WEFTBENCH_RETENTION_SWEEP_AFTER")); err == nil && d > 0 {
		// Retention comes days after a run's writes, long past the
		// stream's de-duplication window: a look at the sweep as it
		// meets the server then.
		e.logf("waiting %s before the sweep", d)
		time.Sleep(d)
		m, err := srv.mem(ctx)
		if err != nil {
			return nil, err
		}
		e.logf("before the sweep: RSS %.1f MiB (%s); %s", mib(vmRSS(srv.cmd.Process.Pid)), rssParts(srv.cmd.Process.Pid), m)
	}
	peakRSS := vmRSS(srv.cmd.Process.Pid)
	stopPeak := srv.watchPeak(&peakRSS)
	dirRate, dirIDs, err := sweepAll(ctx, e, store, dirArch, n)
	stopPeak()
	if err != nil {
		return nil, err
	}
	afterSubjects, err := subjectCount(ctx, js, "WEFT")
	if err != nil {
		return nil, err
	}
	modelSubjects, err := subjectCount(ctx, js, "KV_"+readmodel.Bucket)
	if err != nil {
		return nil, err
	}
	sweptRSS := vmRSS(srv.cmd.Process.Pid)
	e.logf("after the sweep: RSS %.1f MiB (peak during it %.1f MiB); the server's store: %s", mib(sweptRSS), mib(peakRSS), dirSize(srv.dir))
	// The server forgets the events' de-duplication ids once the
	// stream's window (2 minutes) passed since they were written: a
	// large figure waits that long at most.
	wait := 20 * time.Second
	if n >= 10000 {
		wait = 150 * time.Second
	}
	if d, err := time.ParseDuration(os.Getenv("WEFTBENCH_RETENTION_WAIT")); err == nil && d > 0 {
		wait = d
	}
	after := srv.returnedRSS(ctx, e, emptyRSS, wait)
	e.logf("after removal: RSS %.1f MiB after %d GCs in %s (now %s); %s", mib(after.rss), after.gcs, after.took.Round(time.Second), rssParts(srv.cmd.Process.Pid), after.mem)
	if e.cfg.MemProfile != "" {
		if err := srv.saveHeap(ctx, filepath.Join(e.cfg.MemProfile, "retention-server-after.mem.pprof")); err != nil {
			e.logf("saving the server's heap profile: %v", err)
		}
	}

	dirRestore, dirRead, err := restoreRates(ctx, e, store, dirArch, dirIDs)
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
	objRestore, objRead, err := restoreRates(ctx, e, store, arch, objIDs)
	if err != nil {
		return nil, err
	}

	kept := 0.0
	if loadedMem.HeapAlloc > emptyMem.HeapAlloc {
		kept = 100 * (float64(after.mem.HeapAlloc) - float64(emptyMem.HeapAlloc)) / (float64(loadedMem.HeapAlloc) - float64(emptyMem.HeapAlloc))
	}
	held := "the server that wrote them (WEFTBENCH_RETENTION_RESTART=0)"
	if e.restartAfterWrites() {
		held = "the server restarted on their store once the stream's de-duplication window had passed since the writes (retention meets runs days after their writes; see restartPastWindow)"
	}
	notes := fmt.Sprintf("%d ended runs (4 events on 4 subjects each, 1 in 10 failed, written straight to the stream with their read-model entries) in a nats-server process of its own, %s storage, its environment %s; held by %s; empty server %.1f MiB",
		n, e.cfg.Storage, serverEnvNote(), held, mib(emptyRSS))
	sweepNotes := "readmodel.Sweep, 16 runs at a time: read the log, gzip it to the archive, purge the run's events, timers, snapshot and read-model entry by subject"
	restoreNotes := "readmodel.Restore, 8 at a time: the archived run's messages republished in order, each checked to follow the one before (original stored times in Weft-Restored), its snapshot dropped, its read-model entry written"
	readNotes := "readmodel.Read of a removed run (live log first, then the archive) and a fold, 8 at a time"
	var rows []Result
	if burstRSS > 0 {
		rows = append(rows, row(fmt.Sprintf("retention: RSS of the server that wrote %d runs, before its restart", n), mib(burstRSS), "MiB", mib(emptyRSS), nil,
			fmt.Sprintf("the %d runs written in %s: for the stream's de-duplication window the server holds every event's message id; the Go runtime keeps the span and GC metadata of the largest heap a process reached until it exits", n, wrote.Round(time.Second))))
	}
	return append(rows,
		row(fmt.Sprintf("retention: server RSS with %d ended runs", n), mib(loadedRSS), "MiB", mib(emptyRSS), nil, notes),
		row(fmt.Sprintf("retention: server RSS right after removing %d runs", n), mib(sweptRSS), "MiB", mib(emptyRSS), nil,
			fmt.Sprintf("VmRSS when the sweep returned; %.1f MiB at its highest during the sweep (the heap grows to the GC goal, twice the live heap with the runs and the blocks the purges load); the Go runtime returns freed heap to the OS over the next GC cycles", mib(peakRSS))),
		row(fmt.Sprintf("retention: server RSS after removing %d runs", n), mib(after.rss), "MiB", mib(emptyRSS), ratioAtMost(1.5),
			fmt.Sprintf("floor: the empty server's RSS; VmRSS read each second while the server collects its garbage (a GC through its profiling endpoint each second, standing in for the forced GC an idle Go server runs every two minutes; the scavenger returns a chunk only after it stayed free a GC cycle), until within 20%% of the floor, at most %s (the stream forgets the runs' de-duplication ids 2 minutes after they were written): %d GCs, %s; %s; what stays is the runtime's metadata for the largest heap, spans kept by a few live objects and the binary's code pages (internal/readmodel doc, Memory of the server)", wait, after.gcs, after.took.Round(time.Second), after.mem)),
		row(fmt.Sprintf("retention: server heap with %d ended runs", n), mib(loadedMem.HeapAlloc), "MiB", mib(emptyMem.HeapAlloc), nil,
			"the server's live heap after a GC (HeapAlloc, from its --profile endpoint); floor: the empty server's"),
		row(fmt.Sprintf("retention: server heap after removing %d runs", n), mib(after.mem.HeapAlloc), "MiB", mib(emptyMem.HeapAlloc), nil,
			"the server's live heap after a GC once retention removed every run"),
		row("retention: share of the runs' heap kept after removal", kept, "%", 0, valueAtMost(20),
			"(heap after − empty) / (heap with the runs − empty): what purging by subject did not give back; when the sweep ends within the stream's 2-minute de-duplication window of the runs' writes, most of it is that window's message ids (the server's heap profile, -memprofile: stream.storeMsgIdLocked), which go when it passes"),
		row(fmt.Sprintf("retention: stream subjects with %d ended runs", n), float64(loadedSubjects), "subjects", 0, nil, ""),
		row(fmt.Sprintf("retention: stream subjects after removing %d runs", n), float64(afterSubjects), "subjects", 0, valueAtMost(0),
			fmt.Sprintf("events stream WEFT; the read model's bucket (KV_weft-runs) has %d subjects left", modelSubjects)),
		row(fmt.Sprintf("weft list -status failed p50 (%d runs in the read model)", n), float64(listP50.Microseconds())/1000, "ms", 0, nil,
			fmt.Sprintf("a page of 50 of %d failed runs, from the read model's subject index (KV weft-runs, keys <status>.<run>); 21 calls", failed)),
		row("archive rate, Object Store (archive + purge)", objRate, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs, to the Object Store bucket weft-archive on the same server", sweepNotes, m)),
		row("restore rate, Object Store (put back live)", objRestore, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs", restoreNotes, len(objIDs))),
		row("archived read rate, Object Store (read + fold)", objRead, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs", readNotes, len(objIDs))),
		row("archive rate, directory (archive + purge)", dirRate, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs, to a local directory", sweepNotes, n)),
		row("restore rate, directory (put back live)", dirRestore, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs", restoreNotes, min(n, 2000))),
		row("archived read rate, directory (read + fold)", dirRead, "runs/s", 0, nil, fmt.Sprintf("%s; %d runs", readNotes, min(n, 2000))),
	), nil
}

// restartAfterWrites says whether the runs are measured in a server
// restarted on their store once the stream's de-duplication window passed
// (WEFTBENCH_RETENTION_RESTART, default 1), rather than in the process
// that wrote them all within a minute or two ("0"). "now" restarts
// without waiting for the window (the tests: the restart, not the figure).
// A stream on memory storage (-storage memory) would not outlive a
// restart: its runs are measured in the writing server.
func (e *env) restartAfterWrites() bool {
	return os.Getenv("WEFTBENCH_RETENTION_RESTART") != "0" && e.storage() == jetstream.FileStorage
}

// restartPastWindow waits until the stream's de-duplication window has
// passed since the last write, restarts the server on the same store (a
// server restarted within the window rebuilds the window's message ids
// from the log) and waits until the stream answers again. It returns the
// writing server's RSS, settled, before the restart.
//
// Retention meets runs days after their writes: the server then holds
// the runs (their messages, subjects and read-model keys) but not the
// heap its write burst once needed. Writing 100,000 runs in a minute puts
// 400,000 message ids in the window at once, and the Go runtime keeps the
// span and GC metadata of the largest heap it reached for the life of the
// process (internal/readmodel doc, Memory of the server); a restart is how
// the figure sees the runs as retention finds them.
func restartPastWindow(ctx context.Context, e *env, srv *serverProc, js jetstream.JetStream) (uint64, error) {
	written := time.Now()
	burst := srv.settledRSS(ctx, 0, 30*time.Second)
	mem, err := srv.mem(ctx)
	if err != nil {
		return 0, err
	}
	e.logf("the writing server: RSS %.1f MiB (%s); %s", mib(burst), rssParts(srv.cmd.Process.Pid), mem)
	st, err := js.Stream(ctx, "WEFT")
	if err != nil {
		return 0, err
	}
	window := st.CachedInfo().Config.Duplicates
	if d := time.Until(written.Add(window + 5*time.Second)); d > 0 && os.Getenv("WEFTBENCH_RETENTION_RESTART") != "now" {
		e.logf("waiting %s for the stream's de-duplication window (%s) to pass", d.Round(time.Second), window)
		time.Sleep(d)
	}
	t0 := time.Now()
	if err := srv.restart(ctx, e); err != nil {
		return 0, err
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Stream(cctx, "WEFT")
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) || ctx.Err() != nil || time.Since(t0) > 2*time.Minute {
			return 0, fmt.Errorf("the restarted server's stream: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.logf("restarted the server on its store in %s", time.Since(t0).Round(time.Millisecond))
	return burst, nil
}

// serverEnv is what the figure's nats-server runs with, besides the
// harness's environment: WEFTBENCH_SERVER_ENV (for example
// "GOMEMLIMIT=256MiB GOGC=50") adds to it.
func serverEnv() []string { return strings.Fields(os.Getenv("WEFTBENCH_SERVER_ENV")) }

func serverEnvNote() string {
	if v := serverEnv(); len(v) > 0 {
		return strings.Join(v, " ")
	}
	return "as is (no GOGC, GOMEMLIMIT or GODEBUG)"
}

// returned is the server's memory once it gave back what it could.
type returned struct {
	rss  uint64
	mem  memStats
	gcs  int
	took time.Duration
}

// returnedRSS collects the server's garbage once a second (through its
// profiling endpoint) and reads its VmRSS, until it is within 20% of goal
// or for at most max; it returns the lowest reading.
func (s *serverProc) returnedRSS(ctx context.Context, e *env, goal uint64, max time.Duration) returned {
	t0 := time.Now()
	pid := s.cmd.Process.Pid
	out := returned{rss: vmRSS(pid)}
	for deadline := t0.Add(max); time.Now().Before(deadline) && ctx.Err() == nil; {
		m, err := s.mem(ctx)
		if err != nil {
			e.logf("reading the server's memory: %v", err)
			break
		}
		out.mem, out.gcs = m, out.gcs+1
		time.Sleep(time.Second)
		out.rss = min(out.rss, vmRSS(pid))
		if out.gcs%30 == 0 {
			e.logf("after removal, %s: RSS %.1f MiB (%s); %s", time.Since(t0).Round(time.Second), mib(vmRSS(pid)), rssParts(pid), m)
		}
		if float64(out.rss) <= 1.2*float64(goal) {
			break
		}
	}
	out.took = time.Since(t0)
	return out
}

// saveHeap writes the server's heap profile (pprof format) to path.
func (s *serverProc) saveHeap(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.prof+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// watchPeak records the server's highest VmRSS in *peak, read every 100
// ms, until the returned function is called.
func (s *serverProc) watchPeak(peak *uint64) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				*peak = max(*peak, vmRSS(s.cmd.Process.Pid))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func mustMkdir(parent, name string) string {
	dir := filepath.Join(parent, name)
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

// sweepAll removes every ended run through readmodel.Sweep to arch and returns
// the rate in runs/s and the ids removed; want is how many there are.
func sweepAll(ctx context.Context, e *env, store events.Store, arch readmodel.Archive, want int) (float64, []string, error) {
	t0 := time.Now()
	res, err := readmodel.Sweep(ctx, store, arch, time.Now().Add(time.Minute), 0, e.quiet)
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

// restoreRates restores up to 2000 removed runs from arch (readmodel.Restore)
// and reads as many back from it (readmodel.Read of runs removed again), 8 at
// a time, and returns both rates in runs/s.
func restoreRates(ctx context.Context, e *env, store events.Store, arch readmodel.Archive, ids []string) (restore, read float64, err error) {
	sample := ids[:min(len(ids), 2000)]
	t0 := time.Now()
	if err := eachRun(sample, func(id string) error {
		r, err := readmodel.Restore(ctx, store, arch, id, readmodel.DefaultRetention)
		if err == nil && !r.Status.Ended() {
			err = fmt.Errorf("restored run %s has not ended", id)
		}
		return err
	}); err != nil {
		return 0, 0, err
	}
	restore = float64(len(sample)) / time.Since(t0).Seconds()
	e.logf("restored %d runs from %s: %.0f runs/s", len(sample), arch, restore)
	// Removed again, they are read back from the archive.
	if err := eachRun(sample, func(id string) error {
		_, err := readmodel.Remove(ctx, store, id, nil) // the archive has it
		return err
	}); err != nil {
		return 0, 0, err
	}
	t0 = time.Now()
	if err := eachRun(sample, func(id string) error {
		evs, err := readmodel.Read(ctx, store, arch, id)
		if err == nil && !projection.Fold(evs).Status.Ended() {
			err = fmt.Errorf("archived run %s has not ended", id)
		}
		return err
	}); err != nil {
		return 0, 0, err
	}
	read = float64(len(sample)) / time.Since(t0).Seconds()
	return restore, read, nil
}

// eachRun calls fn for every run, 8 at a time.
func eachRun(ids []string, fn func(string) error) error {
	errs := make([]error, len(ids))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(id)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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
			m, err := eventlog.Encode(ev)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		s := projection.Fold(evs)
		s.EndedAt = &at // the fold of unstored events has no stored time
		sum := readmodel.Summarize(s, 0)
		b, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		msgs = append(msgs, &nats.Msg{Subject: "$KV." + readmodel.Bucket + "." + sum.Key(), Data: b})
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
	ready, err := events.New(run, eventlog.DecisionID(run, events.NodeReady, "work"), at, &events.NodeReadyData{
		NodeRef: ref, Attempt: 1, Type: "noop", Queue: "default", IdempotencyKey: eventlog.IdempotencyKey(run, ref, 1),
	})
	if err != nil {
		return nil, err
	}
	eventlog.MarkDecision(ready)
	invoking, err := events.New(run, eventlog.RandomID(), at, &events.NodeInvokingData{NodeRef: ref, Attempt: 1, Delivery: 1, Worker: "bench"})
	if err != nil {
		return nil, err
	}
	invoking.Queue = "default"
	var end *events.Event
	if failed {
		end, err = events.New(run, eventlog.DecisionID(run, events.RunFailed), at, &events.RunFailedData{Error: events.Failure{Type: "Bench", Message: "failed on purpose"}})
	} else {
		end, err = events.New(run, eventlog.DecisionID(run, events.RunCompleted), at, &events.RunCompletedData{})
	}
	if err != nil {
		return nil, err
	}
	eventlog.MarkDecision(end)
	return []*events.Event{started, ready, invoking, end}, nil
}

// rssParts reads the RssAnon, RssFile and Threads lines of a process's
// status: memory of its own (heap, stacks, runtime metadata), pages of
// files it mapped (its binary's code and data, as far as it ran them),
// and its OS threads (each keeps its stack; Go never ends one it made).
func rssParts(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	var parts []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "RssAnon" || k == "RssFile" || k == "Threads") {
			parts = append(parts, k+" "+strings.Join(strings.Fields(v), " "))
		}
	}
	return strings.Join(parts, ", ") + "; " + anonParts(pid)
}

// anonParts splits a process's anonymous resident memory (from
// /proc/PID/smaps) by where it lies, on linux/amd64: the Go heap's arenas
// (anonymous mappings below the shared libraries, 0x7f…, and past the
// binary), which hold the heap's spans and the goroutines' stacks; the
// runtime's memory outside the heap (anonymous mappings among the shared
// libraries: span structures, GC mark bits, the page allocator's index,
// the OS threads' stacks), which the runtime sizes for the largest heap
// it had and keeps; and the binary's data and bss and the main
// thread's stack.
func anonParts(pid int) string {
	heap, offHeap, data, err := anonMem(pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("anonymous: heap arenas %.1f MiB, runtime outside the heap %.1f MiB, binary data and main stack %.1f MiB", mib(heap), mib(offHeap), mib(data))
}

// anonMem is anonParts's figures, in bytes.
func anonMem(pid int) (heap, offHeap, data uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	var start uint64
	var file bool
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, _, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			start, _ = strconv.ParseUint(lo, 16, 64)
			file = len(f) >= 6
			continue
		}
		if f[0] != "Anonymous:" || len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch {
		case file:
			data += kb << 10
		case start >= 0x7f0000000000:
			offHeap += kb << 10
		case start >= 0x10000000:
			heap += kb << 10
		default:
			data += kb << 10 // the bss right after the binary
		}
	}
	return heap, offHeap, data, nil
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
	bin            string
	port, profPort int
	url            string
	prof           string // its profiling endpoint (--profile)
	dir            string // its store directory (-sd)
}

// dirSize sums the sizes of the files under dir, and counts the message
// blocks (*.blk) among them.
func dirSize(dir string) string {
	var size int64
	var blocks int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			size += info.Size()
		}
		if strings.HasSuffix(path, ".blk") {
			blocks++
		}
		return nil
	})
	return fmt.Sprintf("%.1f MiB in %d message blocks", mib(uint64(size)), blocks)
}

// memStats are the server's runtime.MemStats as its heap profile prints
// them (/debug/pprof/heap?gc=1&debug=1, after a GC): HeapAlloc is its live
// heap; HeapIdle − HeapReleased is heap the runtime holds but does not
// use (counted in RSS until the scavenger returns it to the OS).
type memStats struct {
	HeapAlloc, HeapInuse, HeapIdle, HeapReleased, HeapSys, StackSys, Sys uint64
	NextGC, NumGC                                                        uint64
	// The runtime's memory besides the heap and stacks: span structures
	// (MSpan), GC metadata (GCSys: mark bits, work buffers) and the rest
	// (OtherSys: page allocator, profiling, timers). The runtime keeps
	// them for the largest heap it had; it does not return them.
	MSpanSys, GCSys, OtherSys uint64
}

// String is a log line of the figures that make up RSS.
func (m memStats) String() string {
	return fmt.Sprintf("heap alloc %.1f MiB, in use %.1f, idle %.1f (released %.1f), stacks %.1f, spans %.1f, GC metadata %.1f, other runtime %.1f, sys %.1f MiB; next GC at %.1f MiB; %d GCs",
		mib(m.HeapAlloc), mib(m.HeapInuse), mib(m.HeapIdle), mib(m.HeapReleased), mib(m.StackSys), mib(m.MSpanSys), mib(m.GCSys), mib(m.OtherSys), mib(m.Sys), mib(m.NextGC), m.NumGC)
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
		"MSpan": &m.MSpanSys, "GCSys": &m.GCSys, "OtherSys": &m.OtherSys,
	}
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if _, sys, ok := strings.Cut(v, " / "); ok { // Stack, MSpan = inuse / sys
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
	s := &serverProc{bin: bin, port: port, profPort: profPort, url: fmt.Sprintf("nats://127.0.0.1:%d", port),
		prof: fmt.Sprintf("http://127.0.0.1:%d", profPort), dir: dir}
	return s, s.launch(ctx, e)
}

// launch starts the server process on its store and ports and waits until
// it takes connections.
func (s *serverProc) launch(ctx context.Context, e *env) error {
	p, err := e.spawnEnv(serverEnv(), s.bin, "-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-l", filepath.Join(s.dir, "server.log"), "--profile", strconv.Itoa(s.profPort))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		nc, err := nats.Connect(s.url)
		if err == nil {
			nc.Close()
			s.proc = p
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.stop()
			return fmt.Errorf("nats-server on port %d did not start: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restart stops the server (SIGTERM: it writes its stream state) and
// starts a new process on the same store and ports; clients reconnect.
func (s *serverProc) restart(ctx context.Context, e *env) error {
	if err := s.stop(); err != nil {
		return fmt.Errorf("stopping nats-server: %w", err)
	}
	return s.launch(ctx, e)
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
