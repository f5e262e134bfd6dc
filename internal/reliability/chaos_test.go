package reliability

// TestChaos proves, against real processes, Weft's promise under crashes:
// while a seeded killer SIGKILLs workers, coordinators and NATS nodes of a
// three-node cluster (one NATS node down at most, so the R3 stream keeps its
// quorum) and restarts each after a short pause, and SIGSTOPs workers and
// coordinators for longer than their consumers' ack wait (so their work is
// redelivered to another and their outcomes and decisions come late, when
// SIGCONT resumes them), hundreds of runs of a graph
// with retries, fan-out (static branches and a map) and joins (all and
// 2-of-3) are started by a client, and once the kills stop:
//
//   - every run ends, within a bound, and completes with the result the
//     graph computes (state.total, state.result and the map's output);
//   - no coordinator decision is in the log twice (testkit.DuplicateDecisions);
//   - the ledger, written by the ledger node with KV Create under each
//     attempt's idempotency key, holds exactly the effects the log accounts
//     for: the key of every attempt the log shows as succeeded, the key of
//     every attempt that failed after its effect by rule, and nothing else;
//     no key of an attempt the log shows no worker started, and no effect
//     of an attempt that should have been the last one followed by another
//     (a duplicate effect). Re-executions of one attempt (redeliveries after
//     a worker died) are counted: the key absorbs them;
//   - flow control holds (chaosflow_test.go): the ledger nodes a and b
//     share a concurrency limit of 2 per tenant (and c has a rate limit),
//     and neither the log's running attempts nor the ledger's effects of
//     one tenant ever overlap more than 2 deep; the flow bucket ends with
//     no holder and no waiter (no slot leaked);
//   - no daemon exits by itself (a transient outage is ridden out);
//   - no permission was refused: everything runs under Weft's roles (see
//     the package documentation), the ledgerworkers as the ledger queue's
//     worker, and the ledger itself, an external system to the engine,
//     through a user of its own (ledgerUser).
//
// TestChaosSealed runs the same with encryption at rest: every process
// holds a key ring (WEFT_ENCRYPT_KEYS), every run's input carries a
// secret, and at the end the raw events stream, read as the admin without
// Weft's decoder, holds no byte of it and no plain data of any run.
//
// TestChaosTypeScript runs the same with a mixed fleet on the ledger queue:
// TypeScript ledger workers (the same node on the TypeScript SDK) beside a
// Go one, killed and paused like every other process, under the same
// verdict.
//
// WEFT_CHAOS_RUNS sets the number of runs (default 40, about a minute or
// two; `make chaos` and `make chaos-ts` run 1,000), WEFT_CHAOS_SEED the
// killer's seed (default: from the clock, printed; it replays the schedule
// of kills, not the processes' timing), WEFT_CHAOS_RATE the runs started
// per second, WEFT_CHAOS_LOGS a directory that keeps the daemons' logs.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/reliability/ledger"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/tsbuild"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker"
)

// chaosConfig is the size of a chaos run.
type chaosConfig struct {
	runs     int
	seed     uint64
	rate     float64       // runs started per second
	minChaos time.Duration // the killer runs at least this long
	gapMin   time.Duration // between two kills
	gapMax   time.Duration
	endBound time.Duration // every run ends within this after the kills stop
	logs     string
}

func chaosSettings(t *testing.T) chaosConfig {
	t.Helper()
	c := chaosConfig{
		runs:     40,
		seed:     uint64(time.Now().UnixNano()),
		rate:     4,
		minChaos: 25 * time.Second,
		gapMin:   400 * time.Millisecond,
		gapMax:   1500 * time.Millisecond,
	}
	envInt := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	envInt("WEFT_CHAOS_RUNS", &c.runs)
	if v := os.Getenv("WEFT_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WEFT_CHAOS_SEED=%q: want a number", v)
		}
		c.seed = n
	}
	if c.runs >= 200 {
		c.rate = 8
	}
	if v := os.Getenv("WEFT_CHAOS_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("WEFT_CHAOS_RATE=%q: want a positive number", v)
		}
		c.rate = f
	}
	c.endBound = 3*time.Minute + time.Duration(c.runs)*100*time.Millisecond
	c.logs = os.Getenv("WEFT_CHAOS_LOGS")
	if c.logs == "" {
		c.logs = t.TempDir()
	} else if err := os.MkdirAll(c.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// chaosBinaries builds every program the chaos test runs.
func chaosBinaries(t *testing.T) string {
	t.Helper()
	return testkit.Build(t, "github.com/nats-io/nats-server/v2",
		"github.com/weft-dev/weft/cmd/coordinator", "github.com/weft-dev/weft/cmd/nodeworker",
		"github.com/weft-dev/weft/internal/reliability/ledgerworker")
}

// daemon is one supervised program: started, killed and restarted by the
// test, its output appended to one log over all its lives. An exit the test
// did not cause is recorded, and the program is started again.
type daemon struct {
	kind, name string
	bin        string
	env        []string // added to the test's environment: a role's credentials
	args       func(life int) []string
	logPath    string
	health     string // nats: the /healthz URL

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	up      bool
	paused  bool // SIGSTOPped
	killing bool
	life    int
	exits   []string // exits the test did not cause
}

type supervisor struct {
	t        *testing.T
	dir      string // binaries
	logs     string
	began    time.Time
	stopping atomic.Bool
	exited   chan *daemon
	mu       sync.Mutex
	daemons  []*daemon
}

func (s *supervisor) add(kind, name, bin string, env []string, args func(life int) []string) *daemon {
	d := &daemon{kind: kind, name: name, bin: bin, env: env, args: args, logPath: filepath.Join(s.logs, name+".log")}
	s.mu.Lock()
	s.daemons = append(s.daemons, d)
	s.mu.Unlock()
	if err := s.start(d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *supervisor) start(d *daemon) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.up || s.stopping.Load() {
		return nil
	}
	d.life++
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos: life %d of %s starts at +%s\n", d.life, d.name, s.since())
	bin := d.bin
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(s.dir, bin) // one of chaosBinaries; else a program's path (node)
	}
	cmd := exec.Command(bin, d.args(d.life)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), d.env...)
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", d.name, err)
	}
	done := make(chan struct{})
	d.cmd, d.done, d.up = cmd, done, true
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		d.mu.Lock()
		d.up, d.paused = false, false
		unexpected := !d.killing && !s.stopping.Load()
		if unexpected {
			d.exits = append(d.exits, fmt.Sprintf("life %d exited by itself at +%s: %v; last lines:\n%s", d.life, s.since(), err, tail(d.logPath, 6)))
		}
		d.mu.Unlock()
		close(done)
		if unexpected {
			s.exited <- d
		}
	}()
	return nil
}

