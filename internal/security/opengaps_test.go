package security

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// The open gaps of deploy/SECURITY.md ("Other gaps", 7, 8, 9, 11 and 12),
// each shown at its exact limit: what the role can still do, and where it
// stops. When a gap is closed, its test turns into a refusal.

// TestGapWorkerHearsCancels (gap 7): a worker's role subscribes to every
// run's cancel requests (weft.r.*.*.c.cancelreq, a core subscription: it
// stops work of a run being cancelled), so a worker of queue default
// hears the cancel request of a run that has no work on its queue, with
// the run id, who asked and why. It cannot write one.
func TestGapWorkerHearsCancels(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := s.connect(t, userWorker)
	heard, err := w.nc.SubscribeSync("weft.r.*.*.c.cancelreq")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A run of the gpu queue's (any run: the subject names no queue),
	// cancelled by its client.
	run := events.NewRunID()
	e, err := events.New(run, eventlog.RandomID(), time.Now(), &events.RunCancelRequestedData{By: "victim@host", Reason: "the merger is off"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	cl := s.connect(t, userClient)
	if _, err := cl.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := heard.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("the worker did not hear the cancel request (close gap 7 in SECURITY.md): %v", err)
	}
	ev, err := events.Decode(got.Subject, got.Header, got.Data)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ev.Payload()
	if d := p.(*events.RunCancelRequestedData); ev.RunID != run || d.By != "victim@host" || d.Reason != "the merger is off" {
		t.Fatalf("heard %s %+v", ev.RunID, d)
	}
	t.Logf("a worker of %q heard run %s's cancel request: by %q, %q", queueA, run, "victim@host", "the merger is off")
	// Hearing is all: it cannot ask for a cancel.
	w.refusedPublish(t, admin, forged(sub(run, "c.cancelreq"), events.RunCancelRequested))
}

// outcomeGraph: a worker node whose outcome the attacker forges, then a
// gate that holds the run while it does.
const outcomeGraph = `
name: outcomes
nodes:
  - {id: a, type: echo, config: {updates: {who: "real"}}}
  - {id: gate, type: human}
edges:
  - {from: START, to: a}
  - {from: a, to: gate}
  - {from: gate, to: END}
`

// TestGapWorkerForgesOutcomes (gap 8): a worker may write outcomes for
// any run of its queue (the subject names the queue, not the delivery):
// NATS takes a forged outcome of node a from another worker of the
// queue. The engine counts an outcome only for the live attempt and
// delivery, so one for an attempt that is not live (a's attempt 1, which
// has succeeded; attempt 2, never readied; another delivery) is recorded
// stale and changes nothing: the run's state and its end are the real
// worker's. An outcome for a live attempt races the real worker's (not
// shown: whichever is first counts). Another queue's outcome subject is
// refused.
func TestGapWorkerForgesOutcomes(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	cl := client.New(openStore(t, s.connect(t, userClient)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := cl.Start(ctx, mustParse(t, outcomeGraph))
	if err != nil {
		t.Fatal(err)
	}
	before := waitRun(t, ctx, cl, run, "the gate waits", waiting("gate"))
	if a := before.Node("a"); a.Status != projection.NodeSucceeded || a.Worker != "w" || string(before.Vars["who"]) != `"real"` {
		t.Fatalf("a: %+v, who %s", a, before.Vars["who"])
	}
	attacker := s.connect(t, userWorker)
	forge := func(attempt, delivery int) {
		t.Helper()
		e, err := events.New(run, eventlog.RandomID(), time.Now(), &events.NodeInvokedData{
			NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: attempt, Delivery: delivery,
			Updates: map[string]json.RawMessage{"who": json.RawMessage(`"forged"`)}, Worker: "w",
		})
		if err != nil {
			t.Fatal(err)
		}
		e.Queue = queueA
		m, err := eventlog.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := attacker.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("the forged outcome (attempt %d, delivery %d) was not stored (close gap 8 in SECURITY.md?): %v", attempt, delivery, err)
		}
	}
	forge(1, 1) // the attempt that succeeded
	forge(1, 2) // a delivery that never was
	forge(2, 1) // an attempt never readied
	st := waitRun(t, ctx, cl, run, "the forged outcomes are folded", func(s *projection.State) bool { return s.Stats.Stale >= before.Stats.Stale+3 })
	if string(st.Vars["who"]) != `"real"` || st.Node("a").Attempt != 1 || st.Node("a").Status != projection.NodeSucceeded || st.Node("gate").Status != projection.NodeWaiting {
		t.Fatalf("the forged outcomes changed the run: who %s, a %+v, gate %+v", st.Vars["who"], st.Node("a"), st.Node("gate"))
	}
	if err := cl.Signal(ctx, run, "gate", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	st = waitRun(t, ctx, cl, run, "the run ends", ended)
	if st.Status != projection.RunCompleted || string(st.Vars["who"]) != `"real"` {
		t.Fatalf("run %s, who %s", st.Status, st.Vars["who"])
	}
	// Not another queue's.
	attacker.refusedPublish(t, admin, forged(sub(run, "w."+queueB+".invoked"), events.NodeInvoked))
	testkit.CheckNoViolations(t, dir)
}

// TestGapWorkerOverwritesAnnouncements (gap 9): every worker may write
// every key of the announcements bucket (weft-workers): a worker of queue
// default overwrites the gpu worker's entry with one of its own making,
// and readers (the UI, 'weft workers') see it. Nothing in the engine reads
// the bucket: a run with work on both queues still completes, its gpu node
// done by the gpu worker.
func TestGapWorkerOverwritesAnnouncements(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "wa")
	startProcess(t, "nodeworker", filepath.Join(dir, "worker-gpu.log"), s.roleEnv(userWorkerB()), "-nats", s.url, "-queues", queueB, "-name", "wgpu")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ui := s.connect(t, userUI)
	uikv, err := ui.js.KeyValue(ctx, workqueue.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := uikv.Get(ctx, "wgpu"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gpu worker never announced itself")
		}
		// Polls: the worker's announcement is a KV value re-read here.
		time.Sleep(100 * time.Millisecond)
	}
	w := s.connect(t, userWorker)
	kv, err := w.js.KeyValue(ctx, workqueue.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	fake := fmt.Sprintf(`{"name":"wgpu","queues":[%q],"types":["nothing"],"started":"2000-01-01T00:00:00Z","heartbeat":%q}`, queueB, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, "wgpu", []byte(fake)); err != nil {
		t.Fatalf("the default worker could not overwrite the gpu worker's announcement (close gap 9 in SECURITY.md): %v", err)
	}
	if e, err := uikv.Get(ctx, "wgpu"); err != nil || string(e.Value()) != fake {
		t.Fatalf("the UI reads %v, %v", e, err)
	}
	cl := client.New(openStore(t, s.connect(t, userClient)))
	run, err := cl.Start(ctx, mustParse(t, chain))
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Wait(ctx, run)
	if err != nil || st.Status != projection.RunCompleted || st.Node("b").Worker != "wgpu" {
		t.Fatalf("run: %v %+v", err, st)
	}
	testkit.CheckNoViolations(t, dir)
}

// TestGapNoMessageRate (gap 11): NATS has no per-account message rate,
// and 'weft roles' sets no max_connections or max_subscriptions: a
// client opens 32 connections and sends JetStream API calls its role may
// make (stream information, direct gets of a run's start) as fast as the
// server answers them, and none is refused. (Admission requests, in a
// namespace: TestNamespaceFairness, which floods them ignoring refusals.)
func TestGapNoMessageRate(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx := context.Background()
	run := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(run, "c.started"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	const conns, calls = 32, 100
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		c := s.connect(t, userClient)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				subject := "$JS.API.STREAM.INFO.WEFT"
				if (i+j)%2 == 0 {
					subject = "$JS.API.DIRECT.GET.WEFT." + sub(run, "c.started")
				}
				if _, err := c.nc.Request(subject, nil, 10*time.Second); err != nil {
					refused.Add(1)
					continue
				}
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if refused.Load() != 0 || answered.Load() != conns*calls {
		t.Fatalf("%d answered, %d refused or unanswered (a rate limit? close gap 11 in SECURITY.md)", answered.Load(), refused.Load())
	}
	t.Logf("one client, %d connections: %d JetStream API calls answered in %v (%.0f/s), none refused", conns, answered.Load(), d.Round(time.Millisecond), float64(answered.Load())/d.Seconds())
}

// victimGraph12: the worker node runs after a gate, so that the worker
// first reads the run's start after the attacker wrote a second one.
func gateThenWho(who string) string {
	return fmt.Sprintf(`
name: second-start
nodes:
  - {id: gate, type: human}
  - {id: a, type: echo, config: {updates: {who: %q}}}
edges:
  - {from: START, to: gate}
  - {from: gate, to: a}
  - {from: a, to: END}
`, who)
}

// secondStart publishes, as the client, a second run-started on run's
// c.started: a valid start (its own graph's digest) under a fresh message
// id (the first start's is the run id).
func secondStart(t *testing.T, ctx context.Context, c *conn, run, src string) uint64 {
	t.Helper()
	g := mustParse(t, src)
	e, err := events.New(run, run, time.Now(), &events.RunStartedData{GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), StartedBy: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set(nats.MsgIdHdr, eventlog.RandomID())
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("the second start: %v", err)
	}
	return ack.Sequence
}

// TestGapSecondStartFailsWork (gap 12, narrowed): a client may publish a
// second run-started on any run's c.started (its own subject class; a
// valid start of its own graph, under a fresh message id). The fold
// refuses a second start, so the coordinator, the clients and the UI keep
// the first (the run's graph, its digest, its decisions). A worker reads
// the last message on the subject for its node's config, and before the
// fix a second start written before the worker first read the run gave
// the worker the attacker's config for the victim's work item. Now a work
// item names its run's start by stream sequence (startSeq) and the worker
// reads no other: the attacker's config never runs. What is left is
// availability: the worker, which may read only a subject's last message,
// cannot have the run's own start, so the victim's node fails at once,
// non-retryable (RunStartMismatch), and with it the run (a client may
// cancel any run anyway).
func TestGapSecondStartFailsWork(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	startProcess(t, "nodeworker", filepath.Join(dir, "worker.log"), s.roleEnv(userWorker), "-nats", s.url, "-queues", queueA, "-name", "w")
	cl := client.New(openStore(t, s.connect(t, userClient)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim := mustParse(t, gateThenWho("victim"))
	run, err := cl.Start(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, ctx, cl, run, "the gate waits", waiting("gate"))
	secondStart(t, ctx, s.connect(t, userClient), run, gateThenWho("attacker"))
	if err := cl.Signal(ctx, run, "gate", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	st := waitRun(t, ctx, cl, run, "the run ends", ended)
	// The fold and the coordinator keep the first start.
	if st.GraphDigest != victim.Digest() || st.Stats.Rejected+st.Stats.Refused < 1 {
		t.Fatalf("the fold took the second start: digest %s (the victim's %s), %d rejected", st.GraphDigest, victim.Digest(), st.Stats.Rejected+st.Stats.Refused)
	}
	if string(st.Vars["who"]) == `"attacker"` {
		t.Fatal("the worker ran the second start's config (gap 12 open again)")
	}
	// The worker refused it: the node fails, located, not retried.
	a := st.Node("a")
	if st.Status != projection.RunFailed || a == nil || a.Status != projection.NodeFailed || a.Error == nil || a.Error.Type != "RunStartMismatch" || a.Error.Retryable || a.Attempt != 1 {
		t.Fatalf("run %s %+v, node a %+v: want node a failed once with RunStartMismatch", st.Status, st.Error, a)
	}
	t.Logf("run %s: node a failed: %s", run, a.Error.Message)
	testkit.CheckNoViolations(t, dir)
}
