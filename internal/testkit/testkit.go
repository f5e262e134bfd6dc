// Package testkit is the one room for what Weft's tests stand on besides
// the simulator (internal/sim, whose in-memory log the contract suite
// internal/eventlog/logtest holds to the real store):
//
//   - real NATS JetStream servers: an embedded server on a free loopback
//     port with a temporary store, shut down and waited for before the
//     store directory goes (Server, ServerAt), and the faults injected
//     into a real store (failed and slow appends, duplicated decisions,
//     outages);
//   - Weft's programs run as separate processes (to kill them, or to see
//     what crosses process boundaries): the binaries built once per test
//     binary (Build), free loopback ports (FreePort); for tests under
//     Weft's roles, the roles' users for the servers to include
//     (NewRoles, with the generator 'weft roles' uses), and checks that no
//     server or process log reports a refused permission
//     (CheckNoViolations) and that a refused publish is refused
//     (RefusedPublish).
package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Server starts an embedded JetStream server for the test.
func Server(t testing.TB) *server.Server { return ServerWith(t, embedded.Config{}) }

// ServerWith starts an embedded JetStream server with cfg (its store
// directory and port are the test's).
func ServerWith(t testing.TB, cfg embedded.Config) *server.Server {
	t.Helper()
	cfg.StoreDir, cfg.Port = t.TempDir(), -1
	s, err := embedded.Start(cfg)
	if err != nil {
		t.Fatalf("starting nats: %v", err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	return s
}

// Connect connects to s and returns the connection and its JetStream
// context; both close with the test.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// Store starts a server and opens the event store on it, with opts.
func Store(t testing.TB, opts ...events.Option) (*server.Server, events.Store) {
	t.Helper()
	return StoreOn(t, Server(t), opts...)
}

// StoreOn opens the event store on a server started for the test, with
// opts.
func StoreOn(t testing.TB, s *server.Server, opts ...events.Option) (*server.Server, events.Store) {
	t.Helper()
	_, js := Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := events.Open(ctx, js, opts...)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	if err := eventlog.EnsureTimers(ctx, st); err != nil {
		t.Fatalf("setting up the timers stream: %v", err)
	}
	return s, st
}