// kill SIGKILLs the daemon's process and waits for it to go.
func (s *supervisor) kill(d *daemon) bool {
	d.mu.Lock()
	if !d.up {
		d.mu.Unlock()
		return false
	}
	d.killing = true
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	done := d.done
	d.mu.Unlock()
	<-done
	d.mu.Lock()
	d.killing = false
	d.mu.Unlock()
	return true
}

// stop pauses the daemon's process (SIGSTOP): it holds its connections and
// its work, and says nothing, as a process on a stalled machine does.
func (s *supervisor) stop(d *daemon) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.up || d.paused {
		return false
	}
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return false
	}
	d.paused = true
	return true
}

// cont resumes a paused daemon (SIGCONT).
func (s *supervisor) cont(d *daemon) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused && d.up {
		_ = d.cmd.Process.Signal(syscall.SIGCONT)
	}
	d.paused = false
}

func (d *daemon) isPaused() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paused
}

func (d *daemon) isUp() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.up
}

func (s *supervisor) since() time.Duration { return time.Since(s.began).Round(time.Millisecond) }

// revive restarts daemons that exited by themselves, after a pause, until
// the supervisor stops.
func (s *supervisor) revive(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-s.exited:
			go func() {
				// A restarted daemon's back-off, as a supervisor would wait before restarting.
				time.Sleep(time.Second)
				if !s.stopping.Load() {
					_ = s.start(d)
				}
			}()
		}
	}
}

