// Package reliability holds the tests that kill processes during real runs:
// NATS cluster nodes, coordinators and workers, each a separate process on
// loopback ports, and check that every run finishes once, with nothing lost
// and nothing applied twice.
//
// The three-node cluster drills run under Weft's roles (deploy/SECURITY.md):
// the servers include the authorization 'weft roles' generates
// (testkit.NewRoles), the admin sets the stream and the buckets up
// (package provision, what 'weft roles -setup' does), every coordinator and
// worker connects with its role's credentials, the test starts and reads
// runs as the client, and each drill ends by checking that no server or
// process log reports a refused permission (testkit.CheckNoViolations).
// Only the test's own view of what it checks (leases, consumers, the chaos
// ledger) is read as the admin.
package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/provision"
	"github.com/weft-dev/weft/internal/reliability/ledger"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
)

// binaries builds nats-server (from the module Weft embeds), the
// coordinator and the worker.
func binaries(t *testing.T) string {
	t.Helper()
	return testkit.Build(t, "github.com/nats-io/nats-server/v2",
		"github.com/weft-dev/weft/cmd/coordinator", "github.com/weft-dev/weft/cmd/nodeworker")
}

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
}

// start starts one of the built programs, with env added to the test's
// environment (a role's credentials; nil: none).
func start(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binaries(t), bin), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, cmd: cmd, log: logf}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() && !strings.HasPrefix(name, "nats") {
			b, _ := os.ReadFile(logf.Name())
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("--- last lines of %s:\n%s", name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// The users of the drills' deployment: one per role, a worker user per
// queue (the ledger queue is the chaos drill's).
var (
	deployment      = natsconn.Deployment{Queues: []string{worker.DefaultQueue, ledger.Queue}}
	userAdmin       = natsconn.UserName(natsconn.RoleAdmin, "")
	userClient      = natsconn.UserName(natsconn.RoleClient, "")
	userCoordinator = natsconn.UserName(natsconn.RoleCoordinator, "")
	userWorker      = natsconn.UserName(natsconn.RoleWorker, worker.DefaultQueue)
)

// cluster is three nats-server processes forming one JetStream cluster,
// under the roles, and the processes started on it.
type cluster struct {
	urls    []string
	servers []*process
	args    [][]string
	roles   *testkit.Roles
	logs    []string // every process's log, the servers' included
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{roles: testkit.NewRoles(t, deployment)}
	var client, route []int
	for range 3 {
		client = append(client, testkit.FreePort(t))
		route = append(route, testkit.FreePort(t))
	}
	var routes []string
	for _, p := range route {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "server.conf")
		body := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
max_payload: 8MB
jetstream { store_dir: %q }
cluster { name: weft, listen: 127.0.0.1:%d, routes: [%s] }
`, i+1, client[i], filepath.Join(dir, "js"), route[i], strings.Join(routes, ", ")) + c.roles.Include(t, dir)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c.args = append(c.args, []string{"-c", conf})
		c.servers = append(c.servers, c.start(t, fmt.Sprintf("nats-%d", i+1), "nats-server", "", "-c", conf))
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	return c
}

func (c *cluster) url() string { return strings.Join(c.urls, ",") }

// start starts a program on the cluster as user (none for nats-server),
// with its log among the cluster's.
func (c *cluster) start(t *testing.T, name, bin, user string, args ...string) *process {
	t.Helper()
	var env []string
	if user != "" {
		env = c.roles.Env(t, user)
	}
	p := start(t, name, bin, env, args...)
	c.logs = append(c.logs, p.log.Name())
	return p
}

// worker starts a nodeworker of the default queue on the cluster.
func (c *cluster) worker(t *testing.T, name string, args ...string) *process {
	t.Helper()
	return c.start(t, name, "nodeworker", userWorker, append([]string{"-nats", c.url(), "-replicas", "3", "-concurrency", "32"}, args...)...)
}

// coordinators starts n partitioned coordinators on the cluster, as the
// coordinator role.
func (c *cluster) coordinators(t *testing.T, n int, ttl time.Duration) *coordinators {
	t.Helper()
	cs := &coordinators{url: c.url(), replicas: 3, ttl: ttl, start: func(t *testing.T, name string, args ...string) *process {
		return c.start(t, name, "coordinator", userCoordinator, args...)
	}}
	for range n {
		cs.add(t)
	}
	return cs
}

// checkNoViolations fails the test for any permission the servers refused,
// or a process was refused.
func (c *cluster) checkNoViolations(t *testing.T) {
	t.Helper()
	testkit.CheckNoViolations(t, c.logs...)
}

// connect connects to the cluster as user, waiting for it to come up.
func (c *cluster) connect(t *testing.T, user string) jetstream.JetStream {
	t.Helper()
	cfg := c.roles.Config(t, user)
	cfg.Name = "reliability test (" + user + ")"
	nc, err := cfg.Connect(c.url(), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// openStores sets the deployment up as the admin, as 'weft roles -setup'
// does: the R3 events stream, then the timers stream and the KV buckets
// (provision.Run; the leases bucket's TTL is the coordinators' lease
// duration, ttl), retrying while the cluster elects its leaders. It
// returns the client's store, which starts and reads the runs, and the
// admin's, which only the test's own checks (leases, consumers) use.
func openStores(t *testing.T, c *cluster, ttl time.Duration) (client, admin events.Store) {
	t.Helper()
	admin = c.retryOpen(t, c.connect(t, userAdmin), events.WithReplicas(3))
	if err := retry(60*time.Second, func(ctx context.Context) error {
		_, err := provision.Run(ctx, admin, provision.Options{Replicas: 3, LeaseTTL: ttl})
		return err
	}); err != nil {
		t.Fatalf("setting the deployment up: %v", err)
	}
	return c.retryOpen(t, c.connect(t, userClient), events.WithReplicas(3)), admin
}

// retryOpen opens the events store, retrying while the cluster elects
// its leaders; if it never does, the servers' last log lines say why.
func (c *cluster) retryOpen(t *testing.T, js jetstream.JetStream, opts ...events.Option) events.Store {
	t.Helper()
	var st events.Store
	if err := retry(90*time.Second, func(ctx context.Context) (err error) {
		st, err = events.Open(ctx, js, opts...)
		return err
	}); err != nil {
		var logs []string
		for _, l := range c.logs {
			if strings.HasPrefix(filepath.Base(l), "nats-") {
				logs = append(logs, "--- "+filepath.Base(l)+":\n"+tail(l, 15))
			}
		}
		t.Fatalf("the cluster never took the events stream: %v\n%s", err, strings.Join(logs, "\n"))
	}
	return st
}

const chain = `
name: chain
nodes:
  - {id: a, type: sleep, config: {duration: 40ms}}
  - {id: b, type: echo}
  - {id: c, type: sleep, config: {duration: 40ms}}
  - {id: d, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: b}
  - {from: b, to: c}
  - {from: c, to: d}
  - {from: d, to: END}
`

func startRuns(t *testing.T, st events.Store, n int) []string {
	t.Helper()
	g, err := graph.Parse([]byte(chain), "chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
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
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = st.Append(ctx, run, 0, e)
			cancel()
			if err == nil || try > 20 {
				break
			}
			// Backs off while the cluster elects a leader: an election has no event a client can wait for.
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("starting run: %v", err)
		}
		runs = append(runs, run)
	}
	return runs
}

// checkRuns waits for every run to end and checks each completed with one
// decision of each kind per node: nothing lost, nothing applied twice.
func checkRuns(t *testing.T, st events.Store, runs []string, nodes int, timeout time.Duration) {
	t.Helper()
	testkit.WaitEnded(t, st, runs, timeout)
	testkit.CheckExactlyOnce(t, st, runs, nodes)
}

// TestClusterNodeKilledDuringRuns runs a three-node NATS cluster with an R3
// events stream, three coordinators splitting the runs into partitions and
// two workers as processes, kills one NATS node with SIGKILL while runs are
// in flight, brings it back, and checks that every run completes exactly
// once.
func TestClusterNodeKilledDuringRuns(t *testing.T) {
	c := startCluster(t)
	st, admin := openStores(t, c, leaseTTL)
	cs := c.coordinators(t, 3, leaseTTL)
	c.worker(t, "worker-1", "-name", "w1")
	c.worker(t, "worker-2", "-name", "w2")
	waitHolders(t, admin, 30*time.Second, "partitions spread over the three coordinators", cs.spread)

	runs := startRuns(t, st, 30)
	// Lets the runs get under way, so that the kill lands mid-run: there is no one event that says so.
	time.Sleep(700 * time.Millisecond)
	c.servers[1].kill(t)
	more := startRuns(t, st, 10)
	// Keeps the node down across a few decisions: the fault's duration, not a wait for an event.
	time.Sleep(2 * time.Second)
	c.servers[1] = c.start(t, "nats-2-again", "nats-server", "", c.args[1]...)

	checkRuns(t, st, append(runs, more...), 4, 120*time.Second)
	waitHolders(t, admin, 30*time.Second, "every partition held by a live coordinator", cs.heldByLive)
	c.checkNoViolations(t)
}

// TestWorkersAndCoordinatorKilledOnCluster kills a worker and the
// coordinator holding partition 0 (SIGKILL) during runs on the cluster,
// checks that the other two coordinators take its partitions over once its
// leases expire, and starts replacements.
func TestWorkersAndCoordinatorKilledOnCluster(t *testing.T) {
	c := startCluster(t)
	st, admin := openStores(t, c, leaseTTL)
	cs := c.coordinators(t, 3, leaseTTL)
	w1 := c.worker(t, "worker-1", "-name", "w1", "-ack-wait", "2s")
	c.worker(t, "worker-2", "-name", "w2")
	held := waitHolders(t, admin, 30*time.Second, "partitions spread over the three coordinators", cs.spread)

	runs := startRuns(t, st, 30)
	// Lets the worker take work, so that the kill lands mid-node: there is no one event that says so.
	time.Sleep(500 * time.Millisecond)
	w1.kill(t)
	victim := cs.byPID(held[0])
	victim.kill(t)
	cs.remove(victim)
	// The two left take the victim's partitions over when its leases
	// expire, while its replacement is not started yet.
	waitHolders(t, admin, 4*leaseTTL, "the killed coordinator's partitions taken over by the other two", cs.spread)
	more := startRuns(t, st, 10)
	cs.add(t)
	c.worker(t, "worker-3", "-name", "w3")

	checkRuns(t, st, append(runs, more...), 4, 120*time.Second)
	waitHolders(t, admin, 30*time.Second, "partitions spread again over three coordinators", cs.spread)
	c.checkNoViolations(t)
}
