package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/provision"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// The kit's deployment.
const (
	// Queue is the task queue the worker under test serves.
	Queue = "conf"
	// AckWait is the queue consumer's ack wait: short, so that a killed
	// worker's item is delivered again within seconds.
	AckWait = 2 * time.Second
	// MaxPayload is the server's max_payload: small enough that the
	// oversized cases stay cheap.
	MaxPayload = 1 << 20
	// identity is the client's name, written in the events it appends.
	identity = "conformance-kit"
)

// Options configure Run.
type Options struct {
	// Worker is the command that starts the worker under test (program
	// and arguments), run in the current directory.
	Worker []string
	// Short runs the quick subset of the cases.
	Short bool
	// Match, when set, runs only the cases whose name it matches.
	Match *regexp.Regexp
	// Out receives one line per case (default os.Stdout).
	Out io.Writer
	// Log, when set, receives the engine's log and the worker's output
	// as they come (-v).
	Log io.Writer
	// Dir is where the kit keeps the server's store, the logs and the
	// effects file; empty: a temporary directory, removed at the end
	// unless Keep is set.
	Dir  string
	Keep bool
}

// Status is a case's outcome.
type Status string

// The outcomes.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one case's outcome.
type Result struct {
	Name    string
	Status  Status
	Why     string
	Elapsed time.Duration
}

// ErrFailed is returned by Run when a case failed.
var ErrFailed = errors.New("conformance: a case failed")

// Run runs the cases against the worker and returns their results; the
// error is ErrFailed when a case failed, or why the kit could not run.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if len(o.Worker) == 0 {
		return nil, errors.New("conformance: no worker command")
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	k, err := start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer k.close()
	results := k.runCases(ctx)
	for _, r := range results {
		if r.Status == Fail {
			return results, ErrFailed
		}
	}
	return results, nil
}

// kit is a running engine with a worker under test.
type kit struct {
	o        Options
	dir      string
	tmp      bool
	log      *slog.Logger
	logFile  *os.File
	effects  string
	srvCfg   embedded.Config
	srvMu    sync.Mutex
	srv      *server.Server
	url      string
	creds    map[string]natsconn.Credential
	conns    []*nats.Conn
	admin    events.Store
	adminNC  *nats.Conn
	adminJS  jetstream.JetStream
	client   *client.Client
	stopCoor context.CancelFunc
	coorDone chan struct{}

	terminated *seqSet // stream sequences of the queue's terminated items

	workerMu sync.Mutex
	worker   *proc // the worker process serving now, if any
	started  int   // worker processes started so far (names conf-1, conf-2, …)

	// startFailures counts the cases in a row whose worker did not come
	// up; at two, startErr ends the suite's hopes.
	startFailures int
	startErr      error
}

// start sets the engine up: the server under the roles, the admin's
// provisioning and the queue's consumer, the coordinator, the client.
//
// Size: the kit's set-up in the order it must happen (server, stream,
// consumers, the worker process, its readiness).
func start(ctx context.Context, o Options) (_ *kit, err error) {
	k := &kit{o: o, dir: o.Dir, terminated: newSeqSet()}
	if k.dir == "" {
		if k.dir, err = os.MkdirTemp("", "weft-conformance-"); err != nil {
			return nil, err
		}
		k.tmp = true
	} else if err := os.MkdirAll(k.dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			k.close()
		}
	}()
	if k.logFile, err = os.Create(filepath.Join(k.dir, "engine.log")); err != nil {
		return nil, err
	}
	var logOut io.Writer = k.logFile
	if o.Log != nil {
		logOut = io.MultiWriter(k.logFile, o.Log)
	}
	k.log = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	k.effects = filepath.Join(k.dir, "effects.log")
	if err := os.WriteFile(k.effects, nil, 0o644); err != nil {
		return nil, err
	}
	users, err := k.roleUsers()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	k.srvCfg = embedded.Config{StoreDir: filepath.Join(k.dir, "nats"), Port: port, ServerName: "weft-conformance", MaxPayload: MaxPayload, Users: users}
	if k.srv, err = embedded.Start(k.srvCfg); err != nil {
		return nil, err
	}
	k.url = k.srv.ClientURL()

	setupCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := k.setupAdmin(setupCtx); err != nil {
		return nil, err
	}
	coorStore, err := k.openStore(setupCtx, natsconn.RoleCoordinator)
	if err != nil {
		return nil, err
	}
	clientStore, err := k.openStore(setupCtx, natsconn.RoleClient)
	if err != nil {
		return nil, err
	}
	k.client = client.New(clientStore, client.WithIdentity(identity), client.WithLogger(k.log))
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	k.stopCoor, k.coorDone = stop, make(chan struct{})
	go func() {
		defer close(k.coorDone)
		if err := coordinator.New(coorStore, coordinator.WithLogger(k.log.With(logattr.Part, "coordinator"))).Run(run); err != nil && run.Err() == nil {
			k.log.Error("coordinator stopped", logattr.Error, err)
		}
	}()
	return k, nil
}