func (s *supervisor) stopAll() {
	s.stopping.Store(true)
	s.mu.Lock()
	ds := slices.Clone(s.daemons)
	s.mu.Unlock()
	// Weft's processes first, NATS last.
	slices.SortStableFunc(ds, func(a, b *daemon) int { return cmp.Compare(boolInt(a.kind == "nats"), boolInt(b.kind == "nats")) })
	for _, d := range ds {
		s.kill(d)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// healthy waits until a NATS server's JetStream is current (its /healthz
// says ok), for up to d.
func healthy(url string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	hc := http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		// Polls: the health endpoint answers only when asked.
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// ledgerUser is the chaos ledger's own NATS user: the ledger bucket and
// the record of writes, nothing of the engine's.
var ledgerUser = natsconn.User{
	Name: "chaos-ledger",
	Role: "chaos-ledger",
	PublishAllow: []string{
		"$KV." + ledger.Bucket + ".>",
		"$JS.API.STREAM.INFO.KV_" + ledger.Bucket,
		"$JS.API.DIRECT.GET.KV_" + ledger.Bucket + ".>",
		"$JS.API.STREAM.MSG.GET.KV_" + ledger.Bucket,
		ledger.WritesSubj,
	},
	SubscribeAllow: []string{natsconn.InboxPrefixFor("chaos-ledger") + ".>"},
}

// startChaosCluster starts three nats-server processes forming one
// JetStream cluster under the roles, each with a monitoring port for
// /healthz.
func startChaosCluster(t *testing.T, s *supervisor, roles *testkit.Roles) ([]*daemon, string) {
	t.Helper()
	var client, route, mon []int
	for range 3 {
		client = append(client, testkit.FreePort(t))
		route = append(route, testkit.FreePort(t))
		mon = append(mon, testkit.FreePort(t))
	}
	var routes, urls []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", route[i]))
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	var servers []*daemon
	for i := range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "server.conf")
		body := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
max_payload: 8MB
jetstream { store_dir: %q }
cluster { name: weft, listen: 127.0.0.1:%d, routes: [%s] }
`, i+1, client[i], mon[i], filepath.Join(dir, "js"), route[i], strings.Join(routes, ", ")) + roles.Include(t, dir)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		d := s.add("nats", fmt.Sprintf("nats-%d", i+1), "nats-server", nil, func(int) []string { return []string{"-c", conf} })
		d.health = fmt.Sprintf("http://127.0.0.1:%d/healthz", mon[i])
		servers = append(servers, d)
	}
	for _, d := range servers {
		if !healthy(d.health, 60*time.Second) {
			t.Fatalf("%s never became healthy", d.name)
		}
	}
	return servers, strings.Join(urls, ",")
}

// retry calls f until it succeeds or d passes, with a fresh 5s context each
// time.
func retry(d time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		// Backs off between retries while the cluster recovers: recovery has no event a client can wait for.
		time.Sleep(250 * time.Millisecond)
	}
}

// kill is one kill of the killer.
type kill struct {
	at    time.Duration
	kind  string
	name  string
	pause time.Duration
}

// chaosRun is what the test knows of a run it started.
type chaosRun struct {
	id     string
	index  int
	items  []int
	tenant string // its invocation's, the key of the limit chaos-ledger
}

func (r *chaosRun) total() int {
	n := 1 + 10
	for _, x := range r.items {
		n += x
	}
	return n
}

// chaosFleet is who serves the ledger queue: Go ledger workers
// (internal/reliability/ledgerworker) and TypeScript ones (the SDK's
// dist/chaos/ledgerworker.js, run by node).
type chaosFleet struct {
	goLedger, tsLedger int
	// sealed runs every process under one key ring (TestChaosSealed).
	sealed bool
}

func TestChaos(t *testing.T) { runChaos(t, chaosFleet{goLedger: 2}) }

// TestChaosSealed is TestChaos with every event's data sealed (issue 32):
// the same verdict, and the raw stream's grep (chaosSecret).
func TestChaosSealed(t *testing.T) { runChaos(t, chaosFleet{goLedger: 2, sealed: true}) }

// chaosSecret is in every sealed chaos run's input; the raw stream may not
// show it.
const chaosSecret = "CHAOS-SECRET-93ad1"

// sealChaos puts this process under a fresh key ring and returns the
// environment that puts the daemons under it.
func sealChaos(t *testing.T) string {
	t.Helper()
	k, err := events.NewKey("chaos-k1")
	if err != nil {
		t.Fatal(err)
	}
	ring := events.KeyRing{k}
	if err := events.UseKeys(ring); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.UseKeys(nil) }) // the ring is process-wide
	return events.EnvEncryptKeys + "=" + strings.Join(strings.Split(strings.TrimSpace(ring.Text()), "\n")[1:], ",")
}

// grepSealed reads the events stream raw (as the admin, without Weft's
// decoder) and fails the test if any message shows the secret or carries
// data that is not sealed; it returns how many messages it read.
func grepSealed(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	n := 0
	err := retry(2*time.Minute, func(ctx context.Context) error {
		n = 0
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			n++
			raw := m.Subject + fmt.Sprint(m.Header) + string(m.Data)
			if strings.Contains(raw, chaosSecret) {
				t.Errorf("the raw stream shows the secret in %s (seq %d)", m.Subject, seq)
			}
			if ct := m.Header.Get("content-type"); len(m.Data) > 0 && ct != events.ContentSealed && ct != eventlog.ContentRef {
				t.Errorf("%s (seq %d, %s): data of content type %q, not sealed", m.Subject, seq, m.Header.Get("ce-type"), ct)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the raw stream: %v", err)
	}
	return n
}

// TestChaosTypeScript is TestChaos with a mixed fleet on the ledger queue:
// one Go ledger worker and two TypeScript ones (sdk/typescript's
// src/chaos/ledgerworker.ts, the same node on the TypeScript SDK, talking
// to the same ledger), which the killer SIGKILLs (kind "tsledger") and
// pauses like the Go processes; the verdict is TestChaos's. It builds the
// SDK when its build is missing or stale (npm ci && npm run build, see
// package tsbuild), and fails, never skips, when Node is not there. `make
// chaos-ts` runs it at full size (1,000 runs).
func TestChaosTypeScript(t *testing.T) { runChaos(t, chaosFleet{goLedger: 1, tsLedger: 2}) }

// tsLedgerWorker prepares the TypeScript SDK and returns the node program
// and the ledger worker's script.
func tsLedgerWorker(t *testing.T) (node, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, node, err := tsbuild.SDK(ctx, nil)
	if err != nil {
		t.Fatalf("the TypeScript variant of the chaos test needs the TypeScript SDK built: %v", err)
	}
	return node, filepath.Join(root, tsbuild.LedgerWorker)
}

func runChaos(t *testing.T, fleet chaosFleet) {
	cfg := chaosSettings(t)
	t.Logf("chaos: %d runs at %.1f/s, seed %d (WEFT_CHAOS_SEED=%d replays the kill schedule; the processes' timing is not reproducible), ledger workers: %d Go, %d TypeScript; logs in %s",
		cfg.runs, cfg.rate, cfg.seed, cfg.seed, fleet.goLedger, fleet.tsLedger, cfg.logs)
	var node, tsScript string
	if fleet.tsLedger > 0 {
		node, tsScript = tsLedgerWorker(t)
	}
	var keyEnv []string
	if fleet.sealed {
		keyEnv = []string{sealChaos(t)}
	}
	sup := &supervisor{t: t, dir: chaosBinaries(t), logs: cfg.logs, began: time.Now(), exited: make(chan *daemon, 64)}
	reviveCtx, stopRevive := context.WithCancel(context.Background())
	t.Cleanup(func() { stopRevive(); sup.stopAll() })
	go sup.revive(reviveCtx)

	roles := testkit.NewRoles(t, deployment, ledgerUser)
	servers, url := startChaosCluster(t, sup, roles)
	c := &cluster{urls: strings.Split(url, ","), roles: roles}

	// The admin sets the deployment up (the stream, the timers stream and
	// the buckets; the coordinators' lease duration is 2s), the ledger
	// bucket, the record of ledger writes, and the queues' consumers with
	// a short ack wait (so that the work of a killed worker comes back
	// within seconds). The client starts and reads the runs.
	st, admin := openStores(t, c, 2*time.Second)
	js := eventlog.JetStream(admin)
	if err := retry(60*time.Second, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ledger.Bucket, Replicas: 3, Storage: jetstream.FileStorage})
		return err
	}); err != nil {
		t.Fatalf("creating the ledger bucket: %v", err)
	}
	if err := retry(60*time.Second, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ledger.WritesStream, Subjects: []string{ledger.WritesSubj}, Replicas: 3, Storage: jetstream.FileStorage})
		return err
	}); err != nil {
		t.Fatalf("creating the ledger writes stream: %v", err)
	}
	const ackWait = 3 * time.Second
	for _, q := range []string{worker.DefaultQueue, ledger.Queue} {
		if err := retry(60*time.Second, func(ctx context.Context) error {
			_, err := workqueue.EnsureQueue(ctx, js, admin.StreamName(), q, workqueue.QueueOptions{AckWait: ackWait})
			return err
		}); err != nil {
			t.Fatalf("creating queue %s: %v", q, err)
		}
	}

	common := []string{"-nats", url, "-replicas", "3"}
	var weft []*daemon
	for i := 1; i <= 2; i++ {
		// Four partitions over two coordinators: both decide, and a kill
		// or a pause hands a holder's partitions to the other.
		weft = append(weft, sup.add("coordinator", fmt.Sprintf("coordinator-%d", i), "coordinator", append(roles.Env(t, userCoordinator), keyEnv...),
			func(int) []string { return append(slices.Clone(common), "-partitions", "4", "-lease-ttl", "2s") }))
	}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("nodeworker-%d", i)
		weft = append(weft, sup.add("worker", name, "nodeworker", append(roles.Env(t, userWorker), keyEnv...), func(life int) []string {
			return append(slices.Clone(common), "-concurrency", "16", "-ack-wait", ackWait.String(), "-name", fmt.Sprintf("%s-l%d", name, life))
		}))
	}
	ledgerEnv := append(roles.Env(t, natsconn.UserName(natsconn.RoleWorker, ledger.Queue)),
		"WEFT_LEDGER_NATS_USER="+ledgerUser.Name, "WEFT_LEDGER_NATS_PASSWORD="+roles.Config(t, ledgerUser.Name).Password)
	ledgerEnv = append(ledgerEnv, keyEnv...)
	for i := 1; i <= fleet.goLedger; i++ {
		name := fmt.Sprintf("ledgerworker-%d", i)
		weft = append(weft, sup.add("ledgerworker", name, "ledgerworker", ledgerEnv, func(life int) []string {
			return append(slices.Clone(common), "-concurrency", "16", "-ack-wait", ackWait.String(), "-hold", chaosHold.String(), "-name", fmt.Sprintf("%s-l%d", name, life))
		}))
	}
	for i := 1; i <= fleet.tsLedger; i++ {
		// The same flags and environment as the Go ledger worker's, to
		// node with the script first.
		name := fmt.Sprintf("tsledger-%d", i)
		weft = append(weft, sup.add("tsledger", name, node, ledgerEnv, func(life int) []string {
			return append([]string{tsScript}, append(slices.Clone(common), "-concurrency", "16", "-ack-wait", ackWait.String(), "-name", fmt.Sprintf("%s-l%d", name, life))...)
		}))
	}

	src, err := os.ReadFile(filepath.Join("testdata", "chaos.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse(src, "chaos.yaml", graph.WithTypes(ledger.NodeType))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(st)

	// The killer: seeded, one process at a time is killed, each restarted
	// after a pause in its own goroutine, never two NATS nodes down at once
	// (a NATS node counts as down until its /healthz says it caught up).
	began := sup.began
	var (
		killsMu sync.Mutex
		kills   []kill
	)
	stopKiller := make(chan struct{})
	killerDone := make(chan struct{})
	var restarts sync.WaitGroup
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() { close(stopKiller) })
		<-killerDone
		restarts.Wait()
	}
	t.Cleanup(stop) // on a t.Fatal before the kills stop
	var natsBusy atomic.Bool
	go func() {
		defer close(killerDone)
		rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
		between := func(a, b time.Duration) time.Duration { return a + time.Duration(rng.Int64N(int64(b-a)+1)) }
		// The first kills go through every kind, in a seeded order, so a
		// short run kills each kind at least once.
		kinds := []string{"worker", "ledgerworker", "coordinator", "nats", "pause"}
		if fleet.tsLedger > 0 {
			kinds = append(kinds, "tsledger")
		}
		if fleet.goLedger == 0 {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "ledgerworker" })
		}
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for n := 0; ; n++ {
			select {
			case <-stopKiller:
				return
			case <-time.After(between(cfg.gapMin, cfg.gapMax)):
			}
			kind := ""
			if n < len(kinds) {
				kind = kinds[n]
			} else {
				kind = kinds[rng.IntN(len(kinds))]
			}
			pool := weft
			if kind == "nats" {
				pool = servers
			}
			var up []*daemon
			for _, d := range pool {
				if (d.kind == kind || kind == "pause") && d.isUp() && !d.isPaused() {
					up = append(up, d)
				}
			}
			// Draw the victim and the pause even when the kill is passed
			// over, so the schedule depends on little but the seed.
			victim := rng.IntN(max(1, len(up)))
			pause := between(200*time.Millisecond, 1500*time.Millisecond)
			if kind == "pause" {
				// Longer than the queues' ack wait (3s) and the
				// coordinators' (10s): the paused process's work goes to
				// another, and its outcomes and decisions come late.
				pause = between(4*time.Second, 7*time.Second)
				if len(up) > 0 && up[victim].kind == "coordinator" {
					pause += 8 * time.Second
				}
			}
			if len(up) == 0 || (kind == "nats" && !natsBusy.CompareAndSwap(false, true)) {
				continue
			}
			d := up[victim]
			if kind == "pause" {
				if !sup.stop(d) {
					continue
				}
			} else {
				sup.kill(d)
			}
			killsMu.Lock()
			kills = append(kills, kill{at: time.Since(began).Round(time.Millisecond), kind: kind, name: d.name, pause: pause})
			killsMu.Unlock()
			restarts.Add(1)
			go func() {
				defer restarts.Done()
				// The fault's duration: the daemon stays killed or paused this long.
				time.Sleep(pause)
				if kind == "pause" {
					sup.cont(d)
					return
				}
				if err := sup.start(d); err != nil {
					t.Errorf("restarting %s: %v", d.name, err)
				}
				if d.kind == "nats" {
					if !healthy(d.health, 60*time.Second) {
						t.Errorf("%s not healthy 60s after its restart", d.name)
					}
					natsBusy.Store(false)
				}
			}()
		}
	}()

	// The client starts the runs at the configured rate. A start that fails
	// (a NATS node just died) is tried again with the same run id: a start
	// that landed but was not acknowledged is then ErrRunExists.
	runs := make([]*chaosRun, cfg.runs)
	interval := time.Duration(float64(time.Second) / cfg.rate)
	for i := range runs {
		r := &chaosRun{id: fmt.Sprintf("chaos-%05d-%s", i, events.NewRunID()), index: i, items: []int{i % 7, 1 + i%3, 20}, tenant: chaosTenant(i, cfg.runs)}
		runs[i] = r
		err := retry(2*time.Minute, func(ctx context.Context) error {
			input := map[string]any{"items": r.items}
			if fleet.sealed {
				input["secret"] = chaosSecret
			}
			_, err := cl.Start(ctx, g, client.WithRunID(r.id), client.WithInput(input),
				client.WithInvocation(map[string]any{"tenant": r.tenant}))
			if errors.Is(err, events.ErrRunExists) {
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatalf("starting run %d: %v", i, err)
		}
		// Paces the starts: the load's arrival rate, not a wait for an event.
		time.Sleep(interval)
	}
	startedAll := time.Since(began)

	// Kills go on for at least minChaos, and until every run was started.
	if rest := cfg.minChaos - time.Since(began); rest > 0 {
		// Chaos lasts at least minChaos: a duration, not a wait for an event.
		time.Sleep(rest)
	}
	stop()
	killsStopped := time.Since(began)
	// Everything is up again (a daemon that exited by itself is revived
	// within a second).
	for _, d := range servers {
		if !healthy(d.health, 60*time.Second) {
			t.Errorf("%s not healthy after the kills stopped", d.name)
		}
	}

	// Wait for every run to end: poll the stream's subject index of the
	// terminal subjects (cheap, and indifferent to a leader change).
	ended := map[string]bool{}
	deadline := time.Now().Add(cfg.endBound)
	for len(ended) < len(runs) && time.Now().Before(deadline) {
		_ = retry(10*time.Second, func(ctx context.Context) error {
			s, err := eventlog.JetStream(st).Stream(ctx, st.StreamName())
			if err != nil {
				return err
			}
			for _, ty := range []events.Type{events.RunCompleted, events.RunFailed, events.RunCancelled} {
				info, err := s.Info(ctx, jetstream.WithSubjectFilter(eventlog.KindFilter(ty)))
				if err != nil {
					return err
				}
				for subj := range info.State.Subjects {
					if run, ok := eventlog.RunOf(subj); ok {
						ended[run] = true
					}
				}
			}
			return nil
		})
		if len(ended) < len(runs) {
			// Polls: the runs' ends are re-read from the log, which notifies nobody.
			time.Sleep(time.Second)
		}
	}
	allEnded := time.Since(began)

	// Read every run's log and check it.
	rep := &chaosReport{t: t}
	logs := map[string][]*events.Event{}
	for _, r := range runs {
		evs := readAfterChaos(t, c, st, r.id)
		logs[r.id] = evs
		rep.checkRun(r, evs, ended[r.id])
	}
	entries, dupEntries := readLedger(t, js)
	writes := readWrites(t, js)
	rep.checkLedger(runs, logs, entries, dupEntries, writes)
	flowSummary := rep.checkFlow(t, runs, logs, writes, js)

	// Daemons that exited by themselves.
	var exits []string
	sup.mu.Lock()
	for _, d := range sup.daemons {
		d.mu.Lock()
		for _, e := range d.exits {
			exits = append(exits, d.name+": "+e)
		}
		d.mu.Unlock()
	}
	sup.mu.Unlock()

	byKind := map[string]int{}
	for _, k := range kills {
		byKind[k.kind]++
	}
	tsKills, tsKeys := "", ""
	if fleet.tsLedger > 0 {
		tsKills = fmt.Sprintf(" tsledger=%d", byKind["tsledger"])
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Worker, "tsledger-") {
				n++
			}
		}
		tsKeys = fmt.Sprintf(" (by TypeScript workers: %d)", n)
	}
	summary := fmt.Sprintf("chaos summary: runs=%d ended=%d stuck=%d late=%d completed=%d wrong=%d kills=%d (worker=%d ledgerworker=%d%s coordinator=%d nats=%d pause=%d) self-exits=%d duplicate-decisions=%d duplicate-facts=%d duplicate-effects=%d absorbed-rewrites=%d lost-effects=%d foreign-keys=%d ledger-keys=%d%s seed=%d wall=%s (runs started by %s, kills stopped at %s, wait for ends over at %s)",
		len(runs), rep.ended, len(runs)-rep.ended, len(rep.late), rep.completed, len(rep.wrong), len(kills),
		byKind["worker"], byKind["ledgerworker"], tsKills, byKind["coordinator"], byKind["nats"], byKind["pause"], len(exits),
		rep.dupDecisions, rep.dupFacts, rep.dupEffects, rep.absorbed, rep.lostEffects, rep.foreignKeys, len(entries), tsKeys,
		cfg.seed, time.Since(began).Round(time.Second), startedAll.Round(time.Second), killsStopped.Round(time.Second), allEnded.Round(time.Second))
	summary += "; " + flowSummary
	fmt.Println(summary)
	t.Log(summary)

	if len(rep.facts) > 0 {
		t.Logf("events other than decisions in the log twice (a timer re-fired; not a failure if the fold passed the second over, as the results say):\n  %s",
			strings.Join(rep.facts[:min(10, len(rep.facts))], "\n  "))
	}
	if rep.failed() || len(exits) > 0 {
		var b strings.Builder
		for _, k := range kills {
			verb := "kill"
			if k.kind == "pause" {
				verb = "pause"
			}
			fmt.Fprintf(&b, "  +%s %s %s (%s), back after %s\n", k.at, verb, k.name, k.kind, k.pause)
		}
		t.Logf("kill timeline (test clock; daemon logs in %s mark each life with the same clock; a pause is SIGSTOP, then SIGCONT):\n%s", cfg.logs, b.String())
		logConsumerStates(t, js, st.StreamName())
	}
	for _, e := range exits {
		t.Errorf("daemon %s", e)
	}
	testkit.CheckNoViolations(t, cfg.logs)
	if fleet.sealed {
		t.Logf("sealed: the raw stream's %d messages show no secret and no plain data", grepSealed(t, js, st.StreamName()))
	}
	rep.fail()
}

