package security

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

func TestMain(m *testing.M) {
	if os.Getenv(flooderEnv) != "" {
		// This binary, run again as the flooding client of
		// TestNamespaceFairness.
		os.Exit(flooder())
	}
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// binaries builds nats-server (from the module Weft embeds), the daemons
// and the CLI, once per test binary.
func binaries(t *testing.T) string {
	t.Helper()
	return testkit.Build(t, "github.com/nats-io/nats-server/v2",
		"github.com/weft-dev/weft/cmd/coordinator", "github.com/weft-dev/weft/cmd/nodeworker",
		"github.com/weft-dev/weft/cmd/weft")
}

// The queues of the test deployment: workers of "default" attack "gpu".
const (
	queueA = "default"
	queueB = "gpu"
)

// server is one nats-server process with the generated roles.
type server struct {
	url   string
	roles *testkit.Roles
	creds map[string]natsconn.Config // user name → its connection settings
	log   string
}

// startServer generates the roles (testkit.NewRoles: the generator
// 'weft roles' runs) and starts nats-server with them on a loopback port.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerWith(t, natsconn.Deployment{Queues: []string{queueA, queueB}})
}

// startServerWith is startServer for deployment d.
func startServerWith(t *testing.T, d natsconn.Deployment) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{roles: testkit.NewRoles(t, d), creds: map[string]natsconn.Config{}}
	for _, u := range d.Users() {
		s.creds[u.Name] = s.roles.Config(t, u.Name)
	}
	s.url, s.log = startNATS(t, dir, s.roles.Include(t, dir))
	return s
}

// startNATS starts a nats-server process on a free loopback port with its
// store in dir and the configuration lines auth (the roles' include) and
// waits until it listens; it returns its URL and log file.
func startNATS(t *testing.T, dir, auth string) (url, log string) {
	t.Helper()
	port := testkit.FreePort(t)
	conf := filepath.Join(dir, "server.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 8MB\njetstream { store_dir: %q }\n", port, filepath.Join(dir, "js")) + auth
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "nats.log")
	startProcess(t, "nats-server", log, nil, "-c", conf)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("nats-server did not start: %v\n%s", err, b)
		}
		// Polls: the server's port opens without an event to wait for.
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port), log
}

// roleEnv is the environment a process of a user runs with.
func (s *server) roleEnv(user string) []string {
	c := s.creds[user]
	return []string{"WEFT_NATS_USER=" + c.User, "WEFT_NATS_PASSWORD=" + c.Password}
}

// startProcess starts one of the built binaries with its output in logPath.
func startProcess(t *testing.T, bin, logPath string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binaries(t), bin), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() && bin != "nats-server" {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("--- last lines of %s:\n%s", bin, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return cmd
}

// conn is a connection of one role that records the permission errors
// the server reports on it.
type conn struct {
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
	seen chan struct{}
}

// connect connects as user, with the settings natsconn gives its role
// (its own inbox prefix included).
func (s *server) connect(t *testing.T, user string) *conn {
	t.Helper()
	cfg, ok := s.creds[user]
	if !ok {
		t.Fatalf("no user %q", user)
	}
	c := &conn{user: user, seen: make(chan struct{}, 1024)}
	opts := append(cfg.Options(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c.mu.Lock()
		c.errs = append(c.errs, err.Error())
		c.mu.Unlock()
		select {
		case c.seen <- struct{}{}:
		default:
		}
	}))
	nc, err := nats.Connect(s.url, opts...)
	if err != nil {
		t.Fatalf("connecting as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// violation waits until the server has reported a permissions violation
// of kind ("Publish" or "Subscription") on subject.
func (c *conn) violation(t *testing.T, kind, subject string) {
	t.Helper()
	want := strings.ToLower(fmt.Sprintf("permissions violation for %s to %q", kind, subject))
	deadline := time.After(3 * time.Second)
	for {
		c.mu.Lock()
		for _, e := range c.errs {
			if strings.Contains(strings.ToLower(e), want) {
				c.mu.Unlock()
				return
			}
		}
		errs := append([]string(nil), c.errs...)
		c.mu.Unlock()
		select {
		case <-c.seen:
		case <-deadline:
			t.Fatalf("%s: no %s reported; errors on the connection: %q", c.user, want, errs)
		}
	}
}

// refusedPublish publishes a message as the role and checks that the
// server refused it and that the stream did not store it.
func (c *conn) refusedPublish(t *testing.T, admin *conn, m *nats.Msg) {
	t.Helper()
	before := lastSeqOn(t, admin, m.Subject)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.js.PublishMsg(ctx, m)
	if err == nil {
		t.Fatalf("%s: publish on %s acknowledged", c.user, m.Subject)
	}
	c.violation(t, "Publish", m.Subject)
	if after := lastSeqOn(t, admin, m.Subject); after != before {
		t.Fatalf("%s: publish on %s stored at %d", c.user, m.Subject, after)
	}
}

// refusedRequest sends a request (a JetStream API call) and checks that it
// was refused and got no answer.
func (c *conn) refusedRequest(t *testing.T, subject string, body []byte) {
	t.Helper()
	msg, err := c.nc.Request(subject, body, 500*time.Millisecond)
	if err == nil {
		t.Fatalf("%s: %s answered: %s", c.user, subject, msg.Data)
	}
	c.violation(t, "Publish", subject)
}

// refusedSubscribe subscribes and checks the server refused it.
func (c *conn) refusedSubscribe(t *testing.T, subject string) {
	t.Helper()
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.violation(t, "Subscription", subject)
}

// lastSeqOn is the sequence of the last message stored on subject (0:
// none), read as the admin.
func lastSeqOn(t *testing.T, admin *conn, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, "WEFT")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return 0
	}
	return m.Sequence
}

// openStore opens the events store as a role, creating the stream if the
// role may.
func openStore(t *testing.T, c *conn) events.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := events.Open(ctx, c.js)
	if err != nil {
		t.Fatalf("%s: opening the store: %v", c.user, err)
	}
	return st
}

// setup runs 'weft roles -setup' as the admin: the stream and the KV
// buckets, which the other roles may not create.
func (s *server) setup(t *testing.T) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "weft"), "roles", "-setup", "-nats", s.url)
	cmd.Env = append(os.Environ(), s.roleEnv(natsconn.UserName(natsconn.RoleAdmin, ""))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weft roles -setup: %v\n%s", err, out)
	}
}
