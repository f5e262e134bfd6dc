package security

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
)

// Namespaces (natsconn's namespace.go): one NATS account each, set up
// with 'weft roles -namespaces' and 'weft roles -setup -out DIR', served
// by one coordinator and one worker process each given -namespace a,b.
// The attacks come with valid credentials of namespace a; namespace b is
// the victim.

const (
	nsA = "a"
	nsB = "b"
)

// tenants is a nats-server process with two namespaces.
type tenants struct {
	*server
	roles string // the directory 'weft roles' wrote
	d     natsconn.Deployment
}

// user is the user of role r (and queue q) in namespace ns.
func user(ns string, r natsconn.Role, q string) string { return natsconn.NamespaceUser(ns, r, q) }

// startTenants generates two namespaces' roles with quota q, starts
// nats-server with their accounts, and sets both up as their admins.
func startTenants(t *testing.T, q natsconn.Quota) *tenants {
	t.Helper()
	// Each namespace reserves its stream's bytes from the server's
	// JetStream storage, which the server sizes from the disk's free
	// space: two namespaces at the default (10 GiB each, 7.5 GiB of
	// stream) do not fit beside a disk 81% full. The tests need far less.
	q.MaxStorage, q.StreamMaxBytes = 1<<30, 0
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles")
	d := natsconn.Deployment{Queues: []string{queueA}, Partitions: 4,
		Namespaces: []natsconn.Namespace{{Name: nsA, Quota: q}, {Name: nsB, Quota: q}}}
	if _, err := natsconn.WriteRoles(roles, d, bcrypt.MinCost, false); err != nil {
		t.Fatal(err)
	}
	creds, err := natsconn.ReadCredentials(roles, d)
	if err != nil {
		t.Fatal(err)
	}
	s := &tenants{server: &server{creds: map[string]natsconn.Config{}}, roles: roles, d: d}
	for _, c := range creds {
		s.creds[c.User.Name] = natsconn.Config{User: c.User.Name, Password: c.Password, Namespace: c.User.Namespace}
	}
	s.url, s.log = startNATS(t, dir, "include ./roles/auth.conf\n")
	out, err := s.weft(t, nil, "roles", "-setup", "-out", roles)
	if err != nil {
		t.Fatalf("weft roles -setup -out: %v\n%s", err, out)
	}
	for _, ns := range []string{nsA, nsB} {
		if !strings.Contains(string(out), "namespace "+ns+": stream WEFT") {
			t.Fatalf("weft roles -setup set up no namespace %s:\n%s", ns, out)
		}
	}
	return s
}

// weft runs the CLI with env (and no WEFT_ variable of the test's own).
func (s *tenants) weft(t *testing.T, env []string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "weft"), append(args, "-nats", s.url)...)
	cmd.Env = append(cleanEnv(), env...)
	return cmd.CombinedOutput()
}

// daemons starts one coordinator and one worker process serving both
// namespaces, each with one connection per namespace's account.
func (s *tenants) daemons(t *testing.T, dir string) {
	t.Helper()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), nil,
		"-nats", s.url, "-namespace", nsA+","+nsB, "-roles-dir", s.roles)
	startProcess(t, "nodeworker", filepath.Join(dir, "nodeworker.log"), nil,
		"-nats", s.url, "-namespace", nsA+","+nsB, "-roles-dir", s.roles, "-queues", queueA, "-concurrency", "64")
}

// client is a pkg/client of user's.
func (s *tenants) client(t *testing.T, user string) *client.Client {
	t.Helper()
	return client.New(openStore(t, s.connect(t, user)))
}

// streamMsgs counts the messages of a namespace's events stream, as its
// admin.
func (s *tenants) streamMsgs(t *testing.T, ns string) uint64 {
	t.Helper()
	info, err := mustStream(t, s.connect(t, user(ns, natsconn.RoleAdmin, ""))).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

const oneNode = `
name: one
nodes:
  - {id: a, type: echo}
edges:
  - {from: START, to: a}
  - {from: a, to: END}
`

const approval = `
name: approval
nodes:
  - {id: ask, type: human, outputSchema: {type: object}}
edges:
  - {from: START, to: ask}
  - {from: ask, to: END}
`

// parse parses a graph; t may be nil (the flooder process), which then
// panics on an error.
func parse(t testing.TB, src string) *graph.Graph {
	g, err := graph.Parse([]byte(src), "test.yaml")
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatal(err)
	}
	return g
}