// chaosReport gathers the findings of the checks.
type chaosReport struct {
	t            *testing.T
	ended        int
	completed    int
	stuck        []string // details
	late         []string // ended, but after the bound
	causes       map[string]int
	done         map[string]bool // runs completed
	wrong        []string
	dupDecisions int
	dupFacts     int      // events other than decisions twice in the log
	facts        []string // details
	decisions    []string
	dupEffects   int
	effects      []string
	absorbed     int
	lostEffects  int
	foreignKeys  int
	ledgerIssues []string
}

func (r *chaosReport) failed() bool {
	return len(r.stuck) > 0 || len(r.late) > 0 || len(r.wrong) > 0 || len(r.decisions) > 0 || len(r.effects) > 0 || len(r.ledgerIssues) > 0
}

func (r *chaosReport) fail() {
	t := r.t
	t.Helper()
	show := func(what string, items []string) {
		if len(items) == 0 {
			return
		}
		const most = 6
		for _, s := range items[:min(most, len(items))] {
			t.Errorf("%s: %s", what, s)
		}
		if len(items) > most {
			t.Errorf("%s: and %d more", what, len(items)-most)
		}
	}
	if len(r.causes) > 0 {
		var lines []string
		for c, n := range r.causes {
			lines = append(lines, fmt.Sprintf("%5d  %s", n, c))
		}
		slices.Sort(lines)
		slices.Reverse(lines)
		t.Logf("why the %d runs that did not end are stuck (activations by cause):\n%s", len(r.stuck), strings.Join(lines, "\n"))
	}
	show("run did not end", r.stuck)
	show("run ended late", r.late)
	show("run ended wrongly", r.wrong)
	show("decision written twice", r.decisions)
	show("duplicate effect", r.effects)
	show("ledger", r.ledgerIssues)
}