// roleUsers generates the users of Weft's roles for the kit's queue,
// as 'weft roles' does, and returns them as the server's users.
func (k *kit) roleUsers() ([]*server.User, error) {
	creds, err := natsconn.Deployment{Queues: []string{Queue}}.NewCredentials()
	if err != nil {
		return nil, err
	}
	k.creds = map[string]natsconn.Credential{}
	var users []*server.User
	for _, c := range creds {
		k.creds[c.User.Name] = c
		users = append(users, &server.User{
			Username: c.User.Name,
			Password: c.Password,
			Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: c.User.PublishAllow, Deny: c.User.PublishDeny},
				Subscribe: &server.SubjectPermission{Allow: c.User.SubscribeAllow},
			},
		})
	}
	return users, nil
}

// connect opens a connection as role's user, reconnecting forever.
func (k *kit) connect(role natsconn.Role) (*nats.Conn, error) {
	c := k.creds[natsconn.UserName(role, Queue)]
	cfg := natsconn.Config{User: c.User.Name, Password: c.Password, Name: "weft conformance kit (" + c.User.Name + ")"}
	nc, err := cfg.Connect(k.url, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		k.log.Error("NATS reported an error", logattr.User, c.User.Name, logattr.Error, err)
	}))
	if err != nil {
		return nil, err
	}
	k.conns = append(k.conns, nc)
	return nc, nil
}

// openStore opens the events store as role.
func (k *kit) openStore(ctx context.Context, role natsconn.Role) (events.Store, error) {
	nc, err := k.connect(role)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := events.Open(ctx, js, events.WithLogger(k.log))
	if err != nil {
		return nil, fmt.Errorf("opening the event store as %s: %w", role, err)
	}
	return st, nil
}

// setupAdmin provisions the deployment as the admin ('weft roles
// -setup'), creates the queue's consumer with the kit's ack wait, and
// listens to the server's advisories of terminated work items.
func (k *kit) setupAdmin(ctx context.Context) error {
	st, err := k.openStore(ctx, natsconn.RoleAdmin)
	if err != nil {
		return err
	}
	if _, err := provision.Run(ctx, st, provision.Options{}); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	k.admin, k.adminNC = st, k.conns[len(k.conns)-1]
	if k.adminJS, err = jetstream.New(k.adminNC); err != nil {
		return err
	}
	if _, err := workqueue.EnsureQueue(ctx, k.adminJS, st.StreamName(), Queue, workqueue.QueueOptions{AckWait: AckWait, Logger: k.log}); err != nil {
		return fmt.Errorf("creating the queue's consumer: %w", err)
	}
	_, err = k.adminNC.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED."+st.StreamName()+"."+workqueue.QueueConsumer(Queue), k.terminated.onAdvisory)
	if err != nil {
		return err
	}
	return k.adminNC.Flush()
}

// restartServer stops the NATS server and starts it again on the same
// port and store after pause.
func (k *kit) restartServer(pause time.Duration) error {
	k.srvMu.Lock()
	defer k.srvMu.Unlock()
	embedded.Stop(k.srv)
	time.Sleep(pause)
	srv, err := embedded.Start(k.srvCfg)
	if err != nil {
		return fmt.Errorf("starting NATS again: %w", err)
	}
	k.srv = srv
	return nil
}

// close stops the worker, the coordinator and the server, and removes the
// kit's directory unless it is to be kept.
func (k *kit) close() {
	k.workerMu.Lock()
	if k.worker != nil {
		k.worker.kill()
	}
	k.workerMu.Unlock()
	if k.stopCoor != nil {
		k.stopCoor()
		select {
		case <-k.coorDone:
		case <-time.After(10 * time.Second):
		}
	}
	for _, nc := range k.conns {
		nc.Close()
	}
	k.srvMu.Lock()
	embedded.Stop(k.srv)
	k.srvMu.Unlock()
	if k.logFile != nil {
		_ = k.logFile.Close()
	}
	if k.tmp && !k.o.Keep {
		_ = os.RemoveAll(k.dir)
	}
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago: the
// server restarts on it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
