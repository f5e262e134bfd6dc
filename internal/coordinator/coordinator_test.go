package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

const chain = `
name: chain
nodes:
  - {id: a, type: sleep, config: {duration: 30ms}}
  - {id: b, type: echo}
  - {id: c, type: sleep, config: {duration: 30ms}}
  - {id: d, type: echo}
  - {id: e, type: sleep, config: {duration: 30ms}}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: d}
  - {from: d, to: e}
  - {from: e, to: END}
`

func mustGraph(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// start appends run-started events for n runs of g.
func start(t testing.TB, st events.Store, g *graph.Graph, n int) []string {
	t.Helper()
	var runs []string
	for i := range n {
		run := events.NewRunID()
		e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
			GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(),
			Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(context.Background(), run, 0, e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

// runWorker runs an in-process worker with the built-in executors.
func runWorker(t testing.TB, ctx context.Context, st events.Store, name string, queues ...string) {
	t.Helper()
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	w, err := worker.New(st, worker.WithName(name), worker.WithConcurrency(64), worker.WithQueues(queues...))
	if err != nil {
		t.Fatal(err)
	}
	builtin.Register(w)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// runCoordinator runs an in-process coordinator until the test ends.
func runCoordinator(t testing.TB, ctx context.Context, st events.Store, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	c := coordinator.New(st, opts...)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

var (
	waitEnded        = testkit.WaitEnded
	checkExactlyOnce = testkit.CheckExactlyOnce
)

func TestRunsComplete(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 20)
	waitEnded(t, st, runs, 30*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	if s := c.Stats(); s.Malformed != 0 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTwoCoordinatorsNeverDecideTwice(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runCoordinator(t, ctx, st)
	runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 30)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
}

func TestTwoCoordinatorsWithSeparateConsumers(t *testing.T) {
	// Each sees every event: both decide every step; the log takes one.
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := runCoordinator(t, ctx, st, coordinator.WithDurable("coord-a"))
	b := runCoordinator(t, ctx, st, coordinator.WithDurable("coord-b"))
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 30)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	t.Logf("coordinator a: %+v", a.Stats())
	t.Logf("coordinator b: %+v", b.Stats())
}

func TestMalformedEventsArePassedOver(t *testing.T) {
	srv, st := testkit.Store(t)
	nc, _ := testkit.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st)
	runWorker(t, ctx, st, "w1")
	g := mustGraph(t, chain)

	before := start(t, st, g, 3)
	publish := func(subject string, hdr nats.Header, data string) {
		t.Helper()
		m := &nats.Msg{Subject: subject, Header: hdr, Data: []byte(data)}
		if _, err := eventlog.JetStream(st).PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ce := func(typ, run string) nats.Header {
		return nats.Header{"ce-specversion": {"1.0"}, "ce-id": {eventlog.RandomID()}, "ce-source": {"test"}, "ce-type": {typ}, "ce-runid": {run}, "content-type": {"application/json"}}
	}
	invoked := func(run string) string { return strings.TrimSuffix(eventlog.RunFilter(run), ">") + "w.default.invoked" }
	publish(eventlog.StartedSubject("junk1"), nil, "not a cloud event")
	publish(eventlog.StartedSubject("junk2"), ce("com.example.unknown", "junk2"), `{}`)
	publish(eventlog.StartedSubject("junk3"), ce(string(events.RunStarted), "junk3"), `{"graph": [broken`)
	publish(invoked("ghost"), ce(string(events.NodeInvoked), "ghost"), `{"node":"a","iteration":1,"attempt":1}`)
	publish(invoked(before[0]), ce(string(events.NodeInvoked), "someone-else"), `{}`)
	publish(invoked(before[1]), ce(string(events.NodeInvoked), before[1]), `{"node": 7}`)
	_ = nc
	after := start(t, st, g, 3)

	waitEnded(t, st, append(before, after...), 30*time.Second)
	checkExactlyOnce(t, st, append(before, after...), 5)
	s := c.Stats()
	if s.Malformed < 5 || s.Orphans < 1 {
		t.Fatalf("stats %+v: want ≥5 malformed and ≥1 orphan", s)
	}
}

// The process tests run the real coordinator binary and kill it.

func binaries(t *testing.T) string {
	t.Helper()
	return testkit.Build(t, "github.com/weft-dev/weft/cmd/coordinator", "github.com/weft-dev/weft/cmd/nodeworker")
}

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

type proc struct {
	cmd *exec.Cmd
	out *strings.Builder
}

func spawn(t *testing.T, srv *server.Server, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), bin), append([]string{"-nats", srv.ClientURL()}, args...)...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, &syncWriter{w: out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func TestCoordinatorKilledMidRunResumes(t *testing.T) {
	srv, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 40)

	// Kill the coordinator with SIGKILL several times while runs are in
	// flight, at varying points (after it made 10, 25, 40 and 55 nodes
	// ready; the runs need 200), and start a new one each time.
	// The partition's consumer is made with a short ack wait, so that
	// what a killed coordinator held is redelivered soon.
	if _, err := eventlog.JetStream(st).CreateConsumer(ctx, st.StreamName(), partitionConsumer(coordinator.ConsumerName("coordinator", 0), 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	readies := make(chan *nats.Msg, 4096)
	sub, err := eventlog.JetStream(st).Conn().ChanSubscribe(eventlog.QueueFilter(worker.DefaultQueue), readies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	for i := range 4 {
		for len(readies) > 0 {
			<-readies // the killed one's
		}
		p := spawn(t, srv, "coordinator", "-lease-ttl", "1s") // a killed one's partition is taken over soon
		for range 10 + i*15 {
			select {
			case <-readies:
			case <-time.After(30 * time.Second):
				t.Fatalf("coordinator %d made no node ready", i+1)
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
	}
	spawn(t, srv, "coordinator", "-lease-ttl", "1s")
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
}

func TestTwoCoordinatorProcesses(t *testing.T) {
	srv, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	spawn(t, srv, "coordinator")
	spawn(t, srv, "coordinator")
	spawn(t, srv, "nodeworker", "-concurrency", "64")
	runs := start(t, st, mustGraph(t, chain), 40)
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	_ = ctx
}