// checkRun checks one run's log: ended, completed with the right result,
// no decision twice.
func (r *chaosReport) checkRun(run *chaosRun, evs []*events.Event, endedInIndex bool) {
	s := projection.Fold(evs)
	if dups := testkit.DuplicateDecisions(evs); len(dups) > 0 {
		r.dupDecisions += len(dups)
		r.decisions = append(r.decisions, fmt.Sprintf("run %s: %s\n%s", run.id, strings.Join(dups, "; "), timeline(evs)))
	}
	if dups := testkit.DuplicateFacts(evs); len(dups) > 0 {
		r.dupFacts += len(dups)
		r.facts = append(r.facts, fmt.Sprintf("run %s: %s", run.id, strings.Join(dups, "; ")))
	}
	if !s.Status.Ended() {
		causes := stuckCauses(s, evs)
		for _, c := range causes {
			if r.causes == nil {
				r.causes = map[string]int{}
			}
			r.causes[causeClass(c)]++
		}
		r.stuck = append(r.stuck, fmt.Sprintf("run %s: status %s; stuck on: %s; nodes: %s; timers: %s\n%s",
			run.id, s.Status, strings.Join(causes, "; "), nodeStates(s), timers(s), timeline(evs)))
		return
	}
	r.ended++
	if !endedInIndex {
		// Its end was not in the log when the wait for ends gave up: it
		// ended, but later than the bound after the kills stopped.
		r.late = append(r.late, fmt.Sprintf("run %s: ended (%s at %s) only after the wait for ends gave up\n%s", run.id, s.Status, endedAt(s), timeline(evs)))
	}
	if s.Status != projection.RunCompleted {
		r.wrong = append(r.wrong, fmt.Sprintf("run %s: %s (%v)\n%s", run.id, s.Status, s.Error, timeline(evs)))
		return
	}
	r.completed++
	if r.done == nil {
		r.done = map[string]bool{}
	}
	r.done[run.id] = true
	var problems []string
	num := func(key string) float64 {
		var f float64
		if err := json.Unmarshal(s.Vars[key], &f); err != nil {
			return math.NaN()
		}
		return f
	}
	if got, want := num("total"), float64(run.total()); got != want {
		problems = append(problems, fmt.Sprintf("state.total = %s, want %v", s.Vars["total"], want))
	}
	if got, want := num("result"), float64(2*run.total()); got != want {
		problems = append(problems, fmt.Sprintf("state.result = %s, want %v", s.Vars["result"], want))
	}
	var out []struct {
		Add float64 `json:"add"`
	}
	items := s.Nodes["items"]
	if items == nil || json.Unmarshal(items.Output, &out) != nil || len(out) != len(run.items) {
		problems = append(problems, fmt.Sprintf("items output %s, want %d items", outputOf(items), len(run.items)))
	} else {
		for i, x := range run.items {
			if out[i].Add != float64(x) {
				problems = append(problems, fmt.Sprintf("items output %s, want item %d to add %d", items.Output, i, x))
				break
			}
		}
	}
	for _, id := range []string{"begin", "a", "b", "c", "two", "mid", "items", "finish"} {
		if n := s.Nodes[id]; n == nil || n.Status != projection.NodeSucceeded {
			problems = append(problems, fmt.Sprintf("node %s is %s", id, statusOf(n)))
		}
	}
	if len(problems) > 0 {
		r.wrong = append(r.wrong, fmt.Sprintf("run %s: %s\n%s", run.id, strings.Join(problems, "; "), timeline(evs)))
	}
}