// TestNamespaces: what a holder of namespace a's credentials can do to
// namespace b (nothing), to the server (nothing it may not), and how fast
// (no faster than its namespace's admission limits).
func TestNamespaces(t *testing.T) {
	q := natsconn.DefaultQuota()
	q.StartsPerSecond, q.SignalsPerSecond = 20, 20
	q.MaxConsumers = 40
	s := startTenants(t, q)
	dir := t.TempDir()
	s.daemons(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Namespace b's runs: one completed, one waiting for a signal.
	b := s.client(t, user(nsB, natsconn.RoleClient, ""))
	doneB, err := b.Start(ctx, parse(t, oneNode), client.WithInput(map[string]any{"secret": "b's"}))
	if err != nil {
		t.Fatalf("b starts a run: %v", err)
	}
	if st, err := b.Wait(ctx, doneB); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("b's run: %v %v", st, err)
	}
	waitingB, err := b.Start(ctx, parse(t, approval))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool {
		st, err := b.Get(ctx, waitingB)
		return err == nil && st.Nodes["ask"] != nil && st.Nodes["ask"].Status == projection.NodeWaiting
	}, "b's run waits at its human node")
	// Namespace a has a run of its own, so its lists are not empty.
	a := s.client(t, user(nsA, natsconn.RoleClient, ""))
	runA, err := a.Start(ctx, parse(t, oneNode))
	if err != nil {
		t.Fatalf("a starts a run: %v", err)
	}
	if st, err := a.Wait(ctx, runA); err != nil || st.Status != projection.RunCompleted {
		t.Fatalf("a's run: %v %v", st, err)
	}
	bHistory, err := b.History(ctx, waitingB)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("cross-namespace", func(t *testing.T) {
		for _, r := range []natsconn.Role{natsconn.RoleClient, natsconn.RoleUI} {
			c := s.client(t, user(nsA, r, ""))
			for _, run := range []string{doneB, waitingB} {
				if _, err := c.Get(ctx, run); !errors.Is(err, events.ErrRunNotFound) {
					t.Errorf("%s of a reads b's run %s: %v", r, run, err)
				}
				if _, err := c.Events(ctx, run); !errors.Is(err, events.ErrRunNotFound) {
					t.Errorf("%s of a reads b's events: %v", r, err)
				}
				if _, err := c.Summary(ctx, run); !errors.Is(err, client.ErrNotInReadModel) {
					t.Errorf("%s of a reads b's summary: %v", r, err)
				}
			}
			runs, err := c.List(ctx)
			if err != nil {
				t.Fatalf("%s of a lists: %v", r, err)
			}
			if len(runs) != 1 || runs[0].RunID != runA {
				t.Errorf("%s of a lists %+v, want only a's run %s", r, runs, runA)
			}
			for _, status := range []projection.RunStatus{projection.RunCompleted, projection.RunRunning} {
				if runs, _ := c.List(ctx, client.WithStatus(status), client.WithGraph("approval")); len(runs) != 0 {
					t.Errorf("%s of a lists b's runs by graph: %+v", r, runs)
				}
			}
		}
		// Steering b's runs: not found, nothing written.
		if err := a.Signal(ctx, waitingB, "ask", map[string]any{"approved": true}); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a signals b's run: %v", err)
		}
		if _, err := a.Update(ctx, waitingB, "ask", map[string]any{"approved": true}); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a updates b's run: %v", err)
		}
		if err := a.Cancel(ctx, waitingB, "attack"); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a cancels b's run: %v", err)
		}
		if err := a.Terminate(ctx, waitingB, "attack"); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a terminates b's run: %v", err)
		}
		if _, err := a.Fork(ctx, doneB, 1); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a forks b's run: %v", err)
		}
		// Below pkg/client: a's client may not publish on any run's
		// subject; asked through admission, the signal is for no run of
		// a's namespace; a direct get of b's run's start is answered by
		// a's stream, which has no such message.
		ca := s.connect(t, user(nsA, natsconn.RoleClient, ""))
		sig, err := events.New(waitingB, "forged-signal", time.Time{}, &events.SignalReceivedData{Node: "ask", Data: json.RawMessage(`{"approved":true}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admission.Request(ctx, ca.nc, sig); !errors.Is(err, events.ErrRunNotFound) {
			t.Errorf("a's admission request to signal b's run: %v", err)
		}
		for _, subject := range []string{sub(waitingB, "c.signal"), sub(waitingB, "c.cancelreq"), sub(events.NewRunID(), "c.started")} {
			ca.refusedRequest(t, subject, []byte("{}"))
		}
		resp, err := ca.nc.Request("$JS.API.DIRECT.GET.WEFT."+sub(doneB, "c.started"), nil, 3*time.Second)
		if err != nil || resp.Header.Get("Status") != "404" || bytes.Contains(resp.Data, []byte("b's")) {
			t.Errorf("a's direct get of b's run's start: %v %v %q", err, resp.Header, resp.Data)
		}
		// a hears nothing of b's runs: b's signal ends its run, and a's
		// subscription to every run's subjects stays silent.
		heard, err := ca.nc.SubscribeSync("weft.r.*.*.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if h, err := b.History(ctx, waitingB); err != nil || len(h) != len(bHistory) {
			t.Fatalf("b's run changed under a's attacks: %d events, had %d (%v)", len(h), len(bHistory), err)
		}
		// An update is a signal: the client role's rights in its
		// namespace (its admission request) carry it, and its verdict
		// comes back.
		if res, err := b.Update(ctx, waitingB, "ask", map[string]any{"approved": true}); err != nil || !res.Accepted {
			t.Fatalf("b updates its run: %+v %v", res, err)
		}
		if st, err := b.Wait(ctx, waitingB); err != nil || st.Status != projection.RunCompleted {
			t.Fatalf("b's signalled run: %v %v", st, err)
		}
		if m, err := heard.NextMsg(time.Second); err == nil {
			t.Errorf("a heard b's run on %s", m.Subject)
		}
		// A program on pkg/client that says which namespace it is for
		// is told when its credentials are another's.
		wrong := client.New(openStore(t, s.connect(t, user(nsB, natsconn.RoleClient, ""))), client.WithNamespace(nsA))
		if _, err := wrong.List(ctx); !errors.Is(err, client.ErrWrongNamespace) {
			t.Errorf("a client for namespace a over b's credentials lists: %v", err)
		}
		if _, err := wrong.Start(ctx, parse(t, oneNode)); !errors.Is(err, client.ErrWrongNamespace) {
			t.Errorf("a client for namespace a over b's credentials starts: %v", err)
		}
		// The CLI, as a's client, is told the same.
		env := s.roleEnv(user(nsA, natsconn.RoleClient, ""))
		env = append(env, "WEFT_NAMESPACE="+nsA)
		if out, err := s.weft(t, env, "status", waitingB); err == nil || !strings.Contains(string(out), "not found") {
			t.Errorf("weft status of b's run as a: %v\n%s", err, out)
		}
		if out, err := s.weft(t, env, "-o", "json", "list"); err != nil || strings.Contains(string(out), doneB) || !strings.Contains(string(out), runA) {
			t.Errorf("weft list as a: %v\n%s", err, out)
		}
	})

	t.Run("start flood", func(t *testing.T) {
		before := s.streamMsgs(t, nsB)
		g := parse(t, oneNode)
		var admitted, refused atomic.Int64
		var why atomic.Value
		end := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for time.Now().Before(end) {
					_, err := a.Start(ctx, g)
					switch {
					case err == nil:
						admitted.Add(1)
					case errors.Is(err, client.ErrAdmission):
						refused.Add(1)
						why.CompareAndSwap(nil, err.Error())
					default:
						t.Errorf("a start neither admitted nor refused for the limit: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("2 s of starts by a's client: %d admitted, %d refused: %v", admitted.Load(), refused.Load(), why.Load())
		if n := admitted.Load(); n < 20 || n > 3*20 {
			t.Errorf("%d starts admitted in 2 s at 20 per second", n)
		}
		if msg, _ := why.Load().(string); !strings.Contains(msg, "admission: run starts over 20 per second in namespace a") {
			t.Errorf("the refusal says %q", msg)
		}
		// Published directly, a start is refused by the server.
		ca := s.connect(t, user(nsA, natsconn.RoleClient, ""))
		ca.refusedRequest(t, sub(events.NewRunID(), "c.started"), []byte("{}"))
		if after := s.streamMsgs(t, nsB); after != before {
			t.Errorf("b's stream took %d messages during a's flood", after-before)
		}
	})

	t.Run("signal flood", func(t *testing.T) {
		time.Sleep(1100 * time.Millisecond) // the flood's tickets gone
		// 80 human nodes, each waiting for one signal (a signal for a node
		// that does not wait is refused by the client before admission),
		// so only admission refuses.
		var g strings.Builder
		g.WriteString("name: many\nnodes:\n")
		for i := range 80 {
			fmt.Fprintf(&g, "  - {id: h%d, type: human}\n", i)
		}
		g.WriteString("edges:\n")
		for i := range 80 {
			fmt.Fprintf(&g, "  - {from: START, to: h%d}\n  - {from: h%d, to: END}\n", i, i)
		}
		run, err := a.Start(ctx, parse(t, g.String()))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, func() bool {
			st, err := a.Get(ctx, run)
			return err == nil && st.Status == projection.RunRunning && len(st.Nodes) == 80 && st.Nodes["h79"].Status == projection.NodeWaiting
		}, "a's run waits at its 80 human nodes")
		time.Sleep(1100 * time.Millisecond) // the start's ticket gone
		var admitted, refused atomic.Int64
		var why atomic.Value
		var wg sync.WaitGroup
		began := time.Now()
		for i := range 80 {
			wg.Go(func() {
				err := a.Signal(ctx, run, fmt.Sprintf("h%d", i), i, client.WithSignalID(fmt.Sprintf("s%d", i)))
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, client.ErrAdmission):
					refused.Add(1)
					why.CompareAndSwap(nil, err.Error())
				default:
					t.Errorf("a signal neither admitted nor refused for the limit: %v", err)
				}
			})
		}
		wg.Wait()
		t.Logf("80 signals at once: %d admitted, %d refused: %v", admitted.Load(), refused.Load(), why.Load())
		// Each signal reads the run first (is the node waiting?), so on
		// a loaded machine the 80 spread over more than a second: the
		// limit admits 20 in each second they span.
		window := int64(time.Since(began)/time.Second) + 2
		if admitted.Load() > 20*window || refused.Load() < 1 {
			t.Errorf("%d signals admitted, %d refused, at 20 per second", admitted.Load(), refused.Load())
		}
		if msg, _ := why.Load().(string); !strings.Contains(msg, "admission: signals and cancel requests over 20 per second in namespace a") {
			t.Errorf("the refusal says %q", msg)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		before := s.streamMsgs(t, nsB)
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			// b's credentials told namespace a.
			{s.roleEnv(user(nsB, natsconn.RoleClient, "")), []string{"list", "-namespace", nsA}, `credentials of another namespace: -namespace a, but user weft-client@b is in NATS account "b"`},
			// A namespace the deployment does not have.
			{nil, []string{"list", "-namespace", "c", "-roles-dir", s.roles}, `namespace "c": no credentials of weft-client@c`},
			// Names that cannot be a subject token or an account.
			{nil, []string{"list", "-namespace", "a.b", "-roles-dir", s.roles}, `namespace "a.b": not a valid name`},
			{nil, []string{"list", "-namespace", "a b", "-roles-dir", s.roles}, `not a valid name`},
			// Two namespaces for one command.
			{nil, []string{"list", "-namespace", "a,b", "-roles-dir", s.roles}, "a command serves one namespace"},
			// Quotas of zero, names that cannot be one.
			{nil, []string{"roles", "-out", t.TempDir(), "-namespaces", "x", "-starts-per-second", "0"}, "-starts-per-second: a quota of zero"},
			{nil, []string{"roles", "-out", t.TempDir(), "-namespaces", "x", "-max-storage", "0"}, "-max-storage: a quota of zero"},
			{nil, []string{"roles", "-out", t.TempDir(), "-namespaces", "x,$SYS"}, `namespace "$SYS": not a valid name`},
			{nil, []string{"roles", "-out", t.TempDir(), "-namespaces", "x", "-max-ack-pending", "10"}, "max-ack-pending: want at least 20000"},
		} {
			out, err := s.weft(t, c.env, c.args...)
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("weft %s: %v, want %q in:\n%s", strings.Join(c.args, " "), err, c.want, out)
			}
			if bytes.Contains(out, []byte("panic")) {
				t.Errorf("weft %s panicked:\n%s", strings.Join(c.args, " "), out)
			}
		}
		// A coordinator told namespace a with b's credentials stops at
		// once, saying so, and decides nothing of b's.
		log := filepath.Join(t.TempDir(), "wrong.log")
		cmd := startProcess(t, "coordinator", log, s.roleEnv(user(nsB, natsconn.RoleCoordinator, "")), "-nats", s.url, "-namespace", nsA)
		waitExit(t, cmd, 20*time.Second)
		if b, _ := os.ReadFile(log); !bytes.Contains(b, []byte("credentials of another namespace")) {
			t.Errorf("the coordinator with another namespace's credentials:\n%s", b)
		}
		if after := s.streamMsgs(t, nsB); after != before {
			t.Errorf("b's stream took %d messages", after-before)
		}
	})

	// Last: it leaves namespace a at its consumer limit.
	t.Run("consumer flood", func(t *testing.T) {
		// The client creates no consumer at all: every create is refused
		// by its permissions, however many it sends.
		admin := s.connect(t, user(nsA, natsconn.RoleAdmin, ""))
		before, err := admin.js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ca := s.connect(t, user(nsA, natsconn.RoleClient, ""))
		for i := range 200 {
			name := fmt.Sprintf("flood%d", i)
			body, _ := json.Marshal(map[string]any{"stream_name": "KV_weft-runs", "config": map[string]any{
				"name": name, "deliver_subject": natsconn.InboxPrefixFor(user(nsA, natsconn.RoleClient, "")) + "." + name, "filter_subject": "$KV.weft-runs.>", "ack_policy": "none"}})
			if err := ca.nc.PublishRequest("$JS.API.CONSUMER.CREATE.KV_weft-runs."+name+".$KV.weft-runs.>", ca.nc.NewRespInbox(), body); err != nil {
				t.Fatal(err)
			}
		}
		ca.violation(t, "Publish", "$JS.API.CONSUMER.CREATE.KV_weft-runs.flood199.$KV.weft-runs.>")
		info, err := admin.js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Others' ephemeral consumers (an earlier test's watcher) may
		// come and go meanwhile: the count must not grow, and none of
		// the flood's names may exist.
		if info.Consumers > before.Consumers {
			t.Fatalf("namespace a holds %d consumers after the client's flood, %d before", info.Consumers, before.Consumers)
		}
		runs, err := admin.js.Stream(ctx, "KV_weft-runs")
		if err != nil {
			t.Fatal(err)
		}
		names := runs.ConsumerNames(ctx)
		for name := range names.Name() {
			if strings.HasPrefix(name, "flood") {
				t.Fatalf("the client's consumer %s exists", name)
			}
		}
		if err := names.Err(); err != nil {
			t.Fatal(err)
		}
		// The UI may create its live list's watcher: as many as it likes
		// until the account's max_consumers, which the server enforces
		// (per stream: the bucket's stream is full, the others are not).
		ui := s.connect(t, user(nsA, natsconn.RoleUI, ""))
		var refusal string
		for i := range 2 * q.MaxConsumers {
			name := fmt.Sprintf("ui%d", i)
			body, _ := json.Marshal(map[string]any{"stream_name": "KV_weft-runs", "config": map[string]any{
				"name": name, "deliver_subject": natsconn.InboxPrefixFor(user(nsA, natsconn.RoleUI, "")) + "." + name, "filter_subject": "$KV.weft-runs.>", "ack_policy": "none"}})
			msg, err := ui.nc.Request("$JS.API.CONSUMER.CREATE.KV_weft-runs."+name+".$KV.weft-runs.>", body, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var resp struct {
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			_ = json.Unmarshal(msg.Data, &resp)
			if resp.Error != nil {
				refusal = resp.Error.Description
				break
			}
		}
		if !strings.Contains(refusal, "maximum consumers limit reached") {
			t.Fatalf("the UI's consumers were not stopped at the account's limit: %q", refusal)
		}
		info, err = admin.js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("namespace a's read model at its limit of %d consumers (%d in the account): %q", q.MaxConsumers, info.Consumers, refusal)
		// Namespace b is not held up: a run starts and ends.
		run, err := b.Start(ctx, parse(t, oneNode))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := b.Wait(ctx, run); err != nil || st.Status != projection.RunCompleted {
			t.Fatalf("b's run while a is at its consumer limit: %v %v", st, err)
		}
	})

	testkit.CheckNoViolations(t, filepath.Join(dir, "coordinator.log"), filepath.Join(dir, "nodeworker.log"))
}

func waitFor(t *testing.T, ctx context.Context, ok func() bool, what string) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("%s: never", what)
		}
		// Polls: ok reads state that changes without an event to wait for.
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits for a process startProcess started to exit by itself.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s is still running", cmd.Path)
	}
}
