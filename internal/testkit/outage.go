package testkit

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Helpers of the outage tests, which start a daemon before its server and
// stop and restart the server under it: a fixed port, a store directory
// kept across restarts, and a log to wait on.

// FreePort is a TCP port on 127.0.0.1 free when asked.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ServerAt starts an embedded JetStream server on port with its store in
// dir, so that a restart on the same port and dir finds its data; it stops
// with the test.
func ServerAt(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	return s
}

// OpenStoreRetry opens the event store on srv, retrying while JetStream
// is not ready (as a daemon does).
func OpenStoreRetry(t testing.TB, srv *server.Server) events.Store {
	t.Helper()
	_, js := Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st events.Store
	err := setup.Retry(ctx, nil, "the stream", nil, func(ctx context.Context) (err error) {
		st, err = events.Open(ctx, js)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// LogWatch is a log destination that tells when a line holding a string
// was written.
type LogWatch struct {
	mu      sync.Mutex
	b       bytes.Buffer
	waiters map[string]chan struct{}
}

// NewLogWatch returns an empty LogWatch.
func NewLogWatch() *LogWatch { return &LogWatch{waiters: map[string]chan struct{}{}} }

// Write implements io.Writer.
func (l *LogWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	for s, ch := range l.waiters {
		if bytes.Contains(p, []byte(s)) {
			close(ch)
			delete(l.waiters, s)
		}
	}
	return len(p), nil
}

// String is everything written.
func (l *LogWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Wait waits for a line holding s, written before or after the call; the
// test fails, with the log, after d.
func (l *LogWatch) Wait(t testing.TB, s string, d time.Duration) {
	t.Helper()
	l.mu.Lock()
	if strings.Contains(l.b.String(), s) {
		l.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	l.waiters[s] = ch
	l.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("no log line with %s after %s:\n%s", s, d, l)
	}
}