func endedAt(s *projection.State) string {
	if s.EndedAt == nil {
		return "?"
	}
	return s.EndedAt.Format("15:04:05.000")
}

func outputOf(n *projection.NodeState) string {
	if n == nil {
		return "<none>"
	}
	return string(n.Output)
}

func statusOf(n *projection.NodeState) string {
	if n == nil {
		return "never activated"
	}
	return string(n.Status)
}

// attemptRef names one attempt of one activation: "node/iteration[/item]#attempt".
func attemptRef(ref events.NodeRef, attempt int) string {
	return fmt.Sprintf("%s#%d", ref.Key(), attempt)
}

// checkLedger checks the ledger against the logs.
func (r *chaosReport) checkLedger(runs []*chaosRun, logs map[string][]*events.Event, entries map[string]ledger.Entry, dupEntries []string, writes []ledger.Write) {
	type readyInfo struct {
		run     string
		ref     events.NodeRef
		attempt int
	}
	keys := map[string]readyInfo{}      // idempotency key → the attempt it belongs to
	started := map[string]bool{}        // run + attemptRef → a worker started it
	finalAttempt := map[string]int{}    // run + activation → last attempt readied
	refs := map[string]events.NodeRef{} // run + activation → its ref
	attemptKey := map[string]string{}   // run + attemptRef → idempotency key
	failed := map[string][]string{}     // run + attemptRef → failure types in the log
	succeeded := map[string]bool{}      // run + attemptRef → a NodeInvoked in the log
	for _, run := range runs {
		for _, e := range logs[run.id] {
			if e.Refused != nil {
				continue
			}
			p, err := e.Payload()
			if err != nil {
				continue
			}
			switch d := p.(type) {
			case *events.NodeReadyData:
				if d.Type != ledger.NodeType {
					continue
				}
				keys[d.IdempotencyKey] = readyInfo{run: run.id, ref: d.NodeRef, attempt: d.Attempt}
				act := run.id + " " + d.Key()
				refs[act] = d.NodeRef
				finalAttempt[act] = max(finalAttempt[act], d.Attempt)
				attemptKey[run.id+" "+attemptRef(d.NodeRef, d.Attempt)] = d.IdempotencyKey
			case *events.NodeInvokingData:
				started[run.id+" "+attemptRef(d.NodeRef, d.Attempt)] = true
			case *events.NodeFailedData:
				k := run.id + " " + attemptRef(d.NodeRef, d.Attempt)
				failed[k] = append(failed[k], d.Error.Type)
			case *events.NodeInvokedData:
				succeeded[run.id+" "+attemptRef(d.NodeRef, d.Attempt)] = true
			}
		}
	}
	byRun := map[string][]*events.Event{}
	for id, evs := range logs {
		byRun[id] = evs
	}
	issue := func(run, format string, args ...any) {
		r.ledgerIssues = append(r.ledgerIssues, fmt.Sprintf("run %s: %s\n%s", run, fmt.Sprintf(format, args...), timeline(byRun[run])))
	}
	for _, d := range dupEntries {
		r.ledgerIssues = append(r.ledgerIssues, d)
	}
	// Every key in the ledger belongs to an attempt the log shows started.
	for key, e := range entries {
		ri, ok := keys[key]
		if !ok {
			r.foreignKeys++
			if _, ours := logs[e.Run]; ours {
				issue(e.Run, "ledger key %s (written for %s/%d#%d by %s) is no idempotency key of any node-ready in the log", key, e.Node, e.Iteration, e.Attempt, e.Worker)
			} else {
				r.ledgerIssues = append(r.ledgerIssues, fmt.Sprintf("ledger key %s written for run %s, which the test did not start", key, e.Run))
			}
			continue
		}
		if !started[ri.run+" "+attemptRef(ri.ref, ri.attempt)] {
			r.foreignKeys++
			issue(ri.run, "ledger key %s of attempt %s (written by %s, delivery %d) but the log shows no worker started that attempt", key, attemptRef(ri.ref, ri.attempt), e.Worker, e.Delivery)
		}
		if e.Run != ri.run || e.Node != ri.ref.Node || e.Attempt != ri.attempt {
			issue(ri.run, "ledger key %s holds %+v, but the log gives it to %s", key, e, attemptRef(ri.ref, ri.attempt))
		}
	}
	// Each activation's effects: the final attempt's (it succeeded), and
	// those of earlier attempts that failed after their effect by rule. Runs
	// that did not complete are reported already; their activations may be
	// half way.
	for act, final := range finalAttempt {
		run, _, _ := strings.Cut(act, " ")
		if !r.done[run] {
			continue
		}
		ref := refs[act]
		for k := 1; k <= final; k++ {
			ak := run + " " + attemptRef(ref, k)
			key, ok := attemptKey[ak]
			if !ok {
				issue(run, "attempt %s has no node-ready though attempt %d does", attemptRef(ref, k), final)
				continue
			}
			rule := ledger.Rule(key, k)
			_, written := entries[key]
			switch {
			case k == final && rule != ledger.Succeed:
				issue(run, "the last attempt %s fails by rule, yet no attempt followed it", attemptRef(ref, k))
			case k == final && !written:
				r.lostEffects++
				issue(run, "attempt %s is the last (the log shows %s) but its key %s is not in the ledger: an effect lost", attemptRef(ref, k), outcomes(succeeded[ak], failed[ak]), key)
			case k < final && rule == ledger.Succeed && written:
				r.dupEffects++
				r.effects = append(r.effects, fmt.Sprintf("run %s: attempt %s succeeded by rule and wrote the ledger (key %s; the log shows %s), yet attempt %d ran after it\n%s",
					run, attemptRef(ref, k), key, outcomes(succeeded[ak], failed[ak]), final, timeline(byRun[run])))
			case k < final && rule == ledger.Succeed:
				issue(run, "attempt %s succeeds by rule and wrote nothing (the log shows %s), yet attempt %d followed it", attemptRef(ref, k), outcomes(succeeded[ak], failed[ak]), final)
			case rule == ledger.FailBefore && written:
				issue(run, "attempt %s fails before its effect by rule, but its key %s is in the ledger", attemptRef(ref, k), key)
			case k < final && rule == ledger.FailAfter && !written:
				r.lostEffects++
				issue(run, "attempt %s failed after its effect by rule (the log shows %s), but its key %s is not in the ledger: a write lost", attemptRef(ref, k), outcomes(succeeded[ak], failed[ak]), key)
			}
		}
	}
	// Re-executions of one attempt that the key absorbed.
	for _, w := range writes {
		if w.Result == "exists" {
			r.absorbed++
		}
	}
}

func outcomes(ok bool, failures []string) string {
	var parts []string
	if ok {
		parts = append(parts, "invoked")
	}
	for _, f := range failures {
		parts = append(parts, "failed "+f)
	}
	if len(parts) == 0 {
		return "no outcome"
	}
	return strings.Join(parts, ", ")
}

// readLedger reads every entry of the ledger bucket from its stream (a key
// in it twice is reported: Create should make that impossible).
func readLedger(t *testing.T, js jetstream.JetStream) (map[string]ledger.Entry, []string) {
	t.Helper()
	entries := map[string]ledger.Entry{}
	var dups []string
	prefix := "$KV." + ledger.Bucket + "."
	readAll(t, js, "KV_"+ledger.Bucket, func(m jetstream.Msg) {
		key := strings.TrimPrefix(m.Subject(), prefix)
		var e ledger.Entry
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			dups = append(dups, fmt.Sprintf("ledger key %s: undecodable entry %q", key, m.Data()))
			return
		}
		if old, ok := entries[key]; ok {
			dups = append(dups, fmt.Sprintf("ledger key %s written twice: %+v, then %+v", key, old, e))
		}
		entries[key] = e
	})
	return entries, dups
}

// readWrites reads the record of every attempt to write the ledger.
func readWrites(t *testing.T, js jetstream.JetStream) []ledger.Write {
	t.Helper()
	var out []ledger.Write
	readAll(t, js, ledger.WritesStream, func(m jetstream.Msg) {
		var w ledger.Write
		if json.Unmarshal(m.Data(), &w) == nil {
			out = append(out, w)
		}
	})
	return out
}

// readAll delivers every message of a stream to f, in order.
func readAll(t *testing.T, js jetstream.JetStream, stream string, f func(jetstream.Msg)) {
	t.Helper()
	err := retry(time.Minute, func(ctx context.Context) error {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		if s.CachedInfo().State.Msgs == 0 {
			return nil
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		var got []jetstream.Msg
		for {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			n := 0
			last := uint64(1)
			for m := range batch.Messages() {
				got = append(got, m)
				n++
				if md, err := m.Metadata(); err == nil {
					last = md.NumPending
				}
			}
			if err := batch.Error(); err != nil {
				return err
			}
			if n == 0 {
				return errors.New("reading " + stream + ": no messages before the end")
			}
			if last == 0 {
				break
			}
		}
		for _, m := range got {
			f(m)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading stream %s: %v", stream, err)
	}
}

// timeline prints a run's log, one event a line, for a report.
func timeline(evs []*events.Event) string {
	var b strings.Builder
	var t0 time.Time
	for i, e := range evs {
		if i == 0 {
			t0 = e.Stored
		}
		fmt.Fprintf(&b, "    %6d +%-8s %s", e.Seq, e.Stored.Sub(t0).Round(time.Millisecond), strings.TrimSuffix(strings.TrimPrefix(string(e.Type), "dev.weft."), ".v1"))
		if e.Refused != nil {
			fmt.Fprintf(&b, " REFUSED %v\n", e.Refused)
			continue
		}
		p, _ := e.Payload()
		switch d := p.(type) {
		case *events.NodeReadyData:
			fmt.Fprintf(&b, " %s attempt %d key %.8s", d.Key(), d.Attempt, d.IdempotencyKey)
			if d.Type == ledger.NodeType {
				fmt.Fprintf(&b, " (rule: %s)", ruleName(ledger.Rule(d.IdempotencyKey, d.Attempt)))
			}
			for _, rt := range d.Routed {
				fmt.Fprintf(&b, " [routed %s]", rt.Key())
			}
		case *events.NodeInvokingData:
			fmt.Fprintf(&b, " %s attempt %d delivery %d by %s", d.Key(), d.Attempt, d.Delivery, d.Worker)
		case *events.NodeInvokedData:
			fmt.Fprintf(&b, " %s attempt %d delivery %d by %s", d.Key(), d.Attempt, d.Delivery, d.Worker)
			if e.IsDecision() {
				b.WriteString(" (decision)")
			}
		case *events.NodeFailedData:
			fmt.Fprintf(&b, " %s attempt %d delivery %d by %s: %s", d.Key(), d.Attempt, d.Delivery, d.Worker, d.Error.Type)
		case *events.NodeSkippedData:
			fmt.Fprintf(&b, " %s (%s)", d.Key(), d.Reason)
		case *events.NodeWaitingData:
			fmt.Fprintf(&b, " %s for %s", d.Key(), d.For)
		case *events.NodeRoutedData:
			fmt.Fprintf(&b, " %s", d.Key())
		case *events.RetryScheduledData:
			fmt.Fprintf(&b, " %s attempt %d at +%s timer %s", d.Key(), d.Attempt, d.At.Sub(t0).Round(time.Millisecond), d.TimerID)
		case *events.TimerFiredData:
			fmt.Fprintf(&b, " %s %s attempt %d timer %s", d.Purpose, d.Ref.Key(), d.Attempt, d.TimerID)
		case *events.RunFailedData:
			fmt.Fprintf(&b, " %s: %v", d.Node, &d.Error)
		}
		fmt.Fprintf(&b, "  id=%s\n", e.ID)
	}
	return b.String()
}

func ruleName(o ledger.Outcome) string {
	switch o {
	case ledger.FailBefore:
		return "fail before effect"
	case ledger.FailAfter:
		return "fail after effect"
	}
	return "succeed"
}

func nodeStates(s *projection.State) string {
	var parts []string
	for id, n := range s.Nodes {
		parts = append(parts, fmt.Sprintf("%s=%s(it %d, attempt %d)", id, n.Status, n.Iteration, n.Attempt))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func timers(s *projection.State) string {
	if len(s.Timers) == 0 {
		return "none"
	}
	var parts []string
	for id, tm := range s.Timers {
		parts = append(parts, fmt.Sprintf("%s(%s %s attempt %d)", id, tm.Purpose, tm.Ref.Key(), tm.Attempt))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// logConsumerStates logs where every consumer of the events stream (the
// coordinators' partitions, the queues) stands.
func logConsumerStates(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Logf("consumers: %v", err)
		return
	}
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		leader := ""
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		t.Logf("consumer %s: delivered %d ack floor %d pending %d ack pending %d redelivered %d waiting %d leader %q",
			info.Name, info.Delivered.Stream, info.AckFloor.Stream, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, leader)
	}
	if err := list.Err(); err != nil {
		t.Logf("consumers: %v", err)
	}
}

// stuckCauses names why a run that did not end is stuck, from its fold and
// its log: one cause per activation (or map item) still active, so that a
// report groups the runs by the failure they show.
func stuckCauses(s *projection.State, evs []*events.Event) []string {
	type retryInfo struct {
		seq   uint64
		timer string
	}
	ready := map[string]bool{}
	invoking := map[string]string{} // attempt → last delivery's worker
	outcome := map[string]string{}
	retries := map[string]retryInfo{}
	fired := map[string][]uint64{}
	for _, e := range evs {
		if e.Refused != nil {
			continue
		}
		p, err := e.Payload()
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *events.NodeReadyData:
			ready[attemptRef(d.NodeRef, d.Attempt)] = true
		case *events.NodeInvokingData:
			invoking[attemptRef(d.NodeRef, d.Attempt)] = fmt.Sprintf("delivery %d by %s", d.Delivery, d.Worker)
		case *events.NodeInvokedData:
			outcome[attemptRef(d.NodeRef, d.Attempt)] = "invoked"
		case *events.NodeFailedData:
			outcome[attemptRef(d.NodeRef, d.Attempt)] = "failed " + d.Error.Type
		case *events.NodeCancelledData:
			outcome[attemptRef(d.NodeRef, d.Attempt)] = "cancelled"
		case *events.RetryScheduledData:
			retries[attemptRef(d.NodeRef, d.Attempt)] = retryInfo{seq: e.Seq, timer: d.TimerID}
		case *events.TimerFiredData:
			fired[d.TimerID] = append(fired[d.TimerID], e.Seq)
		}
	}
	var causes []string
	add := func(class, format string, args ...any) {
		causes = append(causes, class+" ["+fmt.Sprintf(format, args...)+"]")
	}
	unit := func(ref events.NodeRef, status projection.NodeStatus, attempt int) {
		ar := attemptRef(ref, attempt)
		switch status {
		case projection.NodeRetrying:
			rs, ok := retries[attemptRef(ref, attempt+1)]
			switch {
			case !ok:
				add("retrying, no retry.scheduled in the log", "%s", ar)
			case len(fired[rs.timer]) == 0:
				add("retrying, the retry timer never fired", "%s timer %s decided at seq %d", ar, rs.timer, rs.seq)
			case slices.Max(fired[rs.timer]) < rs.seq:
				add("retrying, stranded: the timer fired before its retry.scheduled landed", "%s timer %s fired at seq %v, decided at seq %d", ar, rs.timer, fired[rs.timer], rs.seq)
			default:
				add("retrying, though the timer fired after its decision", "%s timer %s fired at seq %v, decided at seq %d", ar, rs.timer, fired[rs.timer], rs.seq)
			}
		case projection.NodeRetryDue:
			add("retry due, no node-ready for the next attempt", "%s", ar)
		case projection.NodeReady:
			if w, ok := invoking[ar]; ok {
				add("ready, though a worker took it", "%s %s", ar, w)
			} else {
				add("node-ready never taken by a worker", "%s", ar)
			}
		case projection.NodeRunning:
			if o, ok := outcome[ar]; ok {
				add("running, yet its outcome is in the log with no decision after it", "%s %s", ar, o)
			} else {
				add("running, no outcome in the log", "%s last %s", ar, invoking[ar])
			}
		default:
			add("node "+string(status), "%s", ar)
		}
	}
	for id, n := range s.Nodes {
		if !n.Status.Active() {
			continue
		}
		if len(n.Items) == 0 {
			unit(events.NodeRef{Node: id, Iteration: n.Iteration}, n.Status, n.Attempt)
			continue
		}
		active := false
		for i, it := range n.Items {
			if it.Status.Active() {
				active = true
				unit(events.NodeRef{Node: id, Iteration: n.Iteration, Item: &i}, it.Status, it.Attempt)
			}
		}
		if !active {
			add("every map item ended, no decision on the map", "%s/%d", id, n.Iteration)
		}
	}
	if len(causes) == 0 {
		add("no activation active, yet no decision ends the run", "last seq %d", s.LastSeq)
	}
	slices.Sort(causes)
	return causes
}

// causeClass is a cause without its details, for counting.
func causeClass(cause string) string {
	class, _, _ := strings.Cut(cause, " [")
	return class
}

// readAfterChaos reads a run's log once the chaos is over. Twice under a
// full -race suite, every run had ended and every server was healthy, yet
// the test's connection got 503s ("JetStream system temporarily
// unavailable") from the server it was on for minutes: the run is then
// read through a fresh connection to each server in turn, and if none
// answers, the servers' last log lines say why.
func readAfterChaos(t *testing.T, c *cluster, st events.Store, run string) []*events.Event {
	t.Helper()
	var evs []*events.Event
	read := func(st events.Store, d time.Duration) error {
		return retry(d, func(ctx context.Context) (err error) {
			evs, err = st.Read(ctx, run, 0, 0)
			return err
		})
	}
	err := read(st, time.Minute)
	if err == nil {
		return evs
	}
	for _, url := range c.urls {
		other, oerr := openOn(t, c.roles.Config(t, userClient), url)
		if oerr != nil {
			t.Logf("reading run %s through %s: %v", run, url, oerr)
			continue
		}
		rerr := read(other, 30*time.Second)
		if rerr == nil {
			t.Logf("read run %s through %s: the test's connection got %v for a minute", run, url, err)
			return evs
		}
		t.Logf("reading run %s through %s: %v", run, url, rerr)
	}
	var logs []string
	for _, l := range c.logs {
		if strings.HasPrefix(filepath.Base(l), "nats-") {
			logs = append(logs, "--- "+filepath.Base(l)+":\n"+tail(l, 15))
		}
	}
	t.Fatalf("reading run %s: %v, through every server too\n%s", run, err, strings.Join(logs, "\n"))
	return nil
}

// openOn opens the events store through a connection of cfg's user to
// the server at url alone, closed when the test ends.
func openOn(t *testing.T, cfg natsconn.Config, url string) (events.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := cfg.Connect(url)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return events.Open(ctx, js, events.WithReplicas(3))
}
